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

A confirming run has the machine to itself (``conformance.share``). When the run has other
processes and every failure was a wait late by no more than the run's own load makes one
(:data:`LOAD_LATE_S` real, read from the entry's ``waits``), the scenario is first run again
alone on its own clock (``"alone"``): the clock the calibration accepted for timing with the
agent alone. If every timing verdict passes there, that run settles them; otherwise the slower
clock does, as above, and the alone run is kept in ``alone_run``. Either way a failure stands
only when a run with the machine to itself gives it again.

With ``conformance run -n N`` the runs after the first are made once every process of the run
is done (``conformance.session.RunSession.confirm_deferred``): :func:`judged` is given the
first run, made earlier in a worker, and goes on from it; :func:`needs_more` says whether it
will. A confirmation made then has the whole scenario's time to itself while the machine idles
(a long scenario's is most of a minute), so a failure the run's load may explain is first run
again at once, in its worker, beside the run's other runs, on the same clock (``"beside"``,
:func:`beside`). Load only makes a wait later: a run whose waits all fall in their bands under
the run's load has them in band with less load too, as a first run that passes does; so when
every timing verdict passes there, that run settles them (its entry says ``beside: true``).
Otherwise it is kept in the first run's entry (``beside_run``) and the failure goes on to the
confirmations at the end, alone and then on the slower clock, as above: a failure still stands
only when a run with the machine to itself gives it again.

A failure the check marks ``beyond_load`` is not confirmed: the wire shows the agent did not act
within a margin wider than load makes anything late (a silence waited out past STR-10's idle
limit by more than :data:`conformance.judging.timing.BEYOND_LOAD_S` real), so a second run could
not give another verdict. ``--verify`` still reruns it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from conformance.checks import TIMING
from conformance.judging.timing import BEYOND_LOAD_S
from conformance.results import Run, ScenarioEntry, ScenarioVerdict
from conformance.verdicts import SEVERITY

__all__ = [
    "FAILING",
    "LOAD_LATE_S",
    "Attempt",
    "beside",
    "confirmed",
    "judged",
    "needs_more",
    "settle",
    "verified",
]

# Verdicts worse than PASS: each stands only when it reproduces.
FAILING = frozenset({"FAIL", "NON-STRICT", "ERROR", "TIMEOUT"})
_DOUBTFUL = frozenset({"FAIL", "NON-STRICT"})  # a first verdict that asks for a rerun

# How a scenario is run: on the run's clock beside its other processes ("first"), again so at
# once after a failure its load may explain ("beside"), on the same clock with the machine to
# itself ("alone"), or on the slower confirming clock, alone ("slower").
Attempt = Literal["first", "beside", "alone", "slower"]

# The most a wait may be late, in real seconds, for the run's own load to be worth ruling out
# first (alone on the same clock) before the slower clock: as late as load is taken to make
# anything (judging.timing.BEYOND_LOAD_S). The run's own processes were measured to make single
# waits 6-110 ms late, once 469 ms (Claude Code 2.1.332's first retry, four processes on two
# cores, release 1.4.0).
LOAD_LATE_S = BEYOND_LOAD_S


def settle(seen: list[str]) -> str:
    """The verdict of a criterion given in turn ``seen`` by the runs of one scenario."""
    stands = [v for v in seen if v not in FAILING or seen.count(v) >= 2]
    return min(stands or seen, key=SEVERITY.index)


def _doubtful(verdicts: Mapping[str, ScenarioVerdict]) -> list[str]:
    return [cid for cid, v in verdicts.items() if cid in TIMING and v["verdict"] in _DOUBTFUL]


def _to_confirm(verdicts: Mapping[str, ScenarioVerdict]) -> list[str]:
    """The doubtful criteria a run with the machine to itself must confirm: all but failures
    that no load explains (``beyond_load``, module docstring)."""
    return [cid for cid in _doubtful(verdicts) if not verdicts[cid].get("beyond_load")]


def _fast_clock(entry: ScenarioEntry) -> float | None:
    """The speed of the fast clock the run's agent was on (None: real time)."""
    speed = (entry.get("clock") or {}).get("time_warp")
    return float(speed) if speed else None


def _scale(entry: ScenarioEntry) -> float:
    return float((entry.get("journal") or {}).get("time_scale") or 1.0)


def needs_more(first: Run, verify: int) -> bool:
    """Whether :func:`judged` runs the scenario again after its ``first`` run: a failed timing
    verdict to confirm, or to rerun with ``verify``."""
    return bool(_to_confirm(first[1])) or (verify > 0 and bool(_doubtful(first[1])))


def judged(
    once: Callable[[Attempt], Run],
    verify: int,
    *,
    try_alone: bool = False,
    first: Run | None = None,
) -> Run:
    """The outcome of a scenario run by ``once(attempt)``: a failed timing verdict is confirmed
    by a run with the machine to itself, whose verdicts stand: first on the same clock when
    ``try_alone`` (the run has other processes, and a slower clock to confirm on) and every
    failure was a wait a loaded machine could have made late; else, or when that run fails too,
    on the slower clock (the slowest calibrated for an agent on a fast one, else a time scale
    ``CONFIRM_SLOWER`` times slower, or the same clock again in real time); a failure no load
    explains (``beyond_load``) is not confirmed; then ``--verify`` settles as usual (module
    docstring). ``first``: the first run, made earlier (a run of several processes confirms
    once all of them are done: ``conformance.session``)."""
    first = once("first") if first is None else first
    doubtful = _to_confirm(first[1])
    if not doubtful:
        return verified(first, lambda: once("first"), verify)
    tried: Run | None = None
    if try_alone and _late_by_load(first[0], doubtful):
        tried = once("alone")
        if not _to_confirm(tried[1]):
            return verified(confirmed(first, tried), lambda: once("alone"), verify)
    return verified(confirmed(first, once("slower"), tried), lambda: once("slower"), verify)


def beside(first: Run, once: Callable[[Attempt], Run]) -> Run:
    """``first``, or when its failed timing verdicts were all waits the run's load may have made
    late, settled by a run made at once beside the run's other runs (``once("beside")``) if
    every timing verdict passes there; else ``first`` with that run kept as ``beside_run``, its
    failures left to confirm with the machine to itself (module docstring)."""
    doubtful = _to_confirm(first[1])
    if not doubtful or not _late_by_load(first[0], doubtful):
        return first
    again = once("beside")
    # Settled only by verdicts that pass: a run beside that ended in an ERROR or TIMEOUT is no
    # evidence the load made the first run's waits late.
    passed = all((_said(again, cid) or "ERROR") not in FAILING for cid in doubtful)
    if not passed or _to_confirm(again[1]):
        entry = first[0].copy()
        entry["beside_run"] = again[0]
        return entry, first[1]
    return confirmed(first, again)


def _late_by_load(entry: ScenarioEntry, doubtful: list[str]) -> bool:
    """Whether each doubtful criterion failed on waits that were late, none early, and by no
    more than :data:`LOAD_LATE_S` real (the entry's ``waits``: each retry's wait and band)."""
    scale = _scale(entry)
    waits = entry.get("waits") or []
    for cid in doubtful:
        off = [
            (w["wait_s"] - w["band_s"][0], w["wait_s"] - w["band_s"][1])
            for w in waits
            if w.get("rule") == cid
            and w.get("band_s")
            and not w["band_s"][0] <= w["wait_s"] <= w["band_s"][1]
        ]
        if not off or any(low < 0 for low, _ in off):
            return False  # not a wait that failed, or one that came early: not the load
        if max(late for _, late in off) * scale > LOAD_LATE_S:
            return False
    return True


def confirmed(first: Run, again: Run, alone: Run | None = None) -> Run:
    """The outcome of a run whose timing verdicts failed (``first``) and of the run with the
    machine to itself that confirms them (``again``: on the same clock or on a slower one):
    ``again``'s, each doubtful verdict saying what the first run gave, the first run kept in the
    entry; ``alone``: a run alone on the first's clock that failed too before ``again`` ran on
    the slower one, kept and named as well (module docstring). Pure: ``conformance rejudge``
    settles saved runs with it as the run did."""
    entry, verdicts = first
    again_entry, again_verdicts = again
    doubtful = _doubtful(verdicts)
    speed, slower = _fast_clock(entry), _fast_clock(again_entry)
    if speed is not None:
        was, where = (
            f"the x{speed:g} fast clock",
            (f"the x{slower:g} clock" if slower else "the real clock"),
        )
        same = slower == speed
    else:
        was, where = f"time scale {_scale(entry):g}", f"time scale {_scale(again_entry):g}"
        same = _scale(again_entry) == _scale(entry)
    if again_entry.get("beside"):
        where += (" again" if same else "") + ", beside the run's other runs, at once"
    elif again_entry.get("alone") is False:
        where += (" again" if same else "") + (
            ", beside the run's other processes (the machine was not free for it)"
        )
    elif same:
        where += " again, with the machine to itself"
    settled = dict(again_verdicts)
    for cid in doubtful:
        fast = verdicts[cid]
        redo = again_verdicts.get(cid)
        if redo is None:
            continue
        tried = "" if alone is None else _alone_said(alone, cid, was)
        settled[cid] = {
            **redo,
            "observed": f"{redo.get('observed') or ''} (on {where}; on {was}: "
            f"{fast['verdict']}, {fast.get('observed') or ''}{tried})",
            "confirmed": {"first": _run_of(fast), "on": where},
        }
        if alone is not None:
            settled[cid]["confirmed"]["alone"] = _run_of(alone[1].get(cid))
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
    if alone is not None:
        out["alone_run"] = alone[0]
    return out, settled


def _alone_said(alone: Run, cid: str, was: str) -> str:
    """What the run alone on the first run's clock gave ``cid``, for the observed text."""
    v = _run_of(alone[1].get(cid))
    return f"; on {was} again, with the machine to itself: {v['verdict']}, {v['observed'] or ''}"


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
