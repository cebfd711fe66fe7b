"""Conformance suite for LLM agents: criteria, runner, adapters, verdicts."""

from conformance.errors import ConformanceError

__all__ = ["ConformanceError", "__version__"]

__version__ = "1.0.0"
