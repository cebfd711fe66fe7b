"""Anthropic Messages read back into the canonical chat view (``anthropic_messages``' reader).

A request body becomes the chat body a client carrying the same conversation would have sent
(tool results as ``tool`` messages; thinking as ``reasoning_content``, its ``signature`` and
``redacted_thinking`` blocks kept under vendor-private keys so a check can see whether they were
forwarded); stream events and JSON replies become chat chunks and completions, event for event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fakes.dialects import _chatview as cv
from fakes.dialects._protocol import ChatOut

__all__ = ["read_body", "read_json", "stream_reader", "StreamReader"]

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def _anthropic_assistant(content: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant"}
    if isinstance(content, str):
        msg["content"] = content
        return msg
    texts: list[str] = []
    reasoning: list[str] = []
    signatures: list[Any] = []
    redacted: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            texts.append(str(b.get("text") or ""))
        elif kind == "thinking":
            reasoning.append(str(b.get("thinking") or ""))
            if b.get("signature") is not None:
                signatures.append(b["signature"])
        elif kind == "redacted_thinking":
            redacted.append(dict(b))
        elif kind == "tool_use":
            inp = b.get("input")
            calls.append(cv.tool_call(b.get("id"), b.get("name"), inp))
    msg["content"] = "".join(texts) if texts or not calls else None
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    cv.keep_private(msg, "signature", signatures)
    if redacted:
        msg["thinking_blocks"] = redacted
    if calls:
        msg["tool_calls"] = calls
    return msg


def _anthropic_user(content: Any, role: str) -> list[dict[str, Any]]:
    """A user turn: one ``tool`` message per tool_result, the rest as a user message."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            out.append({"role": role, "content": cv.parts_content(list(parts))})
            parts.clear()

    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "tool_result":
            flush()
            tm: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": b.get("tool_use_id"),
                "content": cv.tool_result_content(b.get("content")),
            }
            if b.get("is_error"):
                tm["is_error"] = True
            out.append(tm)
        elif kind == "text":
            parts.append({"type": "text", "text": str(b.get("text") or "")})
        elif kind in ("image", "document"):
            parts.append(cv.media_part(b))
    flush()
    return out


_ANTHROPIC_KEYS = {"system", "messages", "tools"}


def read_body(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages request body as a chat-completions body."""
    msgs: list[dict[str, Any]] = []
    if body.get("system"):
        msgs.append({"role": "system", "content": cv.text_of(body["system"])})
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            msgs.append(_anthropic_assistant(m.get("content")))
        else:
            msgs.extend(_anthropic_user(m.get("content"), str(m.get("role") or "user")))
    out = {k: v for k, v in body.items() if k not in _ANTHROPIC_KEYS}
    out["messages"] = msgs
    if "tools" in body:
        out["tools"] = cv.chat_tools(body["tools"], "input_schema")
    return out


class StreamReader:
    """Reads Messages stream events into chat frames."""

    def __init__(self, out: ChatOut) -> None:
        self.out = out
        self.tools: dict[int, int] = {}  # content block index -> tool call index
        self.input_tokens = 0

    def event(self, kind: str, p: dict[str, Any]) -> None:
        handler = _EVENTS.get(kind)
        if handler is not None:  # ping and events of later API versions carry no content
            handler(self, p)

    def _message_start(self, p: dict[str, Any]) -> None:
        out, m = self.out, p.get("message") or {}
        out.id, out.model = str(m.get("id") or out.id), str(m.get("model") or out.model)
        self.input_tokens = int((m.get("usage") or {}).get("input_tokens") or 0)
        out.chunk({"role": "assistant", "content": ""})

    def _block_start(self, p: dict[str, Any]) -> None:
        b = p.get("content_block") or {}
        if b.get("type") == "tool_use":
            k = self.tools.setdefault(int(p.get("index", 0)), len(self.tools))
            first = {
                "index": k,
                "id": b.get("id"),
                "type": "function",
                "function": {"name": b.get("name"), "arguments": ""},
            }
            self.out.chunk({"tool_calls": [first]})
        elif b.get("type") == "text" and b.get("text"):
            self.out.chunk({"content": b["text"]})
        elif b.get("type") == "thinking" and b.get("thinking"):
            self.out.chunk({"reasoning_content": b["thinking"]})

    def _block_delta(self, p: dict[str, Any]) -> None:
        d = p.get("delta") or {}
        if d.get("type") == "text_delta":
            self.out.chunk({"content": d.get("text") or ""})
        elif d.get("type") == "thinking_delta":
            self.out.chunk({"reasoning_content": d.get("thinking") or ""})
        elif d.get("type") == "input_json_delta":
            call = self.tools.get(int(p.get("index", 0)))
            if call is not None:
                piece = {"index": call, "function": {"arguments": d.get("partial_json") or ""}}
                self.out.chunk({"tool_calls": [piece]})
        # signature_delta: the credential has no chat counterpart (kept under raw).

    def _message_delta(self, p: dict[str, Any]) -> None:
        reason = (p.get("delta") or {}).get("stop_reason")
        usage = cv.usage(self.input_tokens, (p.get("usage") or {}).get("output_tokens"))
        if reason is not None:
            self.out.chunk({}, _STOP.get(reason, reason), usage)
        elif usage is not None:
            self.out.chunk(None, None, usage, with_choice=False)

    def _message_stop(self, p: dict[str, Any]) -> None:
        del p
        self.out.data("[DONE]")

    def _error(self, p: dict[str, Any]) -> None:
        self.out.data(cv.dumps({"error": p.get("error") or {}}))


# What each Messages stream event becomes in the chat view.
_EVENTS: dict[str, Callable[[StreamReader, dict[str, Any]], None]] = {
    "message_start": StreamReader._message_start,
    "content_block_start": StreamReader._block_start,
    "content_block_delta": StreamReader._block_delta,
    "message_delta": StreamReader._message_delta,
    "message_stop": StreamReader._message_stop,
    "error": StreamReader._error,
}


def _message_json(obj: dict[str, Any]) -> dict[str, Any]:
    texts, reasoning, calls = [], [], []
    for b in obj.get("content") or []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            texts.append(str(b.get("text") or ""))
        elif b.get("type") == "thinking":
            reasoning.append(str(b.get("thinking") or ""))
        elif b.get("type") == "tool_use":
            calls.append(cv.tool_call(b.get("id"), b.get("name"), b.get("input")))
    msg = cv.reply_message(texts, reasoning, calls)
    reason = obj.get("stop_reason")
    u = obj.get("usage") or {}
    return cv.completion(
        obj,
        msg,
        None if reason is None else _STOP.get(reason, reason),
        cv.usage(u.get("input_tokens"), u.get("output_tokens")),
    )


def stream_reader(out: ChatOut) -> StreamReader:
    """A reader of one streamed Messages response writing chat frames to ``out``."""
    return StreamReader(out)


def read_json(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A ``message`` body as a chat completion; None for anything else."""
    return _message_json(obj) if obj.get("type") == "message" else None
