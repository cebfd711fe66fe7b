"""A canonical chat-completions view of journal entries recorded in other wire dialects.

Theory of operation: the checks read chat-completions shapes, both in request bodies
(``messages`` with ``role``/``content``/``tool_calls``/``tool_call_id``/``reasoning_content``,
``max_tokens``, ``tools``, ``stream``, ``model``) and in the bytes the gateway sent (chat SSE
``data:`` chunks ending in ``data: [DONE]``, or a chat JSON body). An entry of the Anthropic
Messages or OpenAI Responses dialect is translated into the entry a chat-completions exchange
carrying the same content would have left: its request body becomes a chat body and the SSE
events (or JSON body) it was answered with are re-rendered as chat chunks, event for event.

Only complete SSE events count (an event ends at a blank line); a partial trailing event is
dropped and kept under ``raw["dropped"]``. Byte-level fields (``sent_bytes``, ``full_bytes``,
``cut_at_byte``, ``end``, timings, headers) are left as they are: they describe the wire, and
failure detection rests on them. The original body and bytes stay under ``raw``. Vendor
credentials in the history (thinking ``signature``, ``redacted_thinking`` data,
``encrypted_content``) are kept on the canonical assistant message under vendor-private keys so
that a check can still see whether they were forwarded.

The translation is pure: the input journal and its entries are never modified.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "CHAT",
    "canonical_journal",
    "canonical_entry",
    "chat_body",
    "chat_sent",
    "anthropic_body",
    "responses_body",
]

CHAT = "openai_chat"
ANTHROPIC = "anthropic_messages"
RESPONSES = "openai_responses"

# Anthropic stop_reason -> chat finish_reason.
_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
# Responses incomplete_details.reason -> chat finish_reason.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}

_LINE_SEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _dumps(obj: Any) -> str:
    # The chat renderer's serialisation (default separators): checks match its byte patterns,
    # e.g. '"finish_reason": "length"'. Characters str.splitlines() breaks on are escaped.
    s = json.dumps(obj, ensure_ascii=False)
    for ch, esc in _LINE_SEPS.items():
        s = s.replace(ch, esc)
    return s


def _json_text(obj: Any) -> str:
    """Tool arguments as the text a chat model would have sent (the object's plain JSON)."""
    return json.dumps(obj, ensure_ascii=False)


# --- request bodies ------------------------------------------------------------------------


def _text_of(blocks: Any) -> str:
    """The text of a string or of a list of text blocks (Anthropic ``system`` and the like)."""
    if isinstance(blocks, str):
        return blocks
    if isinstance(blocks, list):
        return "\n\n".join(
            str(b.get("text") or "")
            for b in blocks
            if isinstance(b, dict) and b.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def _image_part(url: str, detail: Any = None) -> dict[str, Any]:
    img: dict[str, Any] = {"url": url}
    if detail is not None:
        img["detail"] = detail
    return {"type": "image_url", "image_url": img}


def _anthropic_media(block: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic ``image`` / ``document`` block as a chat content part."""
    src = block.get("source") or {}
    if block.get("type") == "image":
        if src.get("type") == "base64":
            return _image_part(f"data:{src.get('media_type', '')};base64,{src.get('data', '')}")
        if src.get("type") == "url":
            return _image_part(str(src.get("url") or ""))
        return {"type": "image_url", "image_url": {"source": src}}
    return {"type": "file", "file": dict(src)}


def _parts_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A plain string when all parts are text (how chat clients usually send), else parts."""
    if all(p.get("type") == "text" for p in parts):
        return "".join(str(p.get("text") or "") for p in parts)
    return parts


def _tool_result_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return content or ""
    parts: list[dict[str, Any]] = []
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        if b.get("type") in ("text", "input_text", "output_text"):
            parts.append({"type": "text", "text": str(b.get("text") or "")})
        elif b.get("type") in ("image", "document"):
            parts.append(_anthropic_media(b))
        elif b.get("type") == "input_image":
            parts.append(_image_part(str(b.get("image_url") or b.get("file_id") or "")))
        elif b.get("type") == "input_file":
            parts.append({"type": "file", "file": {k: v for k, v in b.items() if k != "type"}})
    return _parts_content(parts)


def _chat_tools(tools: Any, schema_key: str) -> Any:
    """Function tools in chat shape; others (hosted/server tools) kept as they are."""
    if not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        if not isinstance(t, dict) or "function" in t:
            out.append(t)
            continue
        is_fn = (
            t.get("type") == "function"
            if schema_key == "parameters"
            else (t.get("type") in (None, "custom") and "name" in t)
        )
        if not is_fn:
            out.append(t)
            continue
        fn: dict[str, Any] = {"name": t.get("name")}
        if t.get("description") is not None:
            fn["description"] = t["description"]
        fn["parameters"] = t.get(schema_key) or {"type": "object", "properties": {}}
        if t.get("strict") is not None:
            fn["strict"] = t["strict"]
        out.append({"type": "function", "function": fn})
    return out


def _private(msg: dict[str, Any], key: str, values: list[Any]) -> None:
    """Keep vendor credentials on the message: one value as is, several as a list."""
    if values:
        msg[key] = values[0] if len(values) == 1 else values


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
            args = inp if isinstance(inp, str) else _json_text(inp)
            calls.append(
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {"name": b.get("name"), "arguments": args},
                }
            )
    msg["content"] = "".join(texts) if texts or not calls else None
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    _private(msg, "signature", signatures)
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
            out.append({"role": role, "content": _parts_content(list(parts))})
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
                "content": _tool_result_content(b.get("content")),
            }
            if b.get("is_error"):
                tm["is_error"] = True
            out.append(tm)
        elif kind == "text":
            parts.append({"type": "text", "text": str(b.get("text") or "")})
        elif kind in ("image", "document"):
            parts.append(_anthropic_media(b))
    flush()
    return out


_ANTHROPIC_KEYS = {"system", "messages", "tools"}


def anthropic_body(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages request body as a chat-completions body."""
    msgs: list[dict[str, Any]] = []
    if body.get("system"):
        msgs.append({"role": "system", "content": _text_of(body["system"])})
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
        out["tools"] = _chat_tools(body["tools"], "input_schema")
    return out


def _responses_parts(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind in ("input_text", "output_text", "text", "refusal"):
            parts.append({"type": "text", "text": str(p.get("text") or p.get("refusal") or "")})
        elif kind == "input_image":
            parts.append(
                _image_part(str(p.get("image_url") or p.get("file_id") or ""), p.get("detail"))
            )
        elif kind == "input_file":
            parts.append({"type": "file", "file": {k: v for k, v in p.items() if k != "type"}})
        elif kind == "input_audio":
            parts.append(dict(p))
    return _parts_content(parts)


_RESPONSES_KEYS = {"instructions", "input", "tools", "max_output_tokens"}
_CALL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def responses_body(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses request body as a chat-completions body.

    Consecutive assistant-side items (``reasoning``, assistant ``message``, ``function_call``)
    make one assistant message, as a chat client would have sent them.
    """
    msgs: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        msgs.append({"role": "system", "content": body["instructions"]})
    inp = body.get("input")
    if isinstance(inp, str):
        msgs.append({"role": "user", "content": inp})
    turn: dict[str, Any] | None = None
    texts: list[str] = []
    reasoning: list[str] = []
    encrypted: list[Any] = []
    calls: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal turn
        if turn is None:
            return
        turn["content"] = "".join(texts) if texts or not calls else None
        if reasoning:
            turn["reasoning_content"] = "".join(reasoning)
        _private(turn, "encrypted_content", encrypted)
        if calls:
            turn["tool_calls"] = list(calls)
        msgs.append(turn)
        turn = None
        texts.clear(), reasoning.clear(), encrypted.clear(), calls.clear()

    def assistant() -> None:
        nonlocal turn
        if turn is None:
            turn = {"role": "assistant"}

    for item in inp if isinstance(inp, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message" and item.get("role") == "assistant":
            assistant()
            c = _responses_parts(item.get("content"))
            texts.append(c if isinstance(c, str) else _text_of(c))
        elif kind == "reasoning":
            assistant()
            summary = "".join(
                str(s.get("text") or "") for s in item.get("summary") or [] if isinstance(s, dict)
            )
            if not summary:
                summary = "".join(
                    str(s.get("text") or "")
                    for s in item.get("content") or []
                    if isinstance(s, dict)
                )
            reasoning.append(summary)
            if item.get("encrypted_content") is not None:
                encrypted.append(item["encrypted_content"])
        elif kind in _CALL_ITEMS:
            assistant()
            if kind == "function_call":
                name, args = item.get("name"), item.get("arguments")
            elif kind == "custom_tool_call":
                name, args = item.get("name"), item.get("input")
            else:
                name, args = "local_shell", _json_text(item.get("action"))
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else _json_text(args),
                    },
                }
            )
        elif kind in _OUTPUT_ITEMS:
            flush()
            out = item.get("output")
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": _tool_result_content(out) if not isinstance(out, str) else out,
                }
            )
        elif kind == "message":
            flush()
            msgs.append(
                {
                    "role": str(item.get("role") or "user"),
                    "content": _responses_parts(item.get("content")),
                }
            )
    flush()
    out = {k: v for k, v in body.items() if k not in _RESPONSES_KEYS}
    out["messages"] = msgs
    if "max_output_tokens" in body:
        out["max_tokens"] = body["max_output_tokens"]
    if "tools" in body:
        out["tools"] = _chat_tools(body["tools"], "parameters")
    return out


