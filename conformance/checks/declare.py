"""Where a check says which criteria it judges: the ``@check`` decorator, next to its code.

``@check("RTY-04", final=True)`` above a check function registers it for RTY-04. The flags say
what the registry (``conformance.checks.registry``) makes of it:

- ``final``: its FAIL stands on a run cut short (the registry's ``FINAL_ON_PARTIAL``; what that
  promises is written there). A module says, next to its checks, why the ones it leaves out are
  left out.
- ``invariant``: it is judged on every run, whatever criteria the scenario lists (the
  registry's ``INVARIANTS``).

One function may judge several criteria (``@check("LOP-04", "ERR-05")``); a criterion has one
check. Both mistakes a declaration can make, an unknown criterion and a second check for one,
fail at import, naming the criterion and the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from conformance.catalogue import by_id
from conformance.checks.finding import Finding
from conformance.judging.evidence import Evidence

__all__ = ["Check", "Declared", "check", "declared"]

Check = Callable[[Evidence], Finding]


@dataclass(frozen=True)
class Declared:
    """One criterion's check, as its ``@check`` line declared it."""

    fn: Check
    final: bool
    invariant: bool


_DECLARED: dict[str, Declared] = {}


def _name(fn: Check) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def check(*criteria: str, final: bool = False, invariant: bool = False) -> Callable[[Check], Check]:
    """Register the decorated function as the check of ``criteria``; it is returned unchanged."""
    if not criteria:
        raise TypeError("@check needs at least one criterion id")

    def register(fn: Check) -> Check:
        for cid in criteria:
            by_id(cid)  # KeyError naming the id: a check for an unknown criterion
            old = _DECLARED.get(cid)
            if old is not None and old.fn is not fn:
                raise RuntimeError(f"{cid} has two checks: {_name(old.fn)} and {_name(fn)}")
            _DECLARED[cid] = Declared(fn, final, invariant)
        return fn

    return register


def declared() -> Mapping[str, Declared]:
    """Every declaration made so far, by criterion ID (read-only)."""
    return MappingProxyType(_DECLARED)
