"""Evidence checks, one module per criterion area, gathered in one registry."""

from __future__ import annotations

from conformance.checks.finding import Finding
from conformance.checks.registry import (
    CHECKS,
    FINAL_ON_PARTIAL,
    INVARIANTS,
    TIMING,
    check_for,
    run_check,
)

__all__ = [
    "Finding",
    "CHECKS",
    "FINAL_ON_PARTIAL",
    "INVARIANTS",
    "TIMING",
    "check_for",
    "run_check",
]
