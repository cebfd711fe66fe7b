"""What the gateway actually sent for a chat attempt, read back from its bytes.

The checks judge what the agent was given, not what the scenario meant to give it: a reply is
parsed from the SSE or JSON the gateway wrote (possibly cut), in the chat-completions shape the
journal is read in (``conformance.judging.canon``). Below the checks: the evidence reads it too, to tell
which model tool call an MCP tool call carries out (``conformance.judging.executions``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from fakes.journal import ChatEntry

__all__ = ["WireReply", "wire_reply"]


class WireReply:
    """What one response carried on the wire: text, reasoning, tool calls, finish, usage."""

    def __init__(self) -> None:
        self.text = ""
        self.reasoning = ""
        self.tool_calls: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        return not (self.text or self.reasoning or self.tool_calls)


def _absorb(r: WireReply, data: object, calls: dict[int, dict[str, Any]]) -> None:
    if not isinstance(data, dict):
        return
    if isinstance(data.get("usage"), dict):
        r.usage = data["usage"]
    for ch in data.get("choices") or []:
        if not isinstance(ch, dict):
            continue
        part = ch.get("delta") or ch.get("message") or {}
        if isinstance(part.get("content"), str):
            r.text += part["content"]
        r.reasoning += part.get("reasoning_content") or ""
        for i, tc in enumerate(part.get("tool_calls") or []):
            slot = calls.setdefault(tc.get("index", i), {"id": "", "name": "", "arguments": ""})
            fn = tc.get("function") or {}
            slot["id"] = tc.get("id") or slot["id"]
            slot["name"] += fn.get("name") or ""
            slot["arguments"] += fn.get("arguments") or ""
        if ch.get("finish_reason"):
            r.finish_reason = ch["finish_reason"]


def wire_reply(entry: ChatEntry) -> WireReply:
    """Parse the bytes the gateway wrote for a chat attempt (SSE or JSON, possibly cut)."""
    resp = entry.get("response") or {}
    sent = resp.get("sent") or ""
    r = WireReply()
    calls: dict[int, dict[str, Any]] = {}
    if resp.get("stream"):
        for block in sent.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(
                ln[5:].removeprefix(" ") for ln in block.split("\n") if ln.startswith("data:")
            )
            if not data or data == "[DONE]":
                continue
            try:
                _absorb(r, json.loads(data), calls)
            except json.JSONDecodeError:
                continue
    else:
        with contextlib.suppress(json.JSONDecodeError):  # a cut body: nothing parseable
            _absorb(r, json.loads(sent), calls)
    r.tool_calls = [calls[i] for i in sorted(calls)]
    return r
