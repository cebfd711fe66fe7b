"""Decide what to send for one chat request: a pure function of the step and the request.

Theory of operation: ``make_plan`` renders the reply fully (``full``), then applies the step's
fault to get the list of byte chunks actually written (each with an unscaled delay before it)
and how the response ends. The server only carries out a plan, scaling the delays.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from typing import Any

from fakes.dialects import REGISTRY
from fakes.dialects import openai_chat as oc
from fakes.scenario import API_KEY_PLACEHOLDER, OTHERWISE_INDEX, STREAM_ONLY, Step

__all__ = ["Chunk", "Plan", "make_plan", "harness_error_plan", "DIALECTS"]

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
JSON_HEADERS = {"Content-Type": "application/json"}

# Wire dialects by the name the journal records; chat completions is rendered by ``make_plan``
# itself, the others by ``_dialect_plan`` through the modules' common rendering interface.
DIALECTS: dict[str, Any] = dict(REGISTRY)


@dataclass
class Chunk:
    """Bytes to write after waiting ``delay`` unscaled seconds; ``event`` counts data events."""

    data: bytes
    delay: float = 0.0
    event: bool = True


@dataclass
class Plan:
    """Everything the server needs to answer one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    chunks: list[Chunk] = field(default_factory=list)
    ending: str = "complete"  # complete | reset | close
    fault: str | None = None
    full_bytes: int = 0
    cut_at_byte: int | None = None
    header_delay: float = 0.0
    reset_before_headers: bool = False
    retry_after_date: float | None = None
    harness_error: str | None = None
    secrets: tuple[str, ...] = ()  # echoed in the body; the journal keeps [REDACTED] instead


def harness_error_plan(message: str, dialect: str = "openai_chat") -> Plan:
    """A 500 reply for a request the script cannot serve, shaped as ``dialect``'s error."""
    body = json.dumps(DIALECTS[dialect].error_body(message, "harness_error")).encode()
    return Plan(
        status=500,
        headers=dict(JSON_HEADERS),
        chunks=[Chunk(body, event=False)],
        full_bytes=len(body),
        harness_error=message,
    )


def _http_error(
    plan: Plan, p: dict[str, Any], default_body: Any, api_key: str | None = None
) -> Plan:
    """An error status with the scenario's body (or the dialect's default) and headers."""
    plan.status, plan.stream = int(p["status"]), False
    body = p.get("body")
    if body is None:
        body = default_body
    if p.get("echo_api_key"):
        body = _echo_key(body, p, api_key or "")
        plan.secrets = (api_key,) if api_key else ()
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    plan.headers = {
        **({} if isinstance(body, str) else JSON_HEADERS),
        **{k: str(v) for k, v in (p.get("headers") or {}).items()},
    }
    plan.chunks, plan.full_bytes = [Chunk(raw, event=False)], len(raw)
    plan.retry_after_date = p.get("retry_after_date")
    return plan


def mask_key(key: str) -> str:
    """A key as OpenAI echoes it: its first 7 and last 4 characters (less of a short key)."""
    head, tail = min(7, len(key) // 4), min(4, len(key) // 4)
    return key[:head] + "..." + (key[-tail:] if tail else "")


def _echo_key(body: Any, p: dict[str, Any], key: str) -> Any:
    """``body`` with the request's key in it: every ``{api_key}`` of a scripted body, or the
    default body's message (the three dialects keep it at ``error.message``)."""
    shown = (key if p["echo_api_key"] == "full" else mask_key(key)) if key else "(none)"
    if p.get("body") is not None:
        return _substitute(body, shown)
    body = json.loads(json.dumps(body))
    err = body["error"]
    if int(p["status"]) == 401:
        err["message"] = f"Incorrect API key provided: {shown}."
    else:
        err["message"] = f"{err['message']} (API key {shown})"
    return body


def _substitute(value: Any, shown: str) -> Any:
    if isinstance(value, str):
        return value.replace(API_KEY_PLACEHOLDER, shown)
    if isinstance(value, dict):
        return {k: _substitute(v, shown) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, shown) for v in value]
    return value


