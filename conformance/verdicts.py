"""Map check findings to verdicts, and aggregate verdicts per criterion."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from conformance.catalogue import Criterion
from conformance.checks.finding import Finding

__all__ = ["VERDICTS", "SEVERITY", "Verdict", "verdict_for", "aggregate"]

Verdict = Literal[
    "PASS", "FAIL", "NON-STRICT", "UNSUPPORTED", "INFORMATIONAL", "ERROR", "TIMEOUT", "UNSTABLE"
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

# Worst first: the aggregate of a criterion is the worst verdict among its scenarios.
# UNSTABLE (the runs of ``--repeat`` disagree: conformance.repeat) ranks next to FAIL.
SEVERITY: tuple[Verdict, ...] = (
    "FAIL",
    "UNSTABLE",
    "NON-STRICT",
    "ERROR",
    "TIMEOUT",
    "PASS",
    "INFORMATIONAL",
    "UNSUPPORTED",
)


def verdict_for(criterion: Criterion, finding: Finding) -> Verdict:
    """The verdict one finding earns for one criterion (level decides what a failure is)."""
    outcome = finding.outcome
    if outcome == "pass":
        return "PASS"
    if outcome == "fail":
        return "FAIL" if criterion.level == "MUST" else "NON-STRICT"
    if outcome == "informational":
        return "INFORMATIONAL"
    if outcome == "not_applicable":
        # The run could not show the behaviour: nothing to certify, but visible in the report.
        return "INFORMATIONAL"
    raise ValueError(f"unknown finding outcome {outcome!r} for {criterion.id}")


def aggregate(verdicts: Iterable[str]) -> Verdict:
    """The worst verdict (FAIL > UNSTABLE > NON-STRICT > ERROR > TIMEOUT > PASS >
    INFORMATIONAL > UNSUPPORTED); UNSUPPORTED when there is none."""
    items = list(verdicts)
    for v in items:
        if v not in SEVERITY:
            raise ValueError(f"unknown verdict {v!r}")
    if not items:
        return "UNSUPPORTED"
    return min((v for v in SEVERITY if v in items), key=SEVERITY.index)
