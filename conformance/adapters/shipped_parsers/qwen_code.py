"""Qwen Code's ``-o json`` output: a JSON array of stream messages, mapped to protocol events.

``assistant`` messages become ``message`` events (their ``text`` blocks joined, their
``tool_use`` blocks as ``tool_calls``); a ``result`` marked ``is_error`` becomes an ``error``
event, typed only by a status it printed.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.adapters.shipped_parsers._events import error_event, json_values

__all__ = ["parse_qwen_json"]


def parse_qwen_json(stdout: str) -> list[dict[str, Any]]:
    """Qwen Code ``-o json``: a JSON array of stream messages (assistant / result)."""
    events: list[dict[str, Any]] = []
    msgs: list[Any] = []
    for v in json_values(stdout):
        msgs.extend(v if isinstance(v, list) else [v])
    n = 0
    for m in msgs:
        if not isinstance(m, dict):
            continue
        if m.get("type") == "assistant":
            content = (m.get("message") or {}).get("content") or []
            text = "".join(
                c.get("text", "")
                for c in content
                if isinstance(c, dict) and c.get("type") == "text"
            )
            calls = [
                {
                    "id": str(c.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(c.get("name", "")),
                        "arguments": json.dumps(c.get("input", {})),
                    },
                }
                for c in content
                if isinstance(c, dict) and c.get("type") == "tool_use"
            ]
            events.append(
                {
                    "type": "message",
                    "id": f"a{n}",
                    "role": "assistant",
                    "text": text,
                    "tool_calls": calls,
                }
            )
            n += 1
        elif m.get("type") == "result" and m.get("is_error"):
            err = m.get("error") or {}
            msg = err.get("message") if isinstance(err, dict) else str(err)
            events.append(error_event(str(msg or m.get("result"))))
    return events
