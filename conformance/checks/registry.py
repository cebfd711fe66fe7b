"""Criterion ID -> check function, gathered from the ``@check`` lines of the area modules.

``FINAL_ON_PARTIAL`` names the criteria whose FAIL stands on partial evidence. A run is partial
when the agent's turn never ended (TIMEOUT, or an ERROR before ``turn_end``): the journal and the
events stop wherever the run was cut, and the last attempt may still be in flight with no
response recorded yet. A criterion belongs in the set only when every FAIL its check can find on
such a prefix of the evidence would still be a FAIL on the run's full evidence, had the agent
gone on to end its turn: "never more than N attempts" and "never X" criteria, whose violation
is on the wire once sent. "Eventually Y" conclusions (a retry, a fallback, a removal, an error
shown, a ``turn_end``) need the end; a check in the set draws them only once the turn ended
(``conformance.checks.partial.turn_over``) and otherwise finds nothing. A FAIL never rests on
the last attempt's response, which may be unfinished. So partial evidence must carry no
``turn_end`` but the agent's own: one written after the harness stopped the agent at its deadline
would read as the agent ending its turn there.

On a partial run the runner runs the check of every criterion in the set: a FAIL finding is the
verdict (FAIL, or NON-STRICT for a SHOULD); any other finding leaves the verdict TIMEOUT or
ERROR. Criteria outside the set are not judged on a partial run. A check is put in the set by
``final=True`` on its ``@check`` line (``conformance.checks.declare``), next to its code.

``INVARIANTS`` are judged on every run, whatever criteria the scenario lists (``invariant=True``):
the wire invariants, and DBG-02 (any run can show the key: a message, the log, a dump).

``TIMING`` names the criteria whose verdict rests on how long something took on the wire
(``timing: true`` in the catalogue): ``--verify N`` reruns a scenario whose timing verdict
failed.

All four are in catalogue order, whatever order the modules are imported in.
"""

from __future__ import annotations

from conformance.catalogue import CATALOGUE, by_id
from conformance.checks import (
    ctl,
    ctx,
    dbg,
    err,
    fmt,
    invariants,
    lop,
    mcp,
    mfb,
    rsn,
    rty,
    rty_cases,
    str_,
    str_events,
    tjs,
    tol,
    trn,
)
from conformance.checks.declare import Check, declared
from conformance.checks.finding import Finding
from conformance.judging.evidence import Evidence

__all__ = ["CHECKS", "FINAL_ON_PARTIAL", "INVARIANTS", "TIMING", "check_for", "run_check"]

# Imported for their @check lines, which fill the declarations.
_AREAS = (
    rty,
    rty_cases,
    str_,
    str_events,
    trn,
    rsn,
    tjs,
    tol,
    fmt,
    lop,
    ctx,
    mfb,
    err,
    dbg,
    ctl,
    mcp,
    invariants,
)

_DECLARED = declared()
_IN_ORDER = [c.id for c in CATALOGUE if c.id in _DECLARED]

CHECKS: dict[str, Check] = {cid: _DECLARED[cid].fn for cid in _IN_ORDER}

FINAL_ON_PARTIAL: frozenset[str] = frozenset(cid for cid in _IN_ORDER if _DECLARED[cid].final)

INVARIANTS: dict[str, Check] = {cid: CHECKS[cid] for cid in _IN_ORDER if _DECLARED[cid].invariant}

TIMING: frozenset[str] = frozenset(c.id for c in CATALOGUE if c.timing)


def check_for(criterion_id: str) -> Check | None:
    """The check for a criterion, or None when none is implemented yet."""
    by_id(criterion_id)
    return CHECKS.get(criterion_id)


def run_check(criterion_id: str, ev: Evidence) -> Finding:
    """Run a criterion's check; a missing check is reported as not applicable, never a pass."""
    fn = check_for(criterion_id)
    if fn is None:
        return Finding("not_applicable", f"a check for {criterion_id}", "no check implemented")
    return fn(ev)