def _reset(plan: Plan) -> Plan:
    plan.reset_before_headers, plan.ending = True, "reset"
    return plan


def _json_reply(plan: Plan, body: str, name: str | None, p: dict[str, Any]) -> Plan:
    """A non-streaming body: whole, delayed by a stall, or cut at a byte."""
    raw = body.encode()
    plan.headers, plan.full_bytes = dict(JSON_HEADERS), len(raw)
    delay = float(p["seconds"]) if name == "stall" else 0.0
    if name == "cut":
        at = int(p.get("at_byte", 0))
        plan.chunks = [Chunk(raw[:at], delay, event=False)]
        plan.cut_at_byte, plan.ending = min(at, len(raw)), p.get("mode", "reset")
    else:
        plan.chunks = [Chunk(raw, delay, event=False)]
    return plan


def _truncate(reply: dict[str, Any], part: str, at: int) -> dict[str, Any]:
    r = dict(reply, finish_reason="length")
    if part == "arguments":
        calls = [dict(c) for c in (r.get("tool_calls") or [])[:1]]
        if calls:
            calls[0]["arguments"] = (calls[0].get("arguments") or "")[:at]
        r["tool_calls"] = calls
    else:
        r[part] = (r.get(part) or "")[:at]
    return r


def make_plan(
    step: Step, request: dict[str, Any], dialect: str = "openai_chat", api_key: str | None = None
) -> Plan:
    """The plan for ``request`` (parsed JSON body) served by ``step`` in ``dialect``;
    ``api_key`` is the key the request carried (only an ``echo_api_key`` error shows it)."""
    if step.replay is not None:
        return _replay_plan(step, request, dialect, api_key)
    if dialect != "openai_chat":
        return _dialect_plan(step, request, DIALECTS[dialect], api_key)
    stream = bool(request.get("stream"))
    model = str(request.get("model") or "fake-model")
    name, p = step.fault_name, step.fault_params
    if name in STREAM_ONLY and not stream:
        name = None
    reply = dict(step.reply or {})
    plan = Plan(stream=stream, fault=name)

    if name == "http_error":
        status = int(p["status"])
        kind = "rate_limit_error" if status == 429 else "server_error"
        default = oc.error_body(f"simulated error {status}", kind, str(status))
        return _http_error(plan, p, default, api_key)
    if name == "reset_before_headers":
        return _reset(plan)
    if name == "length":
        reply = _truncate(reply, p["part"], int(p["at"]))
    if name == "empty_reply":
        kind = p.get("kind", "no_choices")
        reply = {"text": "", "finish_reason": "stop"}
        if kind == "no_choices":
            return _no_choices(plan, model)
    if name == "end_without_finish":
        reply["finish_reason"] = None
    if name == "delay_headers":
        plan.header_delay = float(p["seconds"])

    if not stream:
        return _json_reply(
            plan, json.dumps(oc.json_body(reply, model), ensure_ascii=False), name, p
        )

    done = name not in ("finish_without_done",) and (
        name != "end_without_finish" or bool(p.get("done", False))
    )
    frames = _frames(json.dumps(reply, sort_keys=True), model, done)
    plan.headers = dict(SSE_HEADERS)
    plan.full_bytes = sum(len(f) for f in frames)
    chunks = [Chunk(f) for f in frames]
    n = int(p.get("after_events", 0))
    if name == "cut":
        plan.ending = p.get("mode", "reset")
        chunks = _cut(chunks, p, plan, n)
    elif name == "stall":
        chunks = _stall(chunks, n, float(p["seconds"]), p.get("keepalive"))
    elif name == "malformed_event":
        bad = (
            b'data: {"choices": [{"delta": \n\n'
            if p.get("kind", "bad_json") == "bad_json"
            else b'{"choices": []}\n\n'
        )
        chunks = chunks[:n] + [Chunk(bad, event=False)] + chunks[n:]
    elif name == "in_band_error":
        err = p.get("error") or {"message": "simulated in-band error", "type": "server_error"}
        chunks = chunks[:n] + [Chunk(oc.frame(json.dumps({"error": err})))]
    elif name == "slow_dribble":
        chunks = [Chunk(c.data, float(p["interval"]) if i else 0.0) for i, c in enumerate(chunks)]
    plan.chunks = chunks
    return plan


