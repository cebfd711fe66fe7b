"""What a check may conclude on partial evidence (a turn that never ended, see registry.py)."""

from __future__ import annotations

from conformance.judging.evidence import Evidence

__all__ = ["turn_over"]


def turn_over(ev: Evidence) -> bool:
    """Whether the agent ended its turn.

    Only then may a check conclude that something never came (a retry, a fallback, an error
    shown): on a run cut short it may simply not have come yet.
    """
    return bool(ev.turn_ends())
