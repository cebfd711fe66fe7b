"""Checks for the FMT criteria (see docs/criteria.md), judged from the wire first."""

from __future__ import annotations

from collections.abc import Callable

from conformance.checks.finding import Finding
from conformance.evidence import Evidence

__all__ = ["CHECKS"]

CHECKS: dict[str, Callable[[Evidence], Finding]] = {}