def chat_body(body: Any, dialect: str) -> Any:
    """A request body of ``dialect`` as a chat-completions body (other values unchanged)."""
    if not isinstance(body, dict):
        return body
    if dialect == ANTHROPIC:
        return anthropic_body(body)
    if dialect == RESPONSES:
        return responses_body(body)
    return body


# --- responses -----------------------------------------------------------------------------


class _Chat:
    """Accumulates chat SSE frames with the chunk envelope of the original response."""

    def __init__(self) -> None:
        self.id = "chatcmpl-canon"
        self.model = "fake-model"
        self.frames: list[str] = []

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
        with_choice: bool = True,
    ) -> None:
        obj: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [],
        }
        if with_choice:
            obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
        if usage is not None:
            obj["usage"] = usage
        self.data(_dumps(obj))

    def data(self, payload: str) -> None:
        self.frames.append("".join(f"data: {ln}\n" for ln in payload.split("\n")) + "\n")

    def verbatim(self, block: str) -> None:
        self.frames.append(block + "\n\n")


def _usage(inp: Any, out: Any) -> dict[str, int] | None:
    """Chat usage, or None when the dialect reported only zeros (nothing was scripted)."""
    i, o = int(inp or 0), int(out or 0)
    if not (i or o):
        return None
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


def _sse_blocks(sent: str) -> tuple[list[str], str]:
    """Complete SSE event blocks and the partial tail after the last blank line."""
    text = sent.replace("\r\n", "\n").replace("\r", "\n")
    end = text.rfind("\n\n")
    if end < 0:
        return [], text
    blocks = [b for b in text[:end].split("\n\n") if b.strip()]
    return blocks, text[end + 2 :]


