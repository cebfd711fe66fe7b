"""Codex CLI's ``exec --json`` output: its printed lines mapped to protocol events, and nothing
it does not print.

Codex prints one thread event per line: ``item.completed`` items of type ``agent_message``
(``message``), ``reasoning`` (kept as the next message's ``reasoning``), ``command_execution`` /
``file_change`` / ``mcp_tool_call`` / ``web_search`` (its own tools: ``tool_calls`` of the next
message); ``turn.completed`` with ``usage`` (``usage``); ``turn.failed`` and top-level ``error``
lines (``error``). Codex does not print its retry waits as data: a top-level ``error`` line whose
message is ``Reconnecting... N/M ...`` is its stream-retry notice and becomes a ``retry`` event
with ``attempt`` N and no ``delay_s`` (the wait is not printed), never an error. ``error``
*items* are its non-fatal warnings (the turn goes on): no event, the agent log keeps them.

Event order is the order of the lines; times are stamped by the adapter after the agent exits.
"""

from __future__ import annotations

import re
from typing import Any

from conformance.adapters.shipped_parsers._events import (
    error_event,
    json_values,
    status_in,
    tool_call,
    usage_event,
)

__all__ = ["parse_codex_json"]

# A status as Codex prints it in its error texts, and its stream-retry notice.
_CODEX_STATUS = re.compile(r"\b(?:unexpected status|status(?: code)?:?) (\d{3})\b", re.I)
_RECONNECT = re.compile(r"^\s*Re-?connecting\.*\s*(\d+)\s*/\s*(\d+)", re.I)

_CODEX_TOOL_ITEMS = {
    "command_execution": ("command",),
    "file_change": ("changes",),
    "mcp_tool_call": ("server", "tool", "arguments"),
    "web_search": ("query",),
}


def parse_codex_json(stdout: str) -> list[dict]:
    """Codex ``exec --json`` lines -> events (see the module docstring)."""
    events: list[dict] = []
    reasoning: list[str] = []
    calls: list[dict] = []
    n = 0
    for v in json_values(stdout):
        if not isinstance(v, dict):
            continue
        kind = v.get("type")
        if kind == "item.completed":
            item = v.get("item") or {}
            if not isinstance(item, dict):
                continue
            it = item.get("type") or item.get("item_type")
            if it == "reasoning":
                reasoning.append(str(item.get("text", "")))
            elif it in _CODEX_TOOL_ITEMS:
                args = {k: item.get(k) for k in _CODEX_TOOL_ITEMS[it] if k in item}
                calls.append(tool_call(item.get("id"), it, args))
            elif it == "agent_message":
                ev: dict = {
                    "type": "message",
                    "id": str(item.get("id") or f"a{n}"),
                    "role": "assistant",
                    "text": str(item.get("text", "")),
                    "tool_calls": calls,
                }
                if reasoning:
                    ev["reasoning"] = "".join(reasoning)
                events.append(ev)
                reasoning, calls, n = [], [], n + 1
            # An ``error`` *item* is Codex's non-fatal warning (e.g. "Model metadata for `m` not
            # found"); the turn goes on. It is kept in the agent log, not shown as an error.
        elif kind == "turn.completed":
            u = usage_event(v.get("usage"), "input_tokens", "output_tokens")
            if u is not None:
                events.append(u)
        elif kind == "turn.failed" and _same_error(events, v.get("error")):
            continue  # the turn's end repeats the error line just printed: one error shown
        elif kind in ("turn.failed", "error"):
            err = v.get("error") if kind == "turn.failed" else v
            msg = str((err or {}).get("message", "") if isinstance(err, dict) else err)
            m = _RECONNECT.match(msg)
            if kind == "error" and m:
                events.append(
                    {
                        "type": "retry",
                        "attempt": int(m.group(1)),
                        "delay_s": None,
                        "reason": msg[:500],
                        "max_retries": int(m.group(2)),
                    }
                )
                continue
            events.append(error_event(msg, status_in(msg, _CODEX_STATUS)))
    if calls or reasoning:
        # Tool use or reasoning after the last answer: keep it visible as its own message.
        ev = {
            "type": "message",
            "id": f"a{n}",
            "role": "assistant",
            "text": "",
            "tool_calls": calls,
        }
        if reasoning:
            ev["reasoning"] = "".join(reasoning)
        events.append(ev)
    return events


def _same_error(events: list[dict], err: Any) -> bool:
    msg = err.get("message") if isinstance(err, dict) else err
    last = events[-1] if events else {}
    return last.get("type") == "error" and last.get("message") == str(msg or "")[:2000]
