"""Anthropic Messages codec: neutral (chat-shaped) bodies out, neutral chunks in.

Theory of operation: :meth:`AnthropicCodec.request` renders leading system messages as
``system``, user turns as they are (image parts as ``image`` blocks), each run of tool results
as one user turn of ``tool_result`` blocks, a system note later in the conversation as a user
turn (the API has no system role there), and assistant turns as ``thinking`` (own, signed),
``text`` and ``tool_use`` blocks. The stream decoder maps ``text_delta`` / ``thinking_delta`` /
``input_json_delta`` to content / reasoning / tool-call pieces, ``message_delta.stop_reason``
to the finish reason (``end_turn`` -> stop, ``tool_use`` -> tool_calls, ``max_tokens`` ->
length), ``message_stop`` to the end of the stream and an ``error`` event to an in-band error;
``signature_delta`` is remembered, not shown. A stream without a stop reason has no finish
marker, so the core treats it as failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._wire_base import Credentials, chunk, handed_over, safe_id, text_of

__all__ = ["ANTHROPIC_VERSION", "STOP_REASONS", "AnthropicCodec"]

ANTHROPIC_VERSION = "2023-06-01"
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def _media(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """A chat content part as an Anthropic content block (text or image), or None."""
    kind = part.get("type")
    if kind in ("text", "input_text"):
        text = str(part.get("text") or "")
        return {"type": "text", "text": text} if text else None
    if kind == "image_url":
        url = str((part.get("image_url") or {}).get("url") or "")
        if url.startswith("data:") and ";base64," in url:
            head, data = url[5:].split(";base64,", 1)
            return {"type": "image", "source": {"type": "base64", "media_type": head, "data": data}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    return None


def _blocks(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, list):
        out = [b for b in (_media(p) for p in content if isinstance(p, dict)) if b]
        return out or ""
    return "" if content is None else str(content)


def _input_of(arguments: Any) -> dict[str, Any]:
    """A ``tool_use`` input object; text that is not an object (a cut call) is kept whole."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (json.JSONDecodeError, TypeError):
        return {"_raw_arguments": str(arguments)}
    return value if isinstance(value, dict) else {"_raw_arguments": str(arguments)}


class AnthropicCodec:
    name = "anthropic_messages"
    path = "/messages"

    def __init__(self) -> None:
        self.credentials = Credentials()

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    # ---- requests ------------------------------------------------------------------------
    def request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        model = str(body.get("model") or "")
        msgs = list(body.get("messages") or [])
        system: list[str] = []
        while msgs and msgs[0].get("role") == "system":
            system.append(text_of(msgs.pop(0).get("content")))
        out: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []

        def flush() -> None:
            if results:
                out.append({"role": "user", "content": list(results)})
                results.clear()

        for m in msgs:
            role = m.get("role")
            if role == "tool":
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": safe_id(m.get("tool_call_id"), "toolu_"),
                        "content": _blocks(m.get("content")),
                    }
                )
                continue
            flush()
            if role == "assistant":
                out.append({"role": "assistant", "content": self._assistant(m, model)})
            else:
                out.append({"role": "user", "content": _blocks(m.get("content"))})
        flush()
        wire: dict[str, Any] = {
            "model": model,
            "max_tokens": int(body.get("max_tokens") or 8192),
            "messages": out,
        }
        if system:
            wire["system"] = "\n\n".join(system)
        if body.get("tools"):
            wire["tools"] = [
                {
                    "name": (t.get("function") or {}).get("name", ""),
                    "description": (t.get("function") or {}).get("description", ""),
                    "input_schema": (t.get("function") or {}).get("parameters")
                    or {"type": "object", "properties": {}},
                }
                for t in body["tools"]
            ]
        if "stream" in body:
            wire["stream"] = bool(body["stream"])
        return wire

    def _assistant(self, m: Mapping[str, Any], model: str) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        reasoning = str(m.get("reasoning_content") or "")
        own = self.credentials.recall(model, reasoning) if reasoning else None
        if own is not None:
            blocks += own  # signed thinking, sent back to the model that wrote it
        else:
            m = handed_over(m)
            if m.get("handed_over_reasoning"):
                blocks.append({"type": "text", "text": m["handed_over_reasoning"] + "\n\n"})
        text = text_of(m.get("content"))
        if text:
            blocks.append({"type": "text", "text": text})
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": safe_id(c.get("id"), "toolu_"),
                    "name": fn.get("name", ""),
                    "input": _input_of(fn.get("arguments")),
                }
            )
        return blocks

    # ---- replies -------------------------------------------------------------------------
    def decoder(self, model: str) -> _StreamDecoder:
        return _StreamDecoder(self.credentials, model)

    def full_body(self, text: str, model: str) -> str:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return text  # the core reports it as unreadable
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            return json.dumps({"choices": []})
        texts: list[str] = []
        thoughts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for b in data["content"]:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                texts.append(str(b.get("text") or ""))
            elif b.get("type") in ("thinking", "redacted_thinking"):
                thoughts.append(b)
            elif b.get("type") == "tool_use":
                inp = b.get("input")
                calls.append(
                    {
                        "id": b.get("id"),
                        "type": "function",
                        "function": {
                            "name": b.get("name"),
                            "arguments": inp if isinstance(inp, str) else json.dumps(inp),
                        },
                    }
                )
        reasoning = "".join(str(b.get("thinking") or "") for b in thoughts)
        self.credentials.remember(model, reasoning, thoughts)
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if reasoning:
            msg["reasoning_content"] = reasoning
        if calls:
            msg["tool_calls"] = calls
        stop = data.get("stop_reason")
        usage = data.get("usage") or {}
        return json.dumps(
            {
                "choices": [
                    {
                        "index": 0,
                        "message": msg,
                        "finish_reason": None if stop is None else STOP_REASONS.get(stop, stop),
                    }
                ],
                "usage": {
                    "prompt_tokens": int(usage.get("input_tokens") or 0),
                    "completion_tokens": int(usage.get("output_tokens") or 0),
                },
            },
            ensure_ascii=False,
        )