@functools.lru_cache(maxsize=256)
def _frames(reply_json: str, model: str, done: bool) -> tuple[bytes, ...]:
    """Rendered SSE frames, cached: scripts replay the same reply many times."""
    reply = json.loads(reply_json)
    return tuple(oc.frame(x) for x in oc.stream_payloads(reply, model, done=done))


def _no_choices(plan: Plan, model: str) -> Plan:
    obj = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [],
    }
    if plan.stream:
        obj["object"] = "chat.completion.chunk"
        frames = [oc.frame(json.dumps(obj)), oc.frame(oc.DONE)]
        plan.headers = dict(SSE_HEADERS)
        plan.chunks = [Chunk(f) for f in frames]
    else:
        plan.headers = dict(JSON_HEADERS)
        plan.chunks = [Chunk(json.dumps(obj).encode(), event=False)]
    plan.full_bytes = sum(len(c.data) for c in plan.chunks)
    return plan


# -- other dialects (Anthropic Messages, OpenAI Responses) ------------------------------------
# The same primitives as above over that dialect's events: the finish marker is the dialect's
# (``message_delta`` / the terminal ``response.*`` event), ``done`` its end-of-stream marker
# (``message_stop``; Responses has none apart from the terminal event), see docs/gateway.md.


def _dialect_plan(step: Step, request: dict[str, Any], d: Any, api_key: str | None) -> Plan:
    stream = bool(request.get("stream"))
    model = str(request.get("model") or "fake-model")
    name, p = step.fault_name, step.fault_params
    if name in STREAM_ONLY and not stream:
        name = None
    reply = dict(step.reply or {})
    plan = Plan(stream=stream, fault=name)
    if name == "http_error":
        return _http_error(plan, p, d.http_error_body(int(p["status"])), api_key)
    if name == "reset_before_headers":
        return _reset(plan)
    empty, terminal = None, True
    if name == "length":
        reply = _truncate(reply, p["part"], int(p["at"]))
    elif name == "empty_reply":
        empty, reply = p.get("kind", "no_choices"), {"text": "", "finish_reason": "stop"}
    elif name == "end_without_finish":
        reply["finish_reason"], terminal = None, bool(p.get("done", False))
    elif name == "finish_without_done":
        terminal = False
    elif name == "delay_headers":
        plan.header_delay = float(p["seconds"])

    if not stream:
        body = json.dumps(d.json_body(reply, model, empty=empty), ensure_ascii=False)
        return _json_reply(plan, body, name, p)

    reply_json = json.dumps(reply, sort_keys=True)
    frames, marks = _dialect_frames(d.NAME, reply_json, model, terminal, empty)
    plan.headers = dict(SSE_HEADERS)
    plan.full_bytes = sum(len(f) for f in frames)
    chunks = [Chunk(f) for f in frames]
    n = int(p.get("after_events", 0))
    if n:
        n = _neutral_position(n, _chat_marks(reply_json), marks)
    if name == "cut":
        plan.ending = p.get("mode", "reset")
        chunks = _cut(chunks, p, plan, n)
    elif name == "stall":
        chunks = _stall(chunks, n, float(p["seconds"]), p.get("keepalive"))
    elif name == "malformed_event":
        bad = Chunk(d.malformed_frame(p.get("kind", "bad_json")), event=False)
        chunks = chunks[:n] + [bad] + chunks[n:]
    elif name == "in_band_error":
        chunks = chunks[:n] + [Chunk(d.in_band_error_frame(p.get("error"), n, model))]
    elif name == "slow_dribble":
        chunks = [Chunk(c.data, float(p["interval"]) if i else 0.0) for i, c in enumerate(chunks)]
    plan.chunks = chunks
    return plan


