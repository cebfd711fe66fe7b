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

Whatever the clock, a failed timing verdict is confirmed before it stands, ``--verify`` or not
(:func:`judged`): the scenario is run again on a slower clock and that run is the scenario's
result, each confirmed verdict saying what the first run gave (``confirmed``); the first run is
kept in the entry (``first_run``). A wrong wait is wrong in scenario seconds on any clock, while
the real milliseconds of a loaded machine or of the agent's own runtime weigh less on a slower
one: so a failure that does not come back was the machine's, not the agent's. The slower clock
is a time scale ``CONFIRM_SLOWER`` times the run's (up to real time; in real time, real time
again: a failure then stands when it reproduces). On a fast clock (``conformance.adapters.warp``)
it is the slowest clock the calibration accepted, or the same clock again when the run was
already on it (``Clock.confirm_scale``); the verdicts also say what the fast clock gave
(``fast_clock``), and the fast-clock run is kept in ``fast_clock_run``. Reruns of ``--verify``
run on the confirming clock too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from conformance.checks import TIMING
from conformance.results import Run, ScenarioEntry, ScenarioVerdict
from conformance.verdicts import SEVERITY

__all__ = ["FAILING", "confirmed", "judged", "settle", "verified"]

# Verdicts worse than PASS: each stands only when it reproduces.
FAILING = frozenset({"FAIL", "NON-STRICT", "ERROR", "TIMEOUT"})
_DOUBTFUL = frozenset({"FAIL", "NON-STRICT"})  # a first verdict that asks for a rerun


def settle(seen: list[str]) -> str:
    """The verdict of a criterion given in turn ``seen`` by the runs of one scenario."""
    stands = [v for v in seen if v not in FAILING or seen.count(v) >= 2]
    return min(stands or seen, key=SEVERITY.index)


def _doubtful(verdicts: Mapping[str, ScenarioVerdict]) -> list[str]:
    return [cid for cid, v in verdicts.items() if cid in TIMING and v["verdict"] in _DOUBTFUL]


def _fast_clock(entry: ScenarioEntry) -> float | None:
    """The speed of the fast clock the run's agent was on (None: real time)."""
    speed = (entry.get("clock") or {}).get("time_warp")
    return float(speed) if speed else None


def _scale(entry: ScenarioEntry) -> float:
    return float((entry.get("journal") or {}).get("time_scale") or 1.0)


def judged(once: Callable[[bool], Run], verify: int) -> Run:
    """The outcome of a scenario run by ``once(confirm)``: a failed timing verdict is confirmed
    by a run on a slower clock (``confirm=True``: the slowest clock calibrated for an agent on a
    fast one, else a time scale ``CONFIRM_SLOWER`` times slower, or the same clock again in real
    time), whose verdicts stand; then ``--verify`` settles as usual (module docstring)."""
    first = once(False)
    if not _doubtful(first[1]):
        return verified(first, lambda: once(False), verify)
    return verified(confirmed(first, once(True)), lambda: once(True), verify)


def confirmed(first: Run, again: Run) -> Run:
    """The outcome of a run whose timing verdicts failed (``first``) and of the run on a slower
    clock that confirms them (``again``): ``again``'s, each doubtful verdict saying what the
    first run gave, the first run kept in the entry (module docstring). Pure: ``conformance
    rejudge`` settles saved runs with it as the run did."""
    entry, verdicts = first
    again_entry, again_verdicts = again
    doubtful = _doubtful(verdicts)
    speed, slower = _fast_clock(entry), _fast_clock(again_entry)
    if speed is not None:
        was, where = (
            f"the x{speed:g} fast clock",
            (f"the x{slower:g} clock" if slower else "the real clock"),
        )
    else:
        was, where = f"time scale {_scale(entry):g}", f"time scale {_scale(again_entry):g}"
    if again_entry.get("alone") is False:
        where += ", beside the run's other processes (the machine was not free for it)"
    settled = dict(again_verdicts)
    for cid in doubtful:
        fast = verdicts[cid]
        redo = again_verdicts.get(cid)
        if redo is None:
            continue
        settled[cid] = {
            **redo,
            "observed": f"{redo.get('observed') or ''} (on {where}; on {was}: "
            f"{fast['verdict']}, {fast.get('observed') or ''})",
            "confirmed": {"first": _run_of(fast), "on": where},
        }
        if speed is not None:
            settled[cid]["fast_clock"] = {"speed": speed, **_run_of(fast)}
    out = again_entry.copy()
    if speed is not None:
        out["clock"] = {
            **(again_entry.get("clock") or {}),
            "note": f"{'x' + format(slower, 'g') if slower else 'real time'}: a failed timing "
            f"verdict on the x{speed:g} fast clock, confirmed on {where}",
        }
        out["fast_clock_run"] = entry
    else:
        out["first_run"] = entry
    return out, settled


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
        agree = all(_said(r, cid) == verdicts[cid]["verdict"] for r in runs for cid in doubtful)
        if agree:
            break  # reproduced: the first verdicts stand
    settled = dict(verdicts)
    for cid in doubtful:
        seen = [_said(r, cid) or "ERROR" for r in runs]
        if len(set(seen)) == 1:
            continue
        final = settle(seen)
        chosen = next(r[1][cid] for r in runs if _said(r, cid) == final)
        settled[cid] = {
            **chosen,
            "flaky": True,
            "runs": [_run_of(r[1].get(cid)) for r in runs],
        }
    out = entry.copy()
    out["reruns"] = [r[0] for r in runs[1:]]
    return out, settled


def _said(run: Run, cid: str) -> str | None:
    """The verdict ``run`` gave ``cid`` (None: not judged in it)."""
    v = run[1].get(cid)
    return v["verdict"] if v is not None else None


def _run_of(v: ScenarioVerdict | None) -> dict[str, Any]:
    if v is None:
        return {"verdict": "ERROR", "observed": "the criterion was not judged in this run"}
    return {"verdict": v["verdict"], "observed": v.get("observed")}