class _StreamDecoder:
    def __init__(self, credentials: Credentials, model: str) -> None:
        self.credentials = credentials
        self.model = model
        self.kinds: dict[int, str] = {}  # content block index -> block type
        self.tools: dict[int, int] = {}  # content block index -> tool call index
        self.thoughts: dict[int, dict[str, Any]] = {}  # thinking blocks, signatures included
        self.input_tokens = 0

    def feed(self, data: str) -> list[str]:
        try:
            p = json.loads(data)
        except json.JSONDecodeError:
            return [data]  # the core reports the malformed event
        if not isinstance(p, dict):
            return [data]
        idx = p.get("index", 0) if isinstance(p.get("index", 0), int) else 0
        handler = _EVENTS.get(str(p.get("type")))
        # ping, content_block_stop, unknown events: nothing to show
        return handler(self, p, idx) if handler is not None else []

    def _message_start(self, p: dict[str, Any], idx: int) -> list[str]:
        usage = (p.get("message") or {}).get("usage") or {}
        self.input_tokens = int(usage.get("input_tokens") or 0)
        return []

    def _block_start(self, p: dict[str, Any], idx: int) -> list[str]:
        b = p.get("content_block") or {}
        self.kinds[idx] = str(b.get("type"))
        if b.get("type") == "tool_use":
            k = self.tools.setdefault(idx, len(self.tools))
            first = {
                "index": k,
                "id": b.get("id"),
                "type": "function",
                "function": {"name": b.get("name") or "", "arguments": ""},
            }
            return [chunk({"tool_calls": [first]})]
        if b.get("type") in ("thinking", "redacted_thinking"):
            self.thoughts[idx] = dict(b)
            if b.get("thinking"):
                return [chunk({"reasoning_content": b["thinking"]})]
        if b.get("type") == "text" and b.get("text"):
            return [chunk({"content": b["text"]})]
        return []

    def _block_delta(self, p: dict[str, Any], idx: int) -> list[str]:
        d = p.get("delta") or {}
        dt = d.get("type")
        if dt == "text_delta":
            return [chunk({"content": d.get("text") or ""})]
        if dt == "thinking_delta":
            self._add_to_thought(idx, "thinking", d)
            return [chunk({"reasoning_content": d.get("thinking") or ""})]
        if dt == "signature_delta":
            self._add_to_thought(idx, "signature", d)
        elif dt == "input_json_delta" and idx in self.tools:
            piece = {"index": self.tools[idx], "function": {"arguments": d.get("partial_json")}}
            return [chunk({"tool_calls": [piece]})]
        return []

    def _add_to_thought(self, idx: int, field: str, delta: dict[str, Any]) -> None:
        """A thinking block's ``thinking`` or ``signature`` grows by ``delta``'s piece."""
        block = self.thoughts.setdefault(idx, {"type": "thinking", "thinking": ""})
        block[field] = str(block.get(field) or "") + str(delta.get(field) or "")
        self._remember()

    def _message_delta(self, p: dict[str, Any], idx: int) -> list[str]:
        stop = (p.get("delta") or {}).get("stop_reason")
        out = (p.get("usage") or {}).get("output_tokens")
        usage = None
        if out is not None or self.input_tokens:
            usage = {"prompt_tokens": self.input_tokens, "completion_tokens": int(out or 0)}
        if stop is not None:
            return [chunk({}, STOP_REASONS.get(stop, stop), usage)]
        if usage is not None:
            return [chunk(None, None, usage)]
        return []

    def _message_stop(self, p: dict[str, Any], idx: int) -> list[str]:
        return ["[DONE]"]

    def _error(self, p: dict[str, Any], idx: int) -> list[str]:
        return [json.dumps({"error": p.get("error") or {"message": "error event"}})]

    def _remember(self) -> None:
        blocks = [self.thoughts[i] for i in sorted(self.thoughts)]
        reasoning = "".join(str(b.get("thinking") or "") for b in blocks)
        if any(b.get("signature") or b.get("type") == "redacted_thinking" for b in blocks):
            self.credentials.remember(self.model, reasoning, blocks)


# What each Messages stream event (by its ``type``) gives the core: chat SSE data payloads.
_EVENTS: dict[str, Callable[[_StreamDecoder, dict[str, Any], int], list[str]]] = {
    "message_start": _StreamDecoder._message_start,
    "content_block_start": _StreamDecoder._block_start,
    "content_block_delta": _StreamDecoder._block_delta,
    "message_delta": _StreamDecoder._message_delta,
    "message_stop": _StreamDecoder._message_stop,
    "error": _StreamDecoder._error,
}


# This module's dialect and codec: the agent speaks every dialect a `_wire_*.py` module names.
DIALECT = "anthropic_messages"
CODEC = AnthropicCodec