def _cut(chunks: list[Chunk], p: dict[str, Any], plan: Plan, n: int) -> list[Chunk]:
    """The chunks before a cut at ``at_byte`` (raw bytes of this rendering; a partial last
    event) or after ``n`` events."""
    if "at_byte" not in p:
        out = chunks[:n]
        plan.cut_at_byte = sum(len(c.data) for c in out)
        return out
    at = int(p["at_byte"])
    plan.cut_at_byte = min(at, plan.full_bytes)
    out, pos = [], 0
    for c in chunks:
        if pos >= at:
            break
        take = c.data[: at - pos]
        out.append(Chunk(take, event=len(take) == len(c.data)))
        pos += len(c.data)
    return out


def _stall(chunks: list[Chunk], n: int, secs: float, keepalive: Any) -> list[Chunk]:
    """A pause of ``secs`` after ``n`` events, filled with ``: keep-alive`` comments if asked."""
    extra: list[Chunk] = []
    waited = 0.0
    if keepalive:
        while waited + float(keepalive) < secs:
            extra.append(Chunk(b": keep-alive\n\n", float(keepalive), event=False))
            waited += float(keepalive)
    rest = chunks[n:]
    if rest:
        rest[0] = Chunk(rest[0].data, secs - waited)
    else:
        extra.append(Chunk(b"", secs - waited, event=False))
    return chunks[:n] + extra + rest


@functools.lru_cache(maxsize=256)
def _dialect_frames(
    dialect: str, reply_json: str, model: str, terminal: bool, empty: str | None
) -> tuple[tuple[bytes, ...], tuple[tuple[int, ...] | None, ...]]:
    """The frames of a streamed reply and the content milestone of each (``marks``)."""
    d = DIALECTS[dialect]
    events = d.stream_events(json.loads(reply_json), model, terminal=terminal, empty=empty)
    return tuple(d.frame(name, payload) for name, payload in events), tuple(d.marks(events))


@functools.lru_cache(maxsize=256)
def _chat_marks(reply_json: str) -> tuple[tuple[int, ...], ...]:
    """The milestones of the chat rendering of a reply, the scale ``after_events`` counts on."""
    return tuple(oc.marks(oc.stream_payloads(json.loads(reply_json), "m")))


def _neutral_position(
    n: int, chat: tuple[tuple[int, ...], ...], marks: tuple[tuple[int, ...] | None, ...]
) -> int:
    """How many of a dialect's events to send for a fault placed ``after_events: n``.

    Scenarios are dialect-neutral, so ``n`` counts events of the chat rendering (role chunk
    first); in another dialect the fault strikes right after the event that completes the same
    content as those ``n`` chat events (same pieces of reasoning, text and arguments, nothing
    more), e.g. before ``ping`` and ``content_block_start`` when only the start was sent.
    """
    if n <= 0:
        return 0
    if n >= len(chat):
        return len(marks)
    reached = chat[n - 1]
    return max((j + 1 for j, m in enumerate(marks) if m is not None and m <= reached), default=0)


# -- replay: recorded bytes (a probe's recording) -------------------------------------------


