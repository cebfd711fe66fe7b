"""Evidence checks, one module per criterion area, gathered in one registry."""

from __future__ import annotations

from conformance.checks.finding import Finding
from conformance.checks.registry import CHECKS, INVARIANTS, check_for, run_check

__all__ = ["Finding", "CHECKS", "INVARIANTS", "check_for", "run_check"]
