"""OpenAI Responses API rendering of a scripted reply (pure, no I/O).

Theory of operation: a neutral reply becomes output items (``reasoning`` with a summary,
``message`` with ``output_text``, ``function_call`` per tool call), streamed as
``response.created``, ``response.in_progress``, per item ``response.output_item.added`` ... its
deltas ... ``response.output_item.done``, and one terminal event: ``response.completed``
(``stop`` / ``tool_calls``) or ``response.incomplete`` (``length`` -> ``max_output_tokens``,
``content_filter``). The terminal event is both the finish marker and the end of the stream, so
it is omitted when the finish reason is None or ``terminal`` is false. Every payload carries
``type`` and a ``sequence_number`` counting from 0, and the SSE frame an ``event:`` line.
"""

from __future__ import annotations

from typing import Any

from fakes.dialects._openai_responses_read import read_body, read_json, stream_reader
from fakes.dialects._sse import check_body, event_frame, pieces

__all__ = [
    "NAME",
    "PATH",
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
    "marks",
    "read_body",
    "read_json",
    "stream_reader",
]

NAME = "openai_responses"
PATH = "/v1/responses"  # the endpoint, under a session's base URL

# Neutral finish reason -> (response status, incomplete_details.reason).
_STATUS: dict[str, tuple[str, str | None]] = {
    "stop": ("completed", None),
    "tool_calls": ("completed", None),
    "length": ("incomplete", "max_output_tokens"),
    "content_filter": ("incomplete", "content_filter"),
}


def frame(event: str, payload: dict[str, Any]) -> bytes:
    """One SSE event: an ``event:`` line naming the type, then one ``data:`` line."""
    return event_frame(event, payload)


def _usage(reply: dict[str, Any]) -> dict[str, Any]:
    u = reply.get("usage") or {}
    inp = int(u.get("input_tokens", u.get("prompt_tokens", 0)))
    out = int(u.get("output_tokens", u.get("completion_tokens", 0)))
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + out,
    }


def _response(
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
    rid: str = "resp_fake",
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": error,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "usage": usage,
    }


def _items(reply: dict[str, Any], empty: str | None) -> list[dict[str, Any]]:
    """Final output items (``done`` state); the last is ``incomplete`` on an output limit."""
    items: list[dict[str, Any]] = []
    if empty is None:
        if reply.get("reasoning"):
            items.append(
                {
                    "id": "rs_0",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": reply["reasoning"]}],
                }
            )
        if reply.get("text"):
            items.append(_message(reply["text"]))
        for i, c in enumerate(reply.get("tool_calls") or []):
            items.append(
                {
                    "id": f"fc_{i}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": c.get("id") or f"call_{i}",
                    "name": c["name"],
                    "arguments": c.get("arguments") or "",
                    # A tool offered inside a namespace tool is called with its namespace.
                    **({"namespace": c["namespace"]} if c.get("namespace") else {}),
                }
            )
    elif empty == "empty_message":
        items.append(_message(""))
    if reply.get("finish_reason", "stop") == "length" and items and "status" in items[-1]:
        items[-1]["status"] = "incomplete"
    return items


