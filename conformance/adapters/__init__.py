"""Adapters that drive an agent under test through the adapter protocol."""

from conformance.adapters.base import (
    REDACTED,
    Adapter,
    RunOutcome,
    RunRequest,
    make_adapter,
    redact,
)

__all__ = ["REDACTED", "Adapter", "RunOutcome", "RunRequest", "make_adapter", "redact"]