def _parse_block(block: str) -> tuple[str | None, str | None]:
    """(event name, data) of one SSE block; data None when the block has no data field."""
    event, data = None, []
    for ln in block.split("\n"):
        if ln.startswith("event:"):
            event = ln[6:].strip()
        elif ln.startswith("data:"):
            data.append(ln[5:].removeprefix(" "))
    return event, ("\n".join(data) if data else None)


class _AnthropicStream:
    def __init__(self, out: _Chat) -> None:
        self.out = out
        self.tools: dict[int, int] = {}  # content block index -> tool call index
        self.input_tokens = 0

    def event(self, kind: str, p: dict[str, Any]) -> None:
        out = self.out
        if kind == "message_start":
            m = p.get("message") or {}
            out.id, out.model = str(m.get("id") or out.id), str(m.get("model") or out.model)
            self.input_tokens = int((m.get("usage") or {}).get("input_tokens") or 0)
            out.chunk({"role": "assistant", "content": ""})
        elif kind == "content_block_start":
            b = p.get("content_block") or {}
            if b.get("type") == "tool_use":
                k = self.tools.setdefault(int(p.get("index", 0)), len(self.tools))
                first = {
                    "index": k,
                    "id": b.get("id"),
                    "type": "function",
                    "function": {"name": b.get("name"), "arguments": ""},
                }
                out.chunk({"tool_calls": [first]})
            elif b.get("type") == "text" and b.get("text"):
                out.chunk({"content": b["text"]})
            elif b.get("type") == "thinking" and b.get("thinking"):
                out.chunk({"reasoning_content": b["thinking"]})
        elif kind == "content_block_delta":
            d = p.get("delta") or {}
            if d.get("type") == "text_delta":
                out.chunk({"content": d.get("text") or ""})
            elif d.get("type") == "thinking_delta":
                out.chunk({"reasoning_content": d.get("thinking") or ""})
            elif d.get("type") == "input_json_delta":
                k = self.tools.get(int(p.get("index", 0)))
                if k is not None:
                    piece = {"index": k, "function": {"arguments": d.get("partial_json") or ""}}
                    out.chunk({"tool_calls": [piece]})
            # signature_delta: the credential has no chat counterpart (kept under raw).
        elif kind == "message_delta":
            reason = (p.get("delta") or {}).get("stop_reason")
            usage = _usage(self.input_tokens, (p.get("usage") or {}).get("output_tokens"))
            if reason is not None:
                out.chunk({}, _STOP.get(reason, reason), usage)
            elif usage is not None:
                out.chunk(None, None, usage, with_choice=False)
        elif kind == "message_stop":
            out.data("[DONE]")
        elif kind == "error":
            out.data(_dumps({"error": p.get("error") or {}}))


