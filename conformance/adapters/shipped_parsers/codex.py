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


def parse_codex_json(stdout: str) -> list[dict[str, Any]]:
    """Codex ``exec --json`` lines -> events (see the module docstring)."""
    t = _Transcript()
    for v in json_values(stdout):
        if not isinstance(v, dict):
            continue
        kind = v.get("type")
        if kind == "item.completed":
            t.item(v.get("item") or {})
        elif kind == "turn.completed":
            u = usage_event(v.get("usage"), "input_tokens", "output_tokens")
            if u is not None:
                t.events.append(u)
        elif kind == "turn.failed" and _same_error(t.events, v.get("error")):
            continue  # the turn's end repeats the error line just printed: one error shown
        elif kind in ("turn.failed", "error"):
            t.events.append(_error_line(kind, v))
    if t.calls or t.reasoning:
        # Tool use or reasoning after the last answer: keep it visible as its own message.
        t.message(f"a{t.n}", "")
    return t.events


class _Transcript:
    """The events of the lines read so far; the reasoning and tool calls since the last
    answer, which go with the next one; the answers numbered (an id for one printed without)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.n = 0

    def item(self, item: Any) -> None:
        """A completed item."""
        if not isinstance(item, dict):
            return
        it = item.get("type") or item.get("item_type")
        if it == "reasoning":
            self.reasoning.append(str(item.get("text", "")))
        elif it in _CODEX_TOOL_ITEMS:
            args = {k: item.get(k) for k in _CODEX_TOOL_ITEMS[it] if k in item}
            self.calls.append(tool_call(item.get("id"), it, args))
        elif it == "agent_message":
            self.message(str(item.get("id") or f"a{self.n}"), str(item.get("text", "")))
        # An ``error`` *item* is Codex's non-fatal warning (e.g. "Model metadata for `m` not
        # found"); the turn goes on. It is kept in the agent log, not shown as an error.

    def message(self, mid: str, text: str) -> None:
        """An assistant message with the reasoning and tool calls gathered since the last."""
        ev: dict[str, Any] = {
            "type": "message",
            "id": mid,
            "role": "assistant",
            "text": text,
            "tool_calls": self.calls,
        }
        if self.reasoning:
            ev["reasoning"] = "".join(self.reasoning)
        self.events.append(ev)
        self.reasoning, self.calls, self.n = [], [], self.n + 1


def _error_line(kind: str, v: dict[str, Any]) -> dict[str, Any]:
    """A ``turn.failed`` or ``error`` line: an error, or the retry of a reconnecting stream."""
    err = v.get("error") if kind == "turn.failed" else v
    msg = str((err or {}).get("message", "") if isinstance(err, dict) else err)
    m = _RECONNECT.match(msg)
    if kind == "error" and m:
        return {
            "type": "retry",
            "attempt": int(m.group(1)),
            "delay_s": None,
            "reason": msg[:500],
            "max_retries": int(m.group(2)),
        }
    return error_event(msg, status_in(msg, _CODEX_STATUS))


def _same_error(events: list[dict[str, Any]], err: Any) -> bool:
    msg = err.get("message") if isinstance(err, dict) else err
    last = events[-1] if events else {}
    return last.get("type") == "error" and last.get("message") == str(msg or "")[:2000]
