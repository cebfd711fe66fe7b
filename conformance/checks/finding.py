"""The result of one check over one scenario run."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Finding",
    "OUTCOMES",
    "passed",
    "failed",
    "not_applicable",
    "informational",
    "listed",
    "as_json",
]

OUTCOMES = ("pass", "fail", "informational", "not_applicable")


@dataclass(frozen=True)
class Finding:
    """What a check concluded, what it expected and what it saw on the wire."""

    outcome: str
    expected: str
    observed: str
    # A timing failure no load on the machine explains: the wire shows the agent did not act
    # within a margin wider than a loaded machine makes it late (STR-10's silence past its
    # idle limit), so it is not confirmed by a second run (conformance.verify).
    beyond_load: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"Finding.outcome must be one of {OUTCOMES}, got {self.outcome!r}")


def passed(expected: str, observed: str) -> Finding:
    return Finding("pass", expected, observed)


def failed(expected: str, observed: str, *, beyond_load: bool = False) -> Finding:
    return Finding("fail", expected, observed, beyond_load)


def not_applicable(expected: str, why: str) -> Finding:
    return Finding("not_applicable", expected, why)


def informational(expected: str, observed: str) -> Finding:
    return Finding("informational", expected, observed)


# A message reads as text, not as a Python value: lists joined, values in JSON (never
# ``None``, ``['a']`` or ``{'k': 'v'}``).
def listed(items: Iterable[Any], *, quoted: bool = False) -> str:
    """Items joined with commas for a message (``quoted``: each in quotes, as names and ids
    are); "none" when there is none."""
    return ", ".join(f"'{x}'" if quoted else str(x) for x in items) or "none"


def as_json(value: Any) -> str:
    """A value as JSON, as the wire carried it (``null``, ``{"path": "a.txt"}``)."""
    return json.dumps(value, ensure_ascii=False)
