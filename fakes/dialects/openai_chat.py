"""OpenAI chat-completions rendering of a scripted reply (pure, no I/O).

Chat completions is the canonical view every other dialect is read back into, so its read-back
is the identity, and the scale the other dialects place faults on (``marks``).
"""

from __future__ import annotations

import json
from typing import Any

from fakes.dialects._protocol import ChatOut
from fakes.dialects._sse import check_body, data_frame, dumps, pieces

__all__ = [
    "NAME",
    "PATH",
    "DONE",
    "CHUNK",
    "stream_events",
    "frame",
    "json_body",
    "error_body",
    "http_error_body",
    "prompt_too_long_body",
    "malformed_frame",
    "in_band_error_frame",
    "marks",
    "check_request",
    "match_view",
    "read_body",
    "read_json",
    "stream_reader",
]

NAME = "openai_chat"
PATH = "/v1/chat/completions"  # the endpoint, under a session's base URL
DONE = "[DONE]"  # the end-of-stream marker, a data line of its own (its event's name here)
CHUNK = "chat.completion.chunk"  # the name of every other event: a chunk's ``object``


def _chunk(
    cid: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    with_choice: bool = True,
) -> tuple[str, dict[str, Any]]:
    obj: dict[str, Any] = {
        "id": cid,
        "object": CHUNK,
        "created": created,
        "model": model,
        "choices": [],
    }
    if with_choice:
        obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = usage
    return CHUNK, obj


