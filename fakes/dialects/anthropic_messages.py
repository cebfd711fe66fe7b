"""Anthropic Messages API rendering of a scripted reply (pure, no I/O).

Theory of operation: a neutral reply (text, reasoning, tool calls, finish reason, usage) becomes
the event sequence Anthropic streams: ``message_start``, ``ping``, one ``content_block_*`` group
per block (``thinking`` with ``thinking_delta`` pieces and a ``signature_delta``, ``text``,
``tool_use`` with ``input_json_delta`` pieces), ``message_delta`` (``stop_reason`` and usage) and
``message_stop``. ``message_delta`` is the finish marker (omitted when the finish reason is
None) and ``message_stop`` the end-of-stream marker (omitted when ``terminal`` is false), the
counterparts of the chat finish chunk and ``[DONE]``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from fakes.dialects._anthropic_messages_read import read_body, read_json, stream_reader
from fakes.dialects._sse import check_body, event_frame, pieces

__all__ = [
    "NAME",
    "PATH",
    "STOP_REASONS",
    "stream_events",
    "frame",
    "json_body",
    "error_body",
    "http_error_body",
    "prompt_too_long_body",
    "in_band_error_frame",
    "malformed_frame",
    "check_request",
    "match_view",
    "count_tokens",
    "signature",
    "marks",
    "read_body",
    "read_json",
    "stream_reader",
]

NAME = "anthropic_messages"
PATH = "/v1/messages"  # the endpoint, under a session's base URL

# Neutral finish reason -> Anthropic stop_reason.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def frame(event: str, payload: dict[str, Any]) -> bytes:
    """One SSE event as Anthropic sends it: an ``event:`` line, then one ``data:`` line."""
    return event_frame(event, payload)


def signature(reasoning: str) -> str:
    """A deterministic stand-in for the opaque thinking signature (base64, like the real one)."""
    return base64.b64encode(hashlib.sha256(reasoning.encode()).digest()).decode()


def _usage(reply: dict[str, Any]) -> tuple[int, int]:
    u = reply.get("usage") or {}
    inp = u.get("input_tokens", u.get("prompt_tokens", 0))
    out = u.get("output_tokens", u.get("completion_tokens", 0))
    return int(inp), int(out)


def _tool_id(call: dict[str, Any], i: int) -> str:
    return call.get("id") or f"toolu_{i}"


def _tool_input(arguments: str) -> Any:
    """The ``input`` object of a non-streamed tool_use block; {} when the text is not an object
    (e.g. arguments cut by ``length``), as a JSON body cannot carry a partial object."""
    try:
        v = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}


def stream_events(
    reply: dict[str, Any],
    model: str,
    *,
    terminal: bool = True,
    empty: str | None = None,
    mid: str = "msg_fake",
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, payload)`` pairs of a streamed reply.

    ``empty``: ``no_choices`` renders no content block, ``empty_message`` one empty text block.
    """
    inp, out_tokens = _usage(reply)
    ev: list[tuple[str, dict[str, Any]]] = [
        ("message_start", _message_start(mid, model, inp)),
        ("ping", {"type": "ping"}),
    ]
    for idx, (start, deltas) in enumerate(_blocks(reply, empty)):
        ev.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": idx, "content_block": start},
            )
        )
        ev += [
            ("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": d})
            for d in deltas
        ]
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
    finish = reply.get("finish_reason", "stop")
    if finish is not None or reply.get("usage") is not None:
        ev.append(("message_delta", _message_delta(finish, out_tokens)))
    if terminal:
        ev.append(("message_stop", {"type": "message_stop"}))
    return ev


def _message_start(mid: str, model: str, input_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0},
        },
    }


def _message_delta(finish: str | None, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {
            "stop_reason": None if finish is None else STOP_REASONS[finish],
            "stop_sequence": None,
        },
        "usage": {"output_tokens": output_tokens},
    }


_Block = tuple[dict[str, Any], list[dict[str, Any]]]  # a content block's start and its deltas


def _blocks(reply: dict[str, Any], empty: str | None) -> list[_Block]:
    """The content blocks of a streamed reply: thinking, text, one per tool call."""
    if empty == "empty_message":
        return [({"type": "text", "text": ""}, [])]
    if empty is not None:
        return []
    n = int(reply.get("chunk_chars") or 16)
    out: list[_Block] = []
    reasoning = reply.get("reasoning") or ""
    if reasoning:
        out.append(
            (
                {"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": p} for p in pieces(reasoning, n)]
                + [{"type": "signature_delta", "signature": signature(reasoning)}],
            )
        )
    text = reply.get("text") or ""
    if text:
        out.append(
            (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in pieces(text, n)],
            )
        )
    for i, call in enumerate(reply.get("tool_calls") or []):
        out.append(
            (
                {"type": "tool_use", "id": _tool_id(call, i), "name": call["name"], "input": {}},
                [
                    {"type": "input_json_delta", "partial_json": p}
                    for p in pieces(call.get("arguments") or "", n)
                ],
            )
        )
    return out


