"""Output parsers for Claude Code (``--output-format stream-json --verbose``) and Codex CLI
(``exec --json``): their printed lines mapped to protocol events, and nothing they do not print.

Claude Code prints one JSON object per line:

- ``system/init`` (session set-up): no event;
- ``assistant``: one line per content block of a model reply, each its own transcript entry
  with its own ``uuid`` (as Claude Code keeps them): one ``message`` event per line, id the
  ``uuid``, with its ``text``, ``reasoning`` (``thinking``) and ``tool_calls`` (``tool_use``, its
  own tools). Lines are not merged by ``message.id``: two replies may share it (a server that
  reuses ids), and merging would invent one message from two. A message whose ``model`` is ``<synthetic>`` is not a model reply but Claude Code's own
  display of an API error: it becomes an ``error`` event, typed only by the status it names;
- ``system/api_retry`` (``attempt``, ``max_retries``, ``retry_delay_ms``, ``error_status``):
  a ``retry`` event (``attempt``, ``delay_s``, ``reason`` = the status or error it printed);
- ``user`` lines marked ``isSynthetic`` are messages Claude Code wrote itself (e.g. its
  continuation after an output-limit stop): a ``message`` with role ``user`` and ``meta: true``,
  its text as printed. Other ``user`` lines carry results of its own tools: no event (the hosted
  tool endpoint never ran them, so ``tool`` events would describe a host it did not use);
- ``result``: its ``usage`` (``input_tokens``/``output_tokens``) becomes a ``usage`` event; an
  ``is_error`` result becomes an ``error`` event unless a synthetic error message already did,
  typed by its ``api_error_status`` when it printed one.

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

import json
import re
from typing import Any

from conformance.adapters.shipped import _json_values, error_event

__all__ = ["parse", "parse_claude_stream_json", "parse_codex_json"]

# Statuses as Claude Code and Codex print them in their error texts.
_API_ERROR = re.compile(r"\bAPI Error: (\d{3})\b")
_CODEX_STATUS = re.compile(r"\b(?:unexpected status|status(?: code)?:?) (\d{3})\b", re.I)
_RECONNECT = re.compile(r"^\s*Re-?connecting\.*\s*(\d+)\s*/\s*(\d+)", re.I)


def _status(text: str, pattern: re.Pattern) -> int | None:
    m = pattern.search(text)
    return int(m.group(1)) if m else None


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return {
        "id": str(call_id or ""),
        "type": "function",
        "function": {"name": str(name or ""), "arguments": args},
    }


def _usage_event(usage: Any, prompt_key: str, completion_key: str) -> dict | None:
    if not isinstance(usage, dict):
        return None
    try:
        p, c = int(usage.get(prompt_key) or 0), int(usage.get(completion_key) or 0)
    except (TypeError, ValueError):
        return None
    return {"type": "usage", "prompt_tokens": p, "completion_tokens": c}


# -- Claude Code -------------------------------------------------------------------------------


def parse_claude_stream_json(stdout: str) -> list[dict]:
    """Claude Code stream-json lines -> events (see the module docstring)."""
    events: list[dict] = []
    n = 0
    shown_error: dict | None = None
    for v in _json_values(stdout):
        if not isinstance(v, dict):
            continue
        kind, sub = v.get("type"), v.get("subtype")
        if kind == "system" and sub == "api_retry":
            delay_ms = v.get("retry_delay_ms")
            reason = v.get("error_status") or v.get("error") or "retry"
            ev: dict = {
                "type": "retry",
                "attempt": int(v.get("attempt") or 0),
                "delay_s": round(delay_ms / 1000.0, 6)
                if isinstance(delay_ms, (int, float))
                else None,
                "reason": str(reason),
            }
            if isinstance(v.get("max_retries"), int):
                ev["max_retries"] = v["max_retries"]
            if isinstance(v.get("error_status"), int):
                ev["status"] = v["error_status"]
            events.append(ev)
        elif kind == "assistant":
            msg = v.get("message") or {}
            if not isinstance(msg, dict):
                continue
            content = [c for c in (msg.get("content") or []) if isinstance(c, dict)]
            if msg.get("model") == "<synthetic>":
                text = "".join(str(c.get("text", "")) for c in content if c.get("type") == "text")
                shown_error = error_event(text, _status(text, _API_ERROR))
                events.append(shown_error)
                continue
            cur: dict = {
                "type": "message",
                "id": str(v.get("uuid") or f"a{n}"),
                "role": "assistant",
                "text": "",
                "tool_calls": [],
            }
            n += 1
            events.append(cur)
            for c in content:
                t = c.get("type")
                if t == "text":
                    cur["text"] += str(c.get("text", ""))
                elif t == "thinking":
                    cur["reasoning"] = cur.get("reasoning", "") + str(c.get("thinking", ""))
                elif t == "tool_use":
                    cur["tool_calls"].append(
                        _tool_call(c.get("id"), c.get("name"), c.get("input", {}))
                    )
        elif kind == "user" and v.get("isSynthetic"):
            content = (v.get("message") or {}).get("content")
            if isinstance(content, str):
                text = content
            else:
                text = "".join(
                    str(c.get("text", ""))
                    for c in content or []
                    if isinstance(c, dict) and c.get("type") == "text"
                )
            if text:
                events.append(
                    {
                        "type": "message",
                        "id": str(v.get("uuid") or f"u{n}"),
                        "role": "user",
                        "text": text,
                        "tool_calls": [],
                        "meta": True,
                    }
                )
                n += 1
        elif kind == "result":
            u = _usage_event(v.get("usage"), "input_tokens", "output_tokens")
            if u is not None:
                events.append(u)
            st = v.get("api_error_status")
            st = st if isinstance(st, int) and not isinstance(st, bool) else None
            if v.get("is_error") and shown_error is not None:
                # Its error display may not name the status ("API Error: Request rejected
                # (429)"); the result's api_error_status types the error shown.
                if st is not None and "status" not in shown_error:
                    shown_error.update(error_event(shown_error["message"], st))
            elif v.get("is_error"):
                text = str(v.get("result") or sub or "error")
                errs = v.get("errors")
                if not v.get("result") and isinstance(errs, list) and errs:
                    text = "; ".join(map(str, errs))
                shown_error = error_event(text, st if st is not None else _status(text, _API_ERROR))
                events.append(shown_error)
    return events


# -- Codex ---------------------------------------------------------------------------------------

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
    for v in _json_values(stdout):
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
                calls.append(_tool_call(item.get("id"), it, args))
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
            u = _usage_event(v.get("usage"), "input_tokens", "output_tokens")
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
            events.append(error_event(msg, _status(msg, _CODEX_STATUS)))
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


def parse(kind: str, stdout: str) -> list[dict]:
    if kind == "claude-stream-json":
        return parse_claude_stream_json(stdout)
    if kind == "codex-json":
        return parse_codex_json(stdout)
    raise ValueError(f"unknown output parser {kind!r}")
