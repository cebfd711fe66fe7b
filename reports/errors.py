"""The error raised for results documents the reports cannot use."""

from __future__ import annotations

__all__ = ["ResultsError"]


class ResultsError(ValueError):
    """A results document is unreadable or does not match the results schema."""
