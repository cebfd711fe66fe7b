"""Conformance suite for LLM agents: criteria, runner, adapters, verdicts."""

__version__ = "0.1.0"