class _ResponsesStream:
    def __init__(self, out: _Chat) -> None:
        self.out = out
        self.tools: dict[Any, int] = {}  # item id / output index -> tool call index
        self.streamed: dict[Any, str] = {}  # text already sent per item (for .done events)

    def _key(self, p: dict[str, Any]) -> Any:
        return p.get("item_id") if p.get("item_id") is not None else p.get("output_index")

    def _text(self, key: Any, full: str, delta: dict[str, Any], field: str) -> None:
        """A ``.done`` event whose text was not (fully) streamed: send the rest."""
        got = self.streamed.get(key, "")
        if full.startswith(got) and len(full) > len(got):
            self.streamed[key] = full
            rest = full[len(got) :]
            if field == "arguments":
                k = self.tools.get(key)
                if k is not None:
                    self.out.chunk({"tool_calls": [{"index": k, "function": {"arguments": rest}}]})
            else:
                self.out.chunk({**delta, field: rest})

    def event(self, kind: str, p: dict[str, Any]) -> None:
        out = self.out
        if kind == "response.created":
            r = p.get("response") or {}
            out.id, out.model = str(r.get("id") or out.id), str(r.get("model") or out.model)
            out.chunk({"role": "assistant", "content": ""})
        elif kind == "response.output_item.added":
            item = p.get("item") or {}
            if item.get("type") in _CALL_ITEMS:
                k = len(self.tools)
                for key in (item.get("id"), p.get("output_index")):
                    if key is not None:
                        self.tools[key] = k
                first = {
                    "index": k,
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": ""},
                }
                out.chunk({"tool_calls": [first]})
                self.streamed[item.get("id")] = ""
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            key = (self._key(p), "r", p.get("summary_index", p.get("content_index")))
            self.streamed[key] = self.streamed.get(key, "") + str(p.get("delta") or "")
            out.chunk({"reasoning_content": p.get("delta") or ""})
        elif kind in ("response.reasoning_summary_text.done", "response.reasoning_text.done"):
            key = (self._key(p), "r", p.get("summary_index", p.get("content_index")))
            self._text(key, str(p.get("text") or ""), {}, "reasoning_content")
        elif kind == "response.output_text.delta":
            key = (self._key(p), "t", p.get("content_index"))
            self.streamed[key] = self.streamed.get(key, "") + str(p.get("delta") or "")
            out.chunk({"content": p.get("delta") or ""})
        elif kind == "response.output_text.done":
            key = (self._key(p), "t", p.get("content_index"))
            self._text(key, str(p.get("text") or ""), {}, "content")
        elif kind == "response.function_call_arguments.delta":
            key = self._key(p)
            k = self.tools.get(key)
            if k is not None:
                self.streamed[key] = self.streamed.get(key, "") + str(p.get("delta") or "")
                piece = {"index": k, "function": {"arguments": p.get("delta") or ""}}
                out.chunk({"tool_calls": [piece]})
        elif kind == "response.function_call_arguments.done":
            self._text(self._key(p), str(p.get("arguments") or ""), {}, "arguments")
        elif kind in ("response.completed", "response.incomplete"):
            r = p.get("response") or {}
            out.chunk({}, _responses_finish(r, bool(self.tools)), _responses_usage(r))
            out.data("[DONE]")
        elif kind == "response.failed":
            err = (p.get("response") or {}).get("error") or {}
            out.data(_dumps({"error": _openai_error(err)}))
        elif kind == "error":
            inner = {k: v for k, v in p.items() if k not in ("type", "sequence_number")}
            out.data(_dumps({"error": _openai_error(inner.get("error") or inner)}))