def _replay_plan(
    step: Step, request: dict[str, Any], dialect: str = "openai_chat", api_key: str | None = None
) -> Plan:
    """Carry out a ``replay`` step: the recorded status, headers and chunks, byte for byte.

    Faults that act on bytes still apply (``http_error`` and ``reset_before_headers`` replace
    the response, rendered in the request's dialect; ``delay_headers``, ``cut``, ``stall``,
    ``slow_dribble``, ``malformed_event`` and ``in_band_error`` act on the chunks);
    ``after_events`` counts chunks carrying a ``data:`` line, since a recording's write
    boundaries need not match events. A recording is in one dialect (``replay.dialect``,
    default ``openai_chat``): a request of another is a harness error, never foreign bytes.
    """
    name, p = step.fault_name, step.fault_params
    if name in ("http_error", "reset_before_headers"):
        return make_plan(
            dataclasses.replace(step, replay=None, reply=None), request, dialect, api_key
        )
    rp = step.replay or {}
    recorded = str(rp.get("dialect") or "openai_chat")
    if recorded != dialect:
        who = "the otherwise step" if step.index == OTHERWISE_INDEX else f"script step {step.index}"
        return harness_error_plan(
            f"{who} replays a recording in dialect {recorded!r} "
            f"and cannot answer a {dialect!r} request",
            dialect,
        )
    stream = bool(request.get("stream"))
    if name in STREAM_ONLY and not stream:
        name = None
    plan = Plan(
        status=int(rp.get("status", 200)),
        headers={k: str(v) for k, v in (rp.get("headers") or {}).items()},
        stream=stream,
        fault=name,
        ending=rp.get("end", "complete"),
    )
    chunks = [Chunk(c.encode("utf-8"), event="data:" in c) for c in rp.get("chunks") or []]
    plan.full_bytes = sum(len(c.data) for c in chunks)
    n = int(p.get("after_events", 0))
    at = next((i + 1 for i, k in enumerate(_event_counts(chunks)) if k >= n), 0) if n else 0
    if name == "delay_headers":
        plan.header_delay = float(p["seconds"])
    elif name == "cut":
        plan.ending = p.get("mode", "reset")
        if "at_byte" in p:
            out, pos, cut = [], 0, int(p["at_byte"])
            for c in chunks:
                if pos >= cut:
                    break
                out.append(Chunk(c.data[: cut - pos], event=c.event and pos + len(c.data) <= cut))
                pos += len(c.data)
            chunks = out
        else:
            chunks = chunks[:at]
        plan.cut_at_byte = sum(len(c.data) for c in chunks)
    elif name == "stall":
        rest = chunks[at:] or [Chunk(b"", event=False)]
        chunks = chunks[:at] + [Chunk(rest[0].data, float(p["seconds"]), rest[0].event)] + rest[1:]
    elif name == "slow_dribble":
        chunks = [
            Chunk(c.data, float(p["interval"]) if i else 0.0, c.event) for i, c in enumerate(chunks)
        ]
    elif name == "malformed_event" and dialect != "openai_chat":
        bad = DIALECTS[dialect].malformed_frame(p.get("kind", "bad_json"))
        chunks = chunks[:at] + [Chunk(bad, event=False)] + chunks[at:]
    elif name == "malformed_event":
        bad = (
            b'data: {"choices": [{"delta": \n\n'
            if p.get("kind", "bad_json") == "bad_json"
            else b'{"choices": []}\n\n'
        )
        chunks = chunks[:at] + [Chunk(bad, event=False)] + chunks[at:]
    elif name == "in_band_error" and dialect != "openai_chat":
        frame = DIALECTS[dialect].in_band_error_frame(p.get("error"), at, "fake-model")
        chunks = chunks[:at] + [Chunk(frame)]
    elif name == "in_band_error":
        err = p.get("error") or {"message": "simulated in-band error", "type": "server_error"}
        chunks = chunks[:at] + [Chunk(oc.frame(json.dumps({"error": err})))]
    plan.chunks = chunks
    return plan


def _event_counts(chunks: list[Chunk]) -> list[int]:
    """Running count of event-carrying chunks."""
    out, k = [], 0
    for c in chunks:
        k += c.event
        out.append(k)
    return out
