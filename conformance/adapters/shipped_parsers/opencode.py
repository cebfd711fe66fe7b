"""opencode's ``run --format json`` output: one event per line, mapped to protocol events.

``text`` parts are joined per message id into ``message`` events, in the order the messages
first appear; ``tool_use`` parts become the ``tool_calls`` of the first message; ``error`` lines
become ``error`` events, typed by the ``statusCode`` opencode printed.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.adapters.shipped_parsers._events import error_event, json_values

__all__ = ["parse_opencode_json"]


def parse_opencode_json(stdout: str) -> list[dict[str, Any]]:
    """opencode ``run --format json``: one event per line (text parts, tool uses, errors)."""
    events: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    order: list[str] = []
    calls: list[dict[str, Any]] = []
    for v in json_values(stdout):
        if not isinstance(v, dict):
            continue
        part = v.get("part") or {}
        if v.get("type") == "text" and isinstance(part, dict):
            mid = str(part.get("messageID") or part.get("id") or len(order))
            if mid not in texts:
                order.append(mid)
                texts[mid] = ""
            texts[mid] += str(part.get("text") or "")
        elif v.get("type") == "tool_use" and isinstance(part, dict):
            state = part.get("state") or {}
            calls.append(
                {
                    "id": str(part.get("callID", "")),
                    "type": "function",
                    "function": {
                        "name": str(part.get("tool", "")),
                        "arguments": json.dumps(state.get("input", {})),
                    },
                }
            )
        elif v.get("type") == "error":
            err = v.get("error") or {}
            data = err.get("data") if isinstance(err, dict) else None
            msg = (data or {}).get("message") if isinstance(data, dict) else None
            code = (data or {}).get("statusCode") if isinstance(data, dict) else None
            events.append(
                error_event(str(msg or err or v), code if isinstance(code, int) else None)
            )
    msgs: list[dict[str, Any]] = [
        {"type": "message", "id": mid, "role": "assistant", "text": texts[mid], "tool_calls": []}
        for mid in order
    ]
    if calls:
        if not msgs:
            msgs.append({"type": "message", "id": "a0", "role": "assistant", "text": ""})
        msgs[0]["tool_calls"] = calls
    return msgs + events
