"""Criterion ID -> check function, gathered from the area modules."""

from __future__ import annotations

from collections.abc import Callable

from conformance.catalogue import by_id
from conformance.checks import (
    ctl,
    ctx,
    dbg,
    err,
    fmt,
    invariants,
    lop,
    mfb,
    rsn,
    rty,
    str_,
    tjs,
    tol,
    trn,
)
from conformance.checks.finding import Finding
from conformance.evidence import Evidence

__all__ = ["CHECKS", "INVARIANTS", "check_for", "run_check"]

Check = Callable[[Evidence], Finding]

CHECKS: dict[str, Check] = {}
for _module in (rty, str_, trn, rsn, tjs, tol, fmt, lop, ctx, mfb, err, dbg, ctl, invariants):
    CHECKS.update(_module.CHECKS)

# Checks applied to every scenario run, whatever criteria it lists (filled as areas land).
INVARIANTS: dict[str, Check] = dict(invariants.CHECKS)

for _cid in CHECKS:
    by_id(_cid)  # a check for an unknown criterion is a programming error: fail at import


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