def stream_events(
    reply: dict[str, Any],
    model: str,
    *,
    terminal: bool = True,
    empty: str | None = None,
    cid: str = "chatcmpl-fake",
    created: int = 0,
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, payload)`` pairs of a streamed reply: role chunk, deltas, finish chunk,
    ``[DONE]`` (omitted when ``terminal`` is false).

    With ``finish_reason`` None the finish chunk is omitted (usage, if any, is sent with
    ``finish_reason: null``). ``empty``: ``no_choices`` is one chunk with no choice at all,
    ``empty_message`` renders the (empty) reply as it is.
    """
    if empty == "no_choices":
        ev = [_chunk(cid, model, created, None, with_choice=False)]
    else:
        ev = _content_events(reply, model, cid, created)
    if terminal:
        ev.append((DONE, {}))
    return ev


def _content_events(
    reply: dict[str, Any], model: str, cid: str, created: int
) -> list[tuple[str, dict[str, Any]]]:
    n = int(reply.get("chunk_chars") or 16)

    def delta(d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return _chunk(cid, model, created, d)

    out = [delta({"role": "assistant", "content": ""})]
    out += [delta({"reasoning_content": p}) for p in pieces(reply.get("reasoning") or "", n)]
    out += [delta({"content": p}) for p in pieces(reply.get("text") or "", n)]
    for i, call in enumerate(reply.get("tool_calls") or []):
        first = {
            "index": i,
            "id": call.get("id") or f"call_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        out.append(delta({"tool_calls": [first]}))
        for piece in pieces(call.get("arguments") or "", n):
            out.append(delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    finish = reply.get("finish_reason", "stop")
    usage = reply.get("usage")
    if finish is not None:
        out.append(_chunk(cid, model, created, {}, finish, usage))
    elif usage is not None:
        out.append(_chunk(cid, model, created, None, None, usage, with_choice=False))
    return out


def frame(event: str, payload: dict[str, Any]) -> bytes:
    """One SSE event as chat completions sends it: ``data:`` alone, no event name."""
    return data_frame(DONE if event == DONE else dumps(payload))


def json_body(
    reply: dict[str, Any],
    model: str,
    *,
    empty: str | None = None,
    cid: str = "chatcmpl-fake",
    created: int = 0,
) -> dict[str, Any]:
    """The non-streaming chat.completion body of a reply (``empty``: ``no_choices`` has no
    choice at all)."""
    if empty == "no_choices":
        return {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [],
        }
    msg: dict[str, Any] = {"role": "assistant", "content": reply.get("text") or ""}
    if reply.get("reasoning"):
        msg["reasoning_content"] = reply["reasoning"]
    if reply.get("tool_calls"):
        msg["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c.get("arguments", "")},
            }
            for i, c in enumerate(reply["tool_calls"])
        ]
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": msg, "finish_reason": reply.get("finish_reason", "stop")}
        ],
    }
    if reply.get("usage") is not None:
        body["usage"] = reply["usage"]
    return body


def error_body(message: str, type_: str = "server_error", code: Any = None) -> dict[str, Any]:
    """An OpenAI-shaped error body."""
    return {"error": {"message": message, "type": type_, "code": code}}


def http_error_body(status: int) -> dict[str, Any]:
    """The default body of a scripted ``http_error``."""
    kind = "rate_limit_error" if status == 429 else "server_error"
    return error_body(f"simulated error {status}", kind, str(status))


def prompt_too_long_body() -> dict[str, Any]:
    """A context window overflow as chat completions words it (a 400)."""
    return error_body(
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 131072 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
    )


def malformed_frame(kind: str) -> bytes:
    """``bad_json``: a data line that is not JSON; ``missing_data``: no ``data:`` field."""
    if kind == "bad_json":
        return b'data: {"choices": [{"delta": \n\n'
    return b'{"choices": []}\n\n'


def in_band_error_frame(
    error: dict[str, Any] | None, seq: int = 0, model: str = "fake-model"
) -> bytes:
    """An ``{"error": ...}`` chunk inside the stream; ``error`` is the scripted object."""
    err = error or {"message": "simulated in-band error", "type": "server_error"}
    del seq, model  # a chat error chunk carries neither
    return data_frame(json.dumps({"error": err}))


def marks(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, ...] | None]:
    """The content milestone each streamed event delivers (see ``fakes.plan``'s positions):
    the neutral scale every dialect's ``marks`` is in.

    ``(0,)`` the start (role chunk), ``(1, k)`` reasoning piece k, ``(2, k)`` text piece k,
    ``(3, i, 0)`` tool call i opened, ``(3, i, 1, k)`` its argument piece k, ``(4,)`` the finish
    (or usage-only) chunk, ``(5,)`` ``[DONE]``. Tuples order as the reply unfolds.
    """
    out: list[tuple[int, ...] | None] = []
    seen: dict[tuple[int, ...], int] = {}

    def nth(key: tuple[int, ...]) -> int:
        seen[key] = seen.get(key, -1) + 1
        return seen[key]

    for event, payload in events:
        if event == DONE:
            out.append((5,))
            continue
        choices = payload.get("choices") or [{}]
        delta = choices[0].get("delta")
        if choices[0].get("finish_reason") is not None or delta is None:
            out.append((4,))
        elif "role" in delta:
            out.append((0,))
        elif "reasoning_content" in delta:
            out.append((1, nth((1,))))
        elif "content" in delta:
            out.append((2, nth((2,))))
        else:
            tc = delta["tool_calls"][0]
            i = int(tc["index"])
            out.append((3, i, 0) if "id" in tc else (3, i, 1, nth((3, i))))
    return out


def check_request(body: Any) -> str | None:
    """What is wrong with a chat-completions request body, or None."""
    return check_body(body, "messages", (list,), "an array")


def match_view(body: dict[str, Any]) -> dict[str, Any]:
    """A chat request is already the view script steps match on."""
    return body


# -- read-back: the chat view of chat is chat itself ----------------------------------------


def read_body(body: dict[str, Any]) -> dict[str, Any]:
    """A chat request body is already in the chat view."""
    return body


class _Passthrough:
    """Chat events are chat frames: a typed payload that reaches a reader is sent on as is."""

    def __init__(self, out: ChatOut) -> None:
        self.out = out

    def event(self, kind: str, payload: dict[str, Any]) -> None:
        del kind  # chat payloads carry no event name of their own
        self.out.data(json.dumps(payload, ensure_ascii=False))


def stream_reader(out: ChatOut) -> _Passthrough:
    """A reader that keeps chat payloads as they are."""
    return _Passthrough(out)


def read_json(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A chat completion is already in the chat view: kept as sent."""
    del obj
    return None
