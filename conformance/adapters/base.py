"""The adapter types and the lookup under one name: `conformance.adapters.interface` defines the
types, `conformance.adapters.registry` resolves a spec to an adapter; both are re-exported here
and from `conformance.adapters` itself. Adapter modules import `interface`, never this module, so
that no import cycle runs through the lookup."""

from __future__ import annotations

from conformance.adapters.interface import (
    REDACTED,
    STATUSES,
    Adapter,
    RunOutcome,
    RunRequest,
    redact,
    redact_obj,
)
from conformance.adapters.registry import make_adapter

__all__ = [
    "REDACTED",
    "STATUSES",
    "Adapter",
    "RunOutcome",
    "RunRequest",
    "make_adapter",
    "redact",
    "redact_obj",
]
