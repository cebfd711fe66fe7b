"""What every output parser shares: reading JSON values out of stdout, and the event shapes.

The shipped adapter uses `error_event` too (an agent that exits non-zero without printing an
error); it imports it from here, as the parsers do, so neither imports the other.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["API_ERROR", "error_event", "json_values", "status_in", "tool_call", "usage_event"]


def json_values(stdout: str) -> list[Any]:
    """Every JSON value in stdout: one document, or one per line (non-JSON lines skipped)."""
    text = stdout.strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


# An HTTP status the agent itself printed names the error's type; without one the error stays
# untyped (kind ``agent_exit``): the agent's prose is never read for meaning.
_STATUS_KINDS = {
    400: "bad_request",
    401: "auth",
    402: "billing",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "prompt_too_long",
    429: "rate_limit",
    529: "overloaded",
}
# A status printed as "API Error: N" (how Claude Code shows an API error it got).
API_ERROR = re.compile(r"\bAPI Error: (\d{3})\b")


def error_event(message: str, status: int | None = None) -> dict[str, Any]:
    """An ``error`` event; typed only from a status the agent printed (field or API Error: N)."""
    if status is None:
        m = API_ERROR.search(message)
        status = int(m.group(1)) if m else None
    kind = "agent_exit"
    if isinstance(status, int):
        kind = _STATUS_KINDS.get(status) or ("server" if status >= 500 else "agent_exit")
    ev: dict[str, Any] = {"type": "error", "kind": kind, "message": message[:2000]}
    if isinstance(status, int):
        ev["status"] = status
    return ev


def status_in(text: str, pattern: re.Pattern[str]) -> int | None:
    """The status `pattern`'s first group finds in `text`, or None."""
    m = pattern.search(text)
    return int(m.group(1)) if m else None


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A ``tool_calls`` entry; arguments that are not already a string become sorted JSON."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return {
        "id": str(call_id or ""),
        "type": "function",
        "function": {"name": str(name or ""), "arguments": args},
    }


def usage_event(usage: Any, prompt_key: str, completion_key: str) -> dict[str, Any] | None:
    """A ``usage`` event from the agent's own usage object, or None when it has none."""
    if not isinstance(usage, dict):
        return None
    try:
        p, c = int(usage.get(prompt_key) or 0), int(usage.get(completion_key) or 0)
    except (TypeError, ValueError):
        return None
    return {"type": "usage", "prompt_tokens": p, "completion_tokens": c}