def json_body(
    reply: dict[str, Any], model: str, *, empty: str | None = None, mid: str = "msg_fake"
) -> dict[str, Any]:
    """The non-streaming ``message`` body of a reply."""
    content: list[dict[str, Any]] = []
    if empty is None:
        if reply.get("reasoning"):
            content.append(
                {
                    "type": "thinking",
                    "thinking": reply["reasoning"],
                    "signature": signature(reply["reasoning"]),
                }
            )
        if reply.get("text"):
            content.append({"type": "text", "text": reply["text"]})
        for i, c in enumerate(reply.get("tool_calls") or []):
            content.append(
                {
                    "type": "tool_use",
                    "id": _tool_id(c, i),
                    "name": c["name"],
                    "input": _tool_input(c.get("arguments") or ""),
                }
            )
    elif empty == "empty_message":
        content.append({"type": "text", "text": ""})
    finish = reply.get("finish_reason", "stop")
    inp, out = _usage(reply)
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": None if finish is None else STOP_REASONS[finish],
        "stop_sequence": None,
        "usage": {"input_tokens": inp, "output_tokens": out},
    }


def error_body(message: str, type_: str = "api_error") -> dict[str, Any]:
    """An Anthropic-shaped error body."""
    return {"type": "error", "error": {"type": type_, "message": message}}


def http_error_body(status: int) -> dict[str, Any]:
    """The default body of a scripted ``http_error`` (``overloaded_error`` on 529)."""
    type_ = _ERROR_TYPES.get(status, "api_error")
    msg = "Overloaded" if status == 529 else f"simulated error {status}"
    return error_body(msg, type_)


def prompt_too_long_body() -> dict[str, Any]:
    """A context window overflow as the Messages API words it (a 400)."""
    return error_body("prompt is too long: 131072 tokens > 128000 maximum", "invalid_request_error")


def in_band_error_frame(
    error: dict[str, Any] | None, seq: int = 0, model: str = "fake-model"
) -> bytes:
    """An ``error`` event inside the stream; ``error`` is the scripted inner object."""
    err = dict(error or {"type": "api_error", "message": "simulated in-band error"})
    err.setdefault("type", "api_error")
    err.setdefault("message", "simulated in-band error")
    del seq, model  # Anthropic error events carry neither
    return frame("error", {"type": "error", "error": err})


def malformed_frame(kind: str) -> bytes:
    """``bad_json``: a delta event whose data is not JSON; ``missing_data``: no ``data:`` field."""
    if kind == "bad_json":
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": \n\n'
    return b'{"type": "content_block_delta"}\n\n'


def check_request(body: Any) -> str | None:
    """What is wrong with a Messages request body, or None."""
    return check_body(body, "messages", (list,), "an array")


def match_view(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat-shaped view for step matching (system prompt first)."""
    msgs = list(body.get("messages") or [])
    if body.get("system"):
        msgs.insert(0, {"role": "system", "content": body["system"]})
    return {**body, "messages": msgs}


def count_tokens(body: Any) -> int:
    """A deterministic estimate (about 4 characters a token) for ``/v1/messages/count_tokens``."""
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def marks(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, ...] | None]:
    """The content milestone each event delivers, in ``openai_chat.marks``' terms; None for
    events that deliver none (``ping``, block starts and stops, ``signature_delta``)."""
    out: list[tuple[int, ...] | None] = []
    seen: dict[tuple[int, ...], int] = {}
    tool = -1

    def nth(key: tuple[int, ...]) -> int:
        seen[key] = seen.get(key, -1) + 1
        return seen[key]

    for name, payload in events:
        mark: tuple[int, ...] | None = None
        if name == "message_start":
            mark = (0,)
        elif name == "content_block_start" and payload["content_block"]["type"] == "tool_use":
            tool += 1
            mark = (3, tool, 0)
        elif name == "content_block_delta":
            kind = payload["delta"]["type"]
            if kind == "thinking_delta":
                mark = (1, nth((1,)))
            elif kind == "text_delta":
                mark = (2, nth((2,)))
            elif kind == "input_json_delta":
                mark = (3, tool, 1, nth((3, tool)))
        elif name == "message_delta":
            mark = (4,)
        elif name == "message_stop":
            mark = (5,)
        out.append(mark)
    return out