def _openai_error(err: dict[str, Any]) -> dict[str, Any]:
    """A Responses error object ({code, message}) in chat's shape ({message, type, code})."""
    out = dict(err)
    out.setdefault("type", err.get("code"))
    return out


def _responses_finish(r: dict[str, Any], saw_calls: bool) -> str:
    if r.get("status") == "incomplete":
        reason = (r.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(reason, "length")
    calls = any(isinstance(i, dict) and i.get("type") in _CALL_ITEMS for i in r.get("output") or [])
    return "tool_calls" if calls or saw_calls else "stop"


def _responses_usage(r: dict[str, Any]) -> dict[str, int] | None:
    u = r.get("usage") or {}
    return _usage(u.get("input_tokens"), u.get("output_tokens"))


def _stream_sent(sent: str, dialect: str) -> tuple[str, str, list[int]]:
    """(chat SSE text, dropped partial tail, chat frames written before each dialect block)."""
    out = _Chat()
    handler: Any = _AnthropicStream(out) if dialect == ANTHROPIC else _ResponsesStream(out)
    blocks, tail = _sse_blocks(sent)
    before: list[int] = []
    for block in blocks:
        before.append(len(out.frames))
        event, data = _parse_block(block)
        if data is None:  # comments (keep-alive) and data-less lines: ignored by every reader
            out.verbatim(block)
            continue
        if data.strip() == "[DONE]":
            out.data("[DONE]")
            continue
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            out.data(data)  # not JSON in any dialect: readers skip it the same way
            continue
        if not isinstance(payload, dict) or "choices" in payload or "type" not in payload:
            # Already chat-shaped (a replayed chat recording) or foreign: kept as it is.
            out.data(data)
            continue
        handler.event(str(payload.get("type") or event or ""), payload)
    return "".join(out.frames), tail, before


def _anthropic_json(obj: dict[str, Any]) -> dict[str, Any]:
    texts, reasoning, calls = [], [], []
    for b in obj.get("content") or []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            texts.append(str(b.get("text") or ""))
        elif b.get("type") == "thinking":
            reasoning.append(str(b.get("thinking") or ""))
        elif b.get("type") == "tool_use":
            inp = b.get("input")
            calls.append(
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {
                        "name": b.get("name"),
                        "arguments": inp if isinstance(inp, str) else _json_text(inp),
                    },
                }
            )
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    if calls:
        msg["tool_calls"] = calls
    reason = obj.get("stop_reason")
    u = obj.get("usage") or {}
    return _completion(
        obj,
        msg,
        None if reason is None else _STOP.get(reason, reason),
        _usage(u.get("input_tokens"), u.get("output_tokens")),
    )


def _responses_json(obj: dict[str, Any]) -> dict[str, Any]:
    texts, reasoning, calls = [], [], []
    for item in obj.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning":
            reasoning.append(
                "".join(str(s.get("text") or "") for s in item.get("summary") or [])
                or "".join(str(s.get("text") or "") for s in item.get("content") or [])
            )
        elif item.get("type") == "message":
            c = _responses_parts(item.get("content"))
            texts.append(c if isinstance(c, str) else _text_of(c))
        elif item.get("type") in _CALL_ITEMS:
            args = item.get("arguments", item.get("input"))
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {
                        "name": item.get("name"),
                        "arguments": args if isinstance(args, str) else _json_text(args),
                    },
                }
            )
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    if calls:
        msg["tool_calls"] = calls
    status = obj.get("status")
    finish = None if status in ("in_progress", "queued") else _responses_finish(obj, False)
    return _completion(obj, msg, finish, _responses_usage(obj))


