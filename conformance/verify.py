"""``--verify N``: a timing verdict that failed is a FAIL only when it reproduces.

Theory of operation: a scenario whose verdict for a timing criterion (``checks.TIMING``: one that
rests on how long something took on the wire) came out FAIL or NON-STRICT is run again, up to N
times, and the verdicts of those criteria are compared across the runs. A failing verdict (FAIL,
NON-STRICT, ERROR, TIMEOUT) stands only when two runs gave it; the criterion's verdict is then
the worst verdict that stands, or, when none does, the worst of the others. When every rerun
agrees with the first run, one rerun settles it; when they differ the criterion is *flaky*: all
N reruns are made, its verdict entry says ``flaky: true`` and lists every run's verdict
(``runs``), and the scenario's entry keeps every rerun's own entry, journal and events included
(``reruns``). Other criteria keep the first run's verdict.

An expectations file may mark a criterion ``flaky: true`` (``conformance.expectations``): a flaky
verdict of it then gates on its best run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.checks import TIMING
from conformance.verdicts import SEVERITY

__all__ = ["FAILING", "settle", "verified"]

# Verdicts worse than PASS: each stands only when it reproduces.
FAILING = frozenset({"FAIL", "NON-STRICT", "ERROR", "TIMEOUT"})
_DOUBTFUL = frozenset({"FAIL", "NON-STRICT"})  # a first verdict that asks for a rerun

Run = tuple[dict, dict[str, dict]]  # run_scenario's (entry, verdicts)


def settle(seen: list[str]) -> str:
    """The verdict of a criterion given in turn ``seen`` by the runs of one scenario."""
    stands = [v for v in seen if v not in FAILING or seen.count(v) >= 2]
    return min(stands or seen, key=SEVERITY.index)


def verified(first: Run, again: Callable[[], Run], verify: int) -> Run:
    """``first``, or with ``verify`` > 0 and a failed timing verdict, the settled outcome of
    ``first`` and up to ``verify`` runs of ``again()`` (module docstring)."""
    entry, verdicts = first
    doubtful = [cid for cid, v in verdicts.items() if cid in TIMING and v["verdict"] in _DOUBTFUL]
    if verify < 1 or not doubtful:
        return first
    runs = [first]
    for _ in range(verify):
        runs.append(again())
        agree = all(
            r[1].get(cid, {}).get("verdict") == verdicts[cid]["verdict"]
            for r in runs
            for cid in doubtful
        )
        if agree:
            break  # reproduced: the first verdicts stand
    settled = dict(verdicts)
    for cid in doubtful:
        seen = [r[1].get(cid, {}).get("verdict", "ERROR") for r in runs]
        if len(set(seen)) == 1:
            continue
        final = settle(seen)
        chosen = next(r[1][cid] for r in runs if r[1].get(cid, {}).get("verdict") == final)
        settled[cid] = {
            **chosen,
            "flaky": True,
            "runs": [_run_of(r[1].get(cid)) for r in runs],
        }
    out: dict[str, Any] = dict(entry)
    out["reruns"] = [r[0] for r in runs[1:]]
    return out, settled


def _run_of(v: dict | None) -> dict[str, Any]:
    if v is None:
        return {"verdict": "ERROR", "observed": "the criterion was not judged in this run"}
    return {"verdict": v["verdict"], "observed": v.get("observed")}
