"""The verdicts of the results contract and their order, worst first."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["JUDGED", "SEVERITY", "VERDICTS", "worst"]

VERDICTS = (
    "PASS", "FAIL", "NON-STRICT", "UNSUPPORTED", "INFORMATIONAL", "ERROR", "TIMEOUT", "UNSTABLE"
)  # fmt: skip
# Verdicts that judged the behaviour (the others say why it was not judged).
JUDGED = ("PASS", "FAIL", "NON-STRICT", "UNSTABLE")
# Worst first, as in the results contract (UNSTABLE: the runs of --repeat disagreed).
SEVERITY = (
    "FAIL", "UNSTABLE", "NON-STRICT", "ERROR", "TIMEOUT", "PASS", "INFORMATIONAL", "UNSUPPORTED"
)  # fmt: skip


def worst(verdicts: Sequence[str]) -> str:
    """Return the worst verdict of ``verdicts`` (UNSUPPORTED when empty)."""
    if not verdicts:
        return "UNSUPPORTED"
    return min(verdicts, key=SEVERITY.index)