def _message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_0",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def stream_events(
    reply: dict[str, Any],
    model: str,
    *,
    terminal: bool = True,
    empty: str | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, payload)`` pairs of a streamed reply, sequence numbers included.

    ``empty``: ``no_choices`` renders no output item, ``empty_message`` one empty message.
    """
    n = int(reply.get("chunk_chars") or 16)
    ev: list[tuple[str, dict[str, Any]]] = []

    def emit(type_: str, **fields: Any) -> None:
        ev.append((type_, {"type": type_, "sequence_number": len(ev), **fields}))

    emit("response.created", response=_response(model, "in_progress", []))
    emit("response.in_progress", response=_response(model, "in_progress", []))
    items = _items(reply, empty)
    for oi, item in enumerate(items):
        iid = item["id"]
        at = {"item_id": iid, "output_index": oi}
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            emit("response.output_item.added", output_index=oi, item=dict(item, summary=[]))
            part: dict[str, Any] = {"type": "summary_text", "text": ""}
            emit("response.reasoning_summary_part.added", **at, summary_index=0, part=part)
            for p in pieces(text, n):
                emit("response.reasoning_summary_text.delta", **at, summary_index=0, delta=p)
            emit("response.reasoning_summary_text.done", **at, summary_index=0, text=text)
            emit(
                "response.reasoning_summary_part.done",
                **at,
                summary_index=0,
                part={"type": "summary_text", "text": text},
            )
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                output_index=oi,
                item=dict(item, status="in_progress", content=[]),
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            emit("response.content_part.added", **at, content_index=0, part=part)
            for p in pieces(text, n):
                emit("response.output_text.delta", **at, content_index=0, delta=p, logprobs=[])
            emit("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
            emit(
                "response.content_part.done",
                **at,
                content_index=0,
                part=dict(part, text=text),
            )
        else:
            args = item["arguments"]
            emit(
                "response.output_item.added",
                output_index=oi,
                item=dict(item, status="in_progress", arguments=""),
            )
            for p in pieces(args, n):
                emit("response.function_call_arguments.delta", **at, delta=p)
            emit("response.function_call_arguments.done", **at, name=item["name"], arguments=args)
        emit("response.output_item.done", output_index=oi, item=item)
    finish = reply.get("finish_reason", "stop")
    if terminal and finish is not None:
        status, reason = _STATUS[finish]
        emit(
            f"response.{status}",
            response=_response(model, status, items, _usage(reply), reason),
        )
    return ev


def json_body(reply: dict[str, Any], model: str, *, empty: str | None = None) -> dict[str, Any]:
    """The non-streaming ``response`` object (``in_progress`` when the finish reason is None)."""
    finish = reply.get("finish_reason", "stop")
    status, reason = _STATUS[finish] if finish is not None else ("in_progress", None)
    return _response(model, status, _items(reply, empty), _usage(reply), reason)


def error_body(message: str, type_: str = "server_error", code: Any = None) -> dict[str, Any]:
    """An OpenAI-shaped error body."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def http_error_body(status: int) -> dict[str, Any]:
    """The default body of a scripted ``http_error``."""
    return error_body(
        f"simulated error {status}",
        "rate_limit_error" if status == 429 else "server_error",
        str(status),
    )


def prompt_too_long_body() -> dict[str, Any]:
    """A context window overflow as the Responses API words it (a 400)."""
    return error_body(
        "Your input exceeds the context window of this model. Please adjust your input and "
        "try again.",
        "invalid_request_error",
        "context_length_exceeded",
    )


def in_band_error_frame(
    error: dict[str, Any] | None, seq: int = 0, model: str = "fake-model"
) -> bytes:
    """A ``response.failed`` event; ``error`` is the scripted object ({message, type|code})."""
    err = error or {}
    inner = {
        "code": err.get("code") or err.get("type") or "server_error",
        "message": err.get("message") or "simulated in-band error",
    }
    resp = _response(model, "failed", [], error=inner)
    return frame(
        "response.failed", {"type": "response.failed", "sequence_number": seq, "response": resp}
    )


def malformed_frame(kind: str) -> bytes:
    """``bad_json``: a delta event whose data is not JSON; ``missing_data``: no ``data:`` field."""
    if kind == "bad_json":
        return (
            b"event: response.output_text.delta\n"
            b'data: {"type": "response.output_text.delta", "delta": \n\n'
        )
    return b'{"type": "response.output_text.delta"}\n\n'


def check_request(body: Any) -> str | None:
    """What is wrong with a Responses request body, or None."""
    return check_body(body, "input", (str, list), "a string or an array")


def match_view(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat-shaped view for step matching: instructions, then input items."""
    msgs: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        msgs.append({"role": "system", "content": body["instructions"]})
    inp = body.get("input")
    if isinstance(inp, str):
        msgs.append({"role": "user", "content": inp})
    for item in inp if isinstance(inp, list) else []:
        if not isinstance(item, dict):
            continue
        if "content" in item:
            msgs.append({"role": item.get("role", "user"), "content": item["content"]})
        elif isinstance(item.get("output"), str):
            msgs.append({"role": "tool", "content": item["output"]})
    return {**body, "messages": msgs}


def marks(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, ...] | None]:
    """The content milestone each event delivers, in ``openai_chat.marks``' terms; None for
    events that deliver none. The terminal event counts as the finish: it is also the end of
    the stream, which has no separate marker here."""
    out: list[tuple[int, ...] | None] = []
    seen: dict[tuple[int, ...], int] = {}
    tool = -1

    def nth(key: tuple[int, ...]) -> int:
        seen[key] = seen.get(key, -1) + 1
        return seen[key]

    for name, payload in events:
        mark: tuple[int, ...] | None = None
        if name == "response.created":
            mark = (0,)
        elif name == "response.reasoning_summary_text.delta":
            mark = (1, nth((1,)))
        elif name == "response.output_text.delta":
            mark = (2, nth((2,)))
        elif name == "response.output_item.added" and payload["item"]["type"] == "function_call":
            tool += 1
            mark = (3, tool, 0)
        elif name == "response.function_call_arguments.delta":
            mark = (3, tool, 1, nth((3, tool)))
        elif name in ("response.completed", "response.incomplete"):
            mark = (4,)
        out.append(mark)
    return out
