"""Validate protocol messages against the published JSON Schemas (schemas/protocol/)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

__all__ = ["EVENT_TYPES", "SCHEMA_DIR", "schema_for", "validate_event", "validate_message"]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas" / "protocol"
EVENT_TYPES = ("hello", "message", "removed", "retry", "tool", "error", "usage", "turn_end")


@cache
def schema_for(msg_type: str) -> Draft202012Validator | None:
    """The validator for one message type, or None when no schema is published for it."""
    path = SCHEMA_DIR / f"{msg_type}.json"
    if not path.is_file():
        return None
    return Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def validate_message(msg: dict[str, Any]) -> str | None:
    """None if `msg` is valid, else a short description naming the offending field."""
    msg_type = msg.get("type")
    if not isinstance(msg_type, str):
        return "field 'type' is missing or not a string"
    validator = schema_for(msg_type)
    if validator is None:
        return None  # new event types are allowed under the same protocol version
    err = min(validator.iter_errors(msg), key=lambda e: list(e.path), default=None)
    if err is None:
        return None
    where = ".".join(str(p) for p in err.absolute_path) or "(message)"
    return f"field {where!r}: {err.message}"


def validate_event(event: dict[str, Any]) -> str | None:
    """Like validate_message, for agent → harness events (harness-only types rejected)."""
    if event.get("type") in ("start", "abort"):
        return f"field 'type': {event['type']!r} is a harness -> agent message"
    return validate_message(event)
