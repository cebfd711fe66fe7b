"""Claude Code's ``--output-format stream-json --verbose`` output: its printed lines mapped to
protocol events, and nothing it does not print.

Claude Code prints one JSON object per line:

- ``system/init`` (session set-up): no event;
- ``assistant``: one line per content block of a model reply, each its own transcript entry
  with its own ``uuid`` (as Claude Code keeps them): one ``message`` event per line, id the
  ``uuid``, with its ``text``, ``reasoning`` (``thinking``) and ``tool_calls`` (``tool_use``, its
  own tools and the hosted ones it takes over MCP, ``mcp__<server>__<tool>``). Lines are not merged by ``message.id``: two replies may share it (a server that
  reuses ids), and merging would invent one message from two. A message whose ``model`` is
  ``<synthetic>`` is not a model reply but Claude Code's own display of an API error: it becomes
  an ``error`` event, typed only by the status it names;
- ``system/api_retry`` (``attempt``, ``max_retries``, ``retry_delay_ms``, ``error_status``):
  a ``retry`` event (``attempt``, ``delay_s``, ``reason`` = the status or error it printed);
- ``user`` lines marked ``isSynthetic`` are messages Claude Code wrote itself (e.g. its
  continuation after an output-limit stop): a ``message`` with role ``user`` and ``meta: true``,
  its text as printed. Other ``user`` lines carry tool results: no event (the wire has them: a
  hosted tool's run is the journal's ``tools/call``, its result the next request's
  ``tool_result``; its own tools ran on no host at all);
- ``result``: its ``usage`` (``input_tokens``/``output_tokens``) becomes a ``usage`` event; an
  ``is_error`` result becomes an ``error`` event unless a synthetic error message already did,
  typed by its ``api_error_status`` when it printed one, and by its ``terminal_reason`` where
  that names a kind (``prompt_too_long``).

Event order is the order of the lines; times are stamped by the adapter after the agent exits.
"""

from __future__ import annotations

from typing import Any

from conformance.adapters.shipped_parsers._events import (
    API_ERROR,
    error_event,
    json_values,
    status_in,
    tool_call,
    usage_event,
)

__all__ = ["parse_claude_stream_json"]

# The result's ``terminal_reason`` that names an error kind of the protocol (2.1.332 prints
# ``prompt_too_long`` when a context window overflow ended the turn, its display a plain 400).
TERMINAL_KINDS = {"prompt_too_long": "prompt_too_long"}


def parse_claude_stream_json(stdout: str) -> list[dict[str, Any]]:
    """Claude Code stream-json lines -> events (see the module docstring)."""
    t = _Transcript()
    for v in json_values(stdout):
        if not isinstance(v, dict):
            continue
        kind, sub = v.get("type"), v.get("subtype")
        if kind == "system" and sub == "api_retry":
            t.events.append(_retry_event(v))
        elif kind == "assistant":
            t.assistant(v)
        elif kind == "user" and v.get("isSynthetic"):
            t.synthetic_user(v)
        elif kind == "result":
            t.result(v)
    return t.events


class _Transcript:
    """The events of the lines read so far: messages are numbered (an id for a line that
    printed no ``uuid``), and the error shown last is kept for the result to type."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.n = 0
        self.shown_error: dict[str, Any] | None = None

    def assistant(self, v: dict[str, Any]) -> None:
        msg = v.get("message") or {}
        if not isinstance(msg, dict):
            return
        content = [c for c in (msg.get("content") or []) if isinstance(c, dict)]
        if msg.get("model") == "<synthetic>":
            text = "".join(str(c.get("text", "")) for c in content if c.get("type") == "text")
            self.shown_error = error_event(text, status_in(text, API_ERROR))
            self.events.append(self.shown_error)
            return
        cur: dict[str, Any] = {
            "type": "message",
            "id": str(v.get("uuid") or f"a{self.n}"),
            "role": "assistant",
            "text": "",
            "tool_calls": [],
        }
        self.n += 1
        self.events.append(cur)
        for c in content:
            t = c.get("type")
            if t == "text":
                cur["text"] += str(c.get("text", ""))
            elif t == "thinking":
                cur["reasoning"] = cur.get("reasoning", "") + str(c.get("thinking", ""))
            elif t == "tool_use":
                cur["tool_calls"].append(tool_call(c.get("id"), c.get("name"), c.get("input", {})))

    def synthetic_user(self, v: dict[str, Any]) -> None:
        synthetic = (v.get("message") or {}).get("content")
        if isinstance(synthetic, str):
            text = synthetic
        else:
            text = "".join(
                str(c.get("text", ""))
                for c in synthetic or []
                if isinstance(c, dict) and c.get("type") == "text"
            )
        if not text:
            return
        self.events.append(
            {
                "type": "message",
                "id": str(v.get("uuid") or f"u{self.n}"),
                "role": "user",
                "text": text,
                "tool_calls": [],
                "meta": True,
            }
        )
        self.n += 1

    def result(self, v: dict[str, Any]) -> None:
        u = usage_event(v.get("usage"), "input_tokens", "output_tokens")
        if u is not None:
            self.events.append(u)
        if not v.get("is_error"):
            return
        st = v.get("api_error_status")
        st = st if isinstance(st, int) and not isinstance(st, bool) else None
        if self.shown_error is not None:
            # Its error display may not name the status ("API Error: Request rejected
            # (429)"); the result's api_error_status types the error shown.
            if st is not None and "status" not in self.shown_error:
                self.shown_error.update(error_event(self.shown_error["message"], st))
        else:
            text = str(v.get("result") or v.get("subtype") or "error")
            errs = v.get("errors")
            if not v.get("result") and isinstance(errs, list) and errs:
                text = "; ".join(map(str, errs))
            self.shown_error = error_event(
                text, st if st is not None else status_in(text, API_ERROR)
            )
            self.events.append(self.shown_error)
        # Its own type of why the turn ended, where it is one of the protocol's kinds.
        kind = TERMINAL_KINDS.get(str(v.get("terminal_reason")))
        if kind is not None:
            self.shown_error["kind"] = kind


def _retry_event(v: dict[str, Any]) -> dict[str, Any]:
    """A ``system/api_retry`` line's ``retry`` event."""
    delay_ms = v.get("retry_delay_ms")
    reason = v.get("error_status") or v.get("error") or "retry"
    ev: dict[str, Any] = {
        "type": "retry",
        "attempt": int(v.get("attempt") or 0),
        "delay_s": round(delay_ms / 1000.0, 6) if isinstance(delay_ms, (int, float)) else None,
        "reason": str(reason),
    }
    if isinstance(v.get("max_retries"), int):
        ev["max_retries"] = v["max_retries"]
    if isinstance(v.get("error_status"), int):
        ev["status"] = v["error_status"]
    return ev
