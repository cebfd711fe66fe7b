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

On a fast clock (``conformance.adapters.warp``) the agent's own real time between attempts weighs
N times as much in its seconds, and a loaded machine stretches it beyond what the calibration
measured, so a failed timing verdict there is always confirmed on the real clock, ``--verify`` or
not (:func:`judged`): the scenario is run again on the slowest clock the calibration accepted,
or on the same clock again when the run was already on it (a failure then stands when it
reproduces; ``Clock.confirm_scale``), and that run is the scenario's result, its timing verdicts saying what the fast clock gave
(``fast_clock``); the fast-clock run is kept in the entry (``fast_clock_run``). Reruns of
``--verify`` run on the confirming clock too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.checks import TIMING
from conformance.verdicts import SEVERITY

__all__ = ["FAILING", "judged", "settle", "verified"]

# Verdicts worse than PASS: each stands only when it reproduces.
FAILING = frozenset({"FAIL", "NON-STRICT", "ERROR", "TIMEOUT"})
_DOUBTFUL = frozenset({"FAIL", "NON-STRICT"})  # a first verdict that asks for a rerun

Run = tuple[dict, dict[str, dict]]  # run_scenario's (entry, verdicts)


def settle(seen: list[str]) -> str:
    """The verdict of a criterion given in turn ``seen`` by the runs of one scenario."""
    stands = [v for v in seen if v not in FAILING or seen.count(v) >= 2]
    return min(stands or seen, key=SEVERITY.index)


def _doubtful(verdicts: dict[str, dict]) -> list[str]:
    return [cid for cid, v in verdicts.items() if cid in TIMING and v["verdict"] in _DOUBTFUL]


def _fast_clock(entry: dict) -> float | None:
    """The speed of the fast clock the run's agent was on (None: real time)."""
    speed = (entry.get("clock") or {}).get("time_warp")
    return float(speed) if speed else None


def judged(once: Callable[[bool], Run], verify: int) -> Run:
    """The outcome of a scenario run by ``once(confirm)``: on a fast clock a failed timing
    verdict is confirmed by a run on the slowest clock calibrated, or the same clock again
    (``confirm=True``), then ``--verify`` settles as usual (module docstring)."""
    first = once(False)
    entry, verdicts = first
    speed = _fast_clock(entry)
    doubtful = _doubtful(verdicts)
    if speed is None or not doubtful:
        return verified(first, lambda: once(False), verify)
    again_entry, again_verdicts = once(True)
    slower = _fast_clock(again_entry)
    where = f"the x{slower:g} clock" if slower else "the real clock"
    settled = dict(again_verdicts)
    for cid in doubtful:
        fast = verdicts[cid]
        again = again_verdicts.get(cid)
        if again is None:
            continue
        settled[cid] = {
            **again,
            "observed": f"{again.get('observed') or ''} (on {where}; on the x{speed:g} "
            f"fast clock: {fast['verdict']}, {fast.get('observed') or ''})",
            "fast_clock": {"speed": speed, **_run_of(fast)},
        }
    out = dict(again_entry)
    out["clock"] = {
        **(again_entry.get("clock") or {}),
        "note": f"{'x' + format(slower, 'g') if slower else 'real time'}: a failed timing "
        f"verdict on the x{speed:g} fast clock, confirmed on {where}",
    }
    out["fast_clock_run"] = entry
    return verified((out, settled), lambda: once(True), verify)


def verified(first: Run, again: Callable[[], Run], verify: int) -> Run:
    """``first``, or with ``verify`` > 0 and a failed timing verdict, the settled outcome of
    ``first`` and up to ``verify`` runs of ``again()`` (module docstring)."""
    entry, verdicts = first
    doubtful = _doubtful(verdicts)
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
