"""What every dialect writes the same way: JSON on one SSE line, the pieces a text streams in,
the two shapes of an SSE frame, and the request checks the three APIs share."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["LINE_SEPS", "check_body", "data_frame", "dumps", "event_frame", "line_safe", "pieces"]

# Characters some SSE line splitters (str.splitlines) treat as line ends; JSON allows escaping
# them, so a payload always stays on its one ``data:`` line.
LINE_SEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def line_safe(s: str) -> str:
    """``s`` with the characters of :data:`LINE_SEPS` escaped."""
    for ch, esc in LINE_SEPS.items():
        s = s.replace(ch, esc)
    return s


def dumps(obj: Any) -> str:
    """``obj`` as JSON with the default separators (the checks match byte patterns such as
    ``"finish_reason": "length"``), non-ASCII kept, line separators escaped."""
    return line_safe(json.dumps(obj, ensure_ascii=False))


def pieces(s: str, n: int) -> list[str]:
    """``s`` in pieces of ``n`` characters, as a model streams a text (none for "")."""
    return [s[i : i + n] for i in range(0, len(s), n)]


def data_frame(payload: str) -> bytes:
    """An SSE event of ``data:`` lines alone (one per line of ``payload``)."""
    return ("".join(f"data: {line}\n" for line in payload.split("\n")) + "\n").encode()


def event_frame(event: str, payload: dict[str, Any]) -> bytes:
    """An SSE event with its name: an ``event:`` line, then the payload on one ``data:`` line."""
    return f"event: {event}\ndata: {dumps(payload)}\n\n".encode()


def check_body(body: Any, field: str, kinds: tuple[type, ...], shape: str) -> str | None:
    """What is wrong with a request body whose ``field`` must be one of ``kinds`` (``shape``
    in words), or None; the rest (``stream``, ``model``, ``tools``) is checked alike in every
    dialect."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get(field), kinds):
        return f"'{field}' must be {shape}"
    if "stream" in body and not isinstance(body["stream"], bool):
        return f"'stream' must be a boolean, got {type(body['stream']).__name__}"
    if "model" in body and not isinstance(body["model"], str):
        return f"'model' must be a string, got {type(body['model']).__name__}"
    if "tools" in body and body["tools"] is not None and not isinstance(body["tools"], list):
        return "'tools' must be an array"
    return None
