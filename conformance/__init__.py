"""Conformance suite for LLM agents: criteria, runner, adapters, verdicts."""

from conformance.errors import ConformanceError
from conformance.release import CATALOGUE_VERSION

__all__ = ["ConformanceError", "__version__"]

# The package's version is the catalogue's release (conformance.release, CHANGELOG.md).
__version__ = CATALOGUE_VERSION
