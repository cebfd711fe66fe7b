"""The exceptions of the reports: one root, and a class per kind of failure."""

from __future__ import annotations

__all__ = ["ReportsError", "ResultsError", "ScreenshotError"]


class ReportsError(Exception):
    """Root of every error raised by :mod:`reports` on purpose."""


class ResultsError(ReportsError, ValueError):
    """A results document is unreadable or does not match the results schema."""


class ScreenshotError(ReportsError, RuntimeError):
    """Headless Chromium could not render a report page."""
