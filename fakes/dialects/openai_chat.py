"""OpenAI chat-completions rendering of a scripted reply (pure, no I/O).

Chat completions is the canonical view every other dialect is read back into, so its read-back
is the identity; its stream is rendered by ``fakes.plan`` from ``stream_payloads``.
"""

from __future__ import annotations

import json
from typing import Any

from fakes.dialects._protocol import ChatOut

__all__ = [
    "NAME",
    "PATH",
    "DONE",
    "stream_payloads",
    "frame",
    "json_body",
    "error_body",
    "http_error_body",
    "prompt_too_long_body",
    "malformed_frame",
    "in_band_error_frame",
    "marks",
    "read_body",
    "read_json",
    "stream_reader",
]

NAME = "openai_chat"
PATH = "/v1/chat/completions"  # the endpoint, under a session's base URL
DONE = "[DONE]"


def _pieces(s: str, n: int) -> list[str]:
    return [s[i : i + n] for i in range(0, len(s), n)] or []


def _chunk(
    cid: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    with_choice: bool = True,
) -> str:
    obj: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
    }
    if with_choice:
        obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = usage
    return _line_safe(json.dumps(obj, ensure_ascii=False))


# Characters some SSE line splitters (str.splitlines) treat as line ends; JSON allows escaping.
_LINE_SEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _line_safe(s: str) -> str:
    for ch, esc in _LINE_SEPS.items():
        s = s.replace(ch, esc)
    return s


def stream_payloads(
    reply: dict[str, Any],
    model: str,
    cid: str = "chatcmpl-fake",
    created: int = 0,
    done: bool = True,
) -> list[str]:
    """The ``data:`` payloads of a streamed reply: role chunk, deltas, finish chunk, [DONE].

    With ``finish_reason`` None the finish chunk is omitted (usage, if any, is sent with
    ``finish_reason: null``).
    """
    n = int(reply.get("chunk_chars") or 16)
    # Delta chunks share one template: only the small delta is serialised per event (speed).
    head = (
        f'{{"id": {json.dumps(cid)}, "object": "chat.completion.chunk", "created": {created}, '
        f'"model": {json.dumps(model, ensure_ascii=False)}, "choices": [{{"index": 0, "delta": '
    )
    tail = ', "finish_reason": null}]}'

    def delta(d: dict[str, Any]) -> str:
        return _line_safe(head + json.dumps(d, ensure_ascii=False) + tail)

    out = [delta({"role": "assistant", "content": ""})]
    for piece in _pieces(reply.get("reasoning") or "", n):
        out.append(delta({"reasoning_content": piece}))
    for piece in _pieces(reply.get("text") or "", n):
        out.append(delta({"content": piece}))
    for i, call in enumerate(reply.get("tool_calls") or []):
        first = {
            "index": i,
            "id": call.get("id") or f"call_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        out.append(delta({"tool_calls": [first]}))
        for piece in _pieces(call.get("arguments") or "", n):
            out.append(delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    finish = reply.get("finish_reason", "stop")
    usage = reply.get("usage")
    if finish is not None:
        out.append(_chunk(cid, model, created, {}, finish, usage))
    elif usage is not None:
        out.append(_chunk(cid, model, created, None, None, usage, with_choice=False))
    if done:
        out.append(DONE)
    return out


def frame(payload: str) -> bytes:
    """One SSE event; multi-line payloads get one ``data:`` line each."""
    return ("".join(f"data: {line}\n" for line in payload.split("\n")) + "\n").encode()


def json_body(
    reply: dict[str, Any], model: str, cid: str = "chatcmpl-fake", created: int = 0
) -> dict[str, Any]:
    """The non-streaming chat.completion body of a reply."""
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
    return frame(json.dumps({"error": err}))


def marks(payloads: list[str]) -> list[tuple[int, ...]]:
    """The content milestone each streamed payload delivers (see ``fakes.plan``'s positions).

    ``(0,)`` the start (role chunk), ``(1, k)`` reasoning piece k, ``(2, k)`` text piece k,
    ``(3, i, 0)`` tool call i opened, ``(3, i, 1, k)`` its argument piece k, ``(4,)`` the finish
    (or usage-only) chunk, ``(5,)`` ``[DONE]``. Tuples order as the reply unfolds.
    """
    out: list[tuple[int, ...]] = []
    seen: dict[tuple[int, ...], int] = {}

    def nth(key: tuple[int, ...]) -> int:
        seen[key] = seen.get(key, -1) + 1
        return seen[key]

    for payload in payloads:
        if payload == DONE:
            out.append((5,))
            continue
        choices = json.loads(payload).get("choices") or [{}]
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
