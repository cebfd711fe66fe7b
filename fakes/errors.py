"""Exceptions of the fake gateway."""

__all__ = ["FakesError", "ScenarioError"]


class FakesError(Exception):
    """Root of every error raised by :mod:`fakes`."""


class ScenarioError(FakesError):
    """A scenario file or dict is invalid; the message names file, line, value and rule."""