def _completion(
    obj: dict[str, Any], msg: dict[str, Any], finish: str | None, usage: dict[str, int] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(obj.get("id") or "chatcmpl-canon"),
        "object": "chat.completion",
        "created": 0,
        "model": str(obj.get("model") or "fake-model"),
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def _json_sent(sent: str, dialect: str, status: int | None) -> str:
    """A JSON body in chat's shape; a body that does not parse (cut) is left as it is."""
    try:
        obj = json.loads(sent)
    except json.JSONDecodeError:
        return sent
    if not isinstance(obj, dict):
        return sent
    if obj.get("type") == "error" and isinstance(obj.get("error"), dict):
        # Anthropic's error envelope; the inner {type, message} is kept (overloaded_error...).
        return _dumps({"error": dict(obj["error"])})
    if "error" in obj and "choices" not in obj and obj.get("object") != "response":
        return sent  # already OpenAI-shaped
    if status is not None and status >= 400:
        return sent
    if dialect == ANTHROPIC and obj.get("type") == "message":
        return _dumps(_anthropic_json(obj))
    if dialect == RESPONSES and obj.get("object") == "response":
        if obj.get("status") == "failed" and obj.get("error"):
            return _dumps({"error": _openai_error(obj["error"])})
        return _dumps(_responses_json(obj))
    return sent


def chat_sent(sent: str, dialect: str, stream: bool, status: int | None = 200) -> str:
    """The bytes a chat-completions gateway would have sent for ``sent`` (complete events)."""
    if dialect not in (ANTHROPIC, RESPONSES):
        return sent
    if stream:
        return _stream_sent(sent, dialect)[0]
    return _json_sent(sent, dialect, status)


# --- entries ---------------------------------------------------------------------------------


_INJECTED = ("malformed_event", "in_band_error")


def _injected_block(sent: str, fault: str) -> int:
    """Index of the gateway's injected block: an in-band error ends the stream; a malformed
    event is the first block without JSON data (the gateway's own events all carry it)."""
    blocks, _ = _sse_blocks(sent)
    if fault == "malformed_event":
        for i, block in enumerate(blocks):
            data = _parse_block(block)[1]
            if data is None:
                return i
            try:
                json.loads(data)
            except json.JSONDecodeError:
                return i
    return max(len(blocks) - 1, 0)


def canonical_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions view of one journal entry (the entry itself when already chat)."""
    dialect = entry.get("dialect")
    if (
        dialect in (None, CHAT)
        or dialect not in (ANTHROPIC, RESPONSES)
        or entry.get("kind") != "chat"
        or "raw" in entry  # already canonical
    ):
        return entry
    out = dict(entry)
    raw: dict[str, Any] = {"body": entry.get("body"), "sent": None, "dropped": ""}
    out["body"] = chat_body(entry.get("body"), dialect)
    resp = entry.get("response")
    if isinstance(resp, dict):
        sent = str(resp.get("sent") or "")
        raw["sent"] = resp.get("sent")
        r = dict(resp)
        if resp.get("stream") and (resp.get("status") or 0) < 400:
            text, tail, before = _stream_sent(sent, dialect)
            r["sent"], raw["dropped"] = text, tail
            params = entry.get("fault_params")
            if entry.get("fault") in _INJECTED and isinstance(params, dict) and before:
                # The injected frame's position re-counted in the chat frames written before it
                # (evidence._injected_after_done reads it). ``after_events`` is a neutral point
                # of the reply, not an index into this dialect's events: find the frame itself.
                n = min(_injected_block(sent, str(entry.get("fault"))), len(before) - 1)
                raw["fault_params"] = params
                out["fault_params"] = {**params, "after_events": before[n]}
        else:
            r["sent"] = _json_sent(sent, dialect, resp.get("status"))
        out["response"] = r
    out["raw"] = raw
    return out


def canonical_journal(journal: dict[str, Any]) -> dict[str, Any]:
    """The journal with every entry in its chat-completions view (chat entries unchanged)."""
    entries = journal.get("entries")
    if not isinstance(entries, list):
        return journal
    return {
        **journal,
        "entries": [canonical_entry(e) if isinstance(e, dict) else e for e in entries],
    }
