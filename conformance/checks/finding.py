"""The result of one check over one scenario run."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding", "OUTCOMES", "passed", "failed", "not_applicable", "informational"]

OUTCOMES = ("pass", "fail", "informational", "not_applicable")


@dataclass(frozen=True)
class Finding:
    """What a check concluded, what it expected and what it saw on the wire."""

    outcome: str
    expected: str
    observed: str

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"Finding.outcome must be one of {OUTCOMES}, got {self.outcome!r}")


def passed(expected: str, observed: str) -> Finding:
    return Finding("pass", expected, observed)


def failed(expected: str, observed: str) -> Finding:
    return Finding("fail", expected, observed)


def not_applicable(expected: str, why: str) -> Finding:
    return Finding("not_applicable", expected, why)


def informational(expected: str, observed: str) -> Finding:
    return Finding("informational", expected, observed)
