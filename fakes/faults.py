"""The fault primitives: one class each, the single home of everything a fault is, and their
registry ``FAULTS``.

Each is a ``Fault`` (``fakes.fault_base``: the stages a fault acts at, what it declares for the
loader, the checks and the fuzzer). The primitives that change only how a reply is delivered,
never its bytes (``rechunk``, ``pace``), are in ``fakes.delivery``. The bytes a fault injects
come from the dialect (``Context.dialect``: ``http_error_body``, ``malformed_frame``,
``in_band_error_frame``), so no fault knows a wire format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fakes.delivery import Pace, Rechunk
from fakes.fault_base import COUNT as _COUNT
from fakes.fault_base import SECONDS as _SECONDS
from fakes.fault_base import Context, Fault, Rendering
from fakes.fault_base import fuzz_events as _fuzz_events
from fakes.response import JSON_HEADERS, Chunk, Plan

__all__ = [
    "API_KEY_PLACEHOLDER",
    "FAULTS",
    "Context",
    "Fault",
    "Rendering",
    "mask_key",
]

# What an ``http_error`` body with ``echo_api_key`` holds where the request's key goes.
API_KEY_PLACEHOLDER = "{api_key}"

# The statuses ``conformance fuzz`` scripts an agent should retry (and 400, which it should not).
_FUZZ_STATUSES = [429, 500, 502, 503, 504, 529, 408, 400]


class HttpError(Fault):
    name = "http_error"
    symptom = "http_status"
    params = {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {
            "status": {"type": "integer", "minimum": 100, "maximum": 599},
            "headers": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
            "body": {"type": ["string", "object"]},
            "error": {
                "description": "An error the dialect words itself, as the body (no body given): "
                "prompt_too_long, the context window overflow (chat completions and Responses: "
                "code context_length_exceeded; Anthropic Messages: 'prompt is too long').",
                "enum": ["prompt_too_long"],
            },
            "retry_after_date": {"type": "number", "minimum": 0},
            "echo_api_key": {
                "description": "Put the API key the request carried (Authorization bearer, "
                "x-api-key or api-key header) into the error message: whole (full) or as its "
                "first 7 and last 4 characters (masked). With a body, it replaces every "
                "{api_key} in the body's strings. The journal records the key as [REDACTED].",
                "enum": ["full", "masked"],
            },
        },
    }

    def replace(self, plan: Plan, p: dict[str, Any], ctx: Context) -> Plan | None:
        """An error status with the scenario's body (or the dialect's default) and headers."""
        plan.status, plan.stream = int(p["status"]), False
        body = p.get("body")
        if body is None and p.get("error") == "prompt_too_long":
            body = ctx.dialect.prompt_too_long_body()
        if body is None:
            body = ctx.dialect.http_error_body(plan.status)
        if p.get("echo_api_key"):
            body = _echo_key(body, p, ctx.api_key or "")
            plan.secrets = (ctx.api_key,) if ctx.api_key else ()
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        plan.headers = {
            **({} if isinstance(body, str) else JSON_HEADERS),
            **{k: str(v) for k, v in (p.get("headers") or {}).items()},
        }
        plan.chunks, plan.full_bytes = [Chunk(raw, event=False)], len(raw)
        plan.retry_after_date = p.get("retry_after_date")
        return plan

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        retry = st.one_of(
            st.just({}),
            st.builds(lambda s: {"headers": {"Retry-After": str(s)}}, st.integers(0, 8)),
            st.builds(lambda ms: {"headers": {"retry-after-ms": str(ms)}}, st.integers(0, 4000)),
            st.builds(lambda s: {"retry_after_date": s}, st.integers(0, 8)),
        )
        status = draw(st.sampled_from(_FUZZ_STATUSES))
        return {"status": status, **draw(retry)}


class ResetBeforeHeaders(Fault):
    name = "reset_before_headers"
    symptom = "connection_failed"
    params = {"type": ["object", "null", "boolean"]}

    def replace(self, plan: Plan, p: dict[str, Any], ctx: Context) -> Plan | None:
        plan.reset_before_headers, plan.ending = True, "reset"
        return plan

    breaks = True


class DelayHeaders(Fault):
    name = "delay_headers"
    params = {
        "type": "object",
        "additionalProperties": False,
        "required": ["seconds"],
        "properties": {"seconds": _SECONDS},
    }

    def on_plan(self, plan: Plan, p: dict[str, Any]) -> None:
        plan.header_delay = float(p["seconds"])

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"seconds": draw(st.integers(0, 20))}


class Cut(Fault):
    name = "cut"
    symptom = "broken_stream"
    params = {
        "type": "object",
        "additionalProperties": False,
        "oneOf": [{"required": ["after_events"]}, {"required": ["at_byte"]}],
        "properties": {
            "after_events": _COUNT,
            "at_byte": _COUNT,
            "mode": {"enum": ["reset", "close"]},
        },
    }

    def on_body(self, plan: Plan, raw: bytes, p: dict[str, Any]) -> list[Chunk]:
        at = int(p.get("at_byte", 0))
        plan.cut_at_byte, plan.ending = min(at, len(raw)), p.get("mode", "reset")
        return [Chunk(raw[:at], event=False)]

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        """The chunks before a cut at ``at_byte`` (raw bytes; a partial last chunk is no
        event) or after ``n`` events."""
        plan.ending = p.get("mode", "reset")
        if "at_byte" not in p:
            out = chunks[:n]
        else:
            out, pos, at = [], 0, int(p["at_byte"])
            for c in chunks:
                if pos >= at:
                    break
                out.append(Chunk(c.data[: at - pos], event=c.event and pos + len(c.data) <= at))
                pos += len(c.data)
        plan.cut_at_byte = sum(len(c.data) for c in out)
        return out

    breaks = True

    def attempt_failed(self, resp: Mapping[str, Any], p: dict[str, Any]) -> bool | None:
        cut_at, full = resp.get("cut_at_byte"), resp.get("full_bytes")
        if cut_at is not None and full and cut_at >= full:
            # Cut after the last byte: the whole body went out before the connection ended.
            return False
        return None

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        where = draw(
            st.one_of(
                st.builds(lambda n: {"after_events": n}, _fuzz_events()),
                st.builds(lambda b: {"at_byte": b}, st.integers(0, 600)),
            )
        )
        return {**where, "mode": draw(st.sampled_from(["reset", "close"]))}


class Stall(Fault):
    name = "stall"
    symptom = "broken_stream"
    params = {
        "type": "object",
        "additionalProperties": False,
        "required": ["after_events", "seconds"],
        "properties": {
            "after_events": _COUNT,
            "seconds": _SECONDS,
            "keepalive": {"type": "number", "exclusiveMinimum": 0},
            # For the judge only (STR-10): the idle limit an agent's watchdog must act within,
            # at most ``seconds``; the rest of the silence shows a watchdog a loaded machine made
            # late, and makes a silence waited out the agent's beyond doubt.
            "idle_limit": {"type": "number", "exclusiveMinimum": 0},
        },
    }

    def silence_s(self, p: dict[str, Any]) -> float | None:
        secs = p.get("seconds")
        return float(secs) if isinstance(secs, (int, float)) else None

    def on_body(self, plan: Plan, raw: bytes, p: dict[str, Any]) -> list[Chunk]:
        # A JSON body has no room for keep-alive comments: the whole pause comes first.
        return [Chunk(raw, float(p["seconds"]), event=False)]

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        """A pause of ``seconds`` after ``n`` events, filled with ``: keep-alive`` comments
        every ``keepalive`` seconds if asked: on a replayed stream too, never in the body of a
        non-streaming replay (where a comment would corrupt the JSON)."""
        secs, keepalive = float(p["seconds"]), p.get("keepalive") if plan.stream else None
        extra: list[Chunk] = []
        waited = 0.0
        if keepalive:
            while waited + float(keepalive) < secs:
                extra.append(Chunk(b": keep-alive\n\n", float(keepalive), event=False))
                waited += float(keepalive)
        rest = chunks[n:]
        if rest:
            rest[0] = Chunk(rest[0].data, secs - waited, rest[0].event)
        else:
            extra.append(Chunk(b"", secs - waited, event=False))
        return chunks[:n] + extra + rest

    def attempt_failed(self, resp: Mapping[str, Any], p: dict[str, Any]) -> bool | None:
        # A stall the client waited out is a slow success; it failed only if the client gave
        # up before the whole body was out.
        return bool(resp.get("sent_bytes", 0) < (resp.get("full_bytes") or 0))

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"after_events": draw(_fuzz_events()), "seconds": draw(st.integers(1, 120))}


class EndWithoutFinish(Fault):
    name = "end_without_finish"
    symptom = "no_finish"
    params = {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {"done": {"type": "boolean"}},
    }
    stream_only, replay_ok = True, False

    def on_reply(self, r: Rendering, p: dict[str, Any]) -> None:
        r.reply["finish_reason"], r.terminal = None, bool(p.get("done", False))

    breaks = True

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"done": draw(st.booleans())}


class FinishWithoutDone(Fault):
    name = "finish_without_done"
    params = {"type": ["object", "null", "boolean"]}
    stream_only, replay_ok = True, False

    def on_reply(self, r: Rendering, p: dict[str, Any]) -> None:
        r.terminal = False


class MalformedEvent(Fault):
    name = "malformed_event"
    symptom = "malformed_event"
    params = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"after_events": _COUNT, "kind": {"enum": ["bad_json", "missing_data"]}},
    }
    stream_only = True

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        bad = Chunk(ctx.dialect.malformed_frame(p.get("kind", "bad_json")), event=False)
        return chunks[:n] + [bad] + chunks[n:]

    breaks = True

    def attempt_failed(self, resp: Mapping[str, Any], p: dict[str, Any]) -> bool | None:
        if p.get("kind") == "missing_data":
            # A line with no field name is ignored by SSE parsers: the stream itself is intact.
            return resp.get("end") in ("reset", "close")
        return _after_done_rule(resp, p)

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        kind = draw(st.sampled_from(["bad_json", "missing_data"]))
        return {"after_events": draw(_fuzz_events()), "kind": kind}


class InBandError(Fault):
    name = "in_band_error"
    symptom = "in_band_error"
    params = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"after_events": _COUNT, "error": {"type": "object"}},
    }
    stream_only = True

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        return chunks[:n] + [Chunk(ctx.dialect.in_band_error_frame(p.get("error"), n, ctx.model))]

    breaks = True

    def attempt_failed(self, resp: Mapping[str, Any], p: dict[str, Any]) -> bool | None:
        return _after_done_rule(resp, p)

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        return {"after_events": draw(_fuzz_events())}


class Length(Fault):
    name = "length"
    symptom = "length"
    params = {
        "type": "object",
        "additionalProperties": False,
        "required": ["part", "at"],
        "properties": {"part": {"enum": ["text", "reasoning", "arguments"]}, "at": _COUNT},
    }
    replay_ok = False

    def on_reply(self, r: Rendering, p: dict[str, Any]) -> None:
        part, at = p["part"], int(p["at"])
        reply = dict(r.reply, finish_reason="length")
        if part == "arguments":
            calls = [dict(c) for c in (reply.get("tool_calls") or [])[:1]]
            if calls:
                calls[0]["arguments"] = (calls[0].get("arguments") or "")[:at]
            reply["tool_calls"] = calls
        else:
            reply[part] = (reply.get(part) or "")[:at]
        r.reply = reply

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        parts = ["arguments"] if reply.get("tool_calls") else ["text"]
        if reply.get("reasoning"):
            parts.append("reasoning")
        return {"part": draw(st.sampled_from(parts)), "at": draw(st.integers(0, 30))}


class SlowDribble(Fault):
    name = "slow_dribble"
    params = {
        "type": "object",
        "additionalProperties": False,
        "required": ["interval"],
        "properties": {"interval": _SECONDS},
    }
    stream_only = True

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        gap = float(p["interval"])
        return [Chunk(c.data, gap if i else 0.0, c.event) for i, c in enumerate(chunks)]

    def event_gap_s(self, p: dict[str, Any], sent: bytes) -> float:
        return float(p["interval"])

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"interval": draw(st.sampled_from([0.01, 0.05, 0.2]))}


class EmptyReply(Fault):
    name = "empty_reply"
    symptom = "empty_reply"
    params = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"kind": {"enum": ["no_choices", "empty_message"]}},
    }
    replay_ok = False

    def on_reply(self, r: Rendering, p: dict[str, Any]) -> None:
        r.empty, r.reply = p.get("kind", "no_choices"), {"text": "", "finish_reason": "stop"}

    breaks = True

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        return {"kind": draw(st.sampled_from(["no_choices", "empty_message"]))}


def _after_done_rule(resp: Mapping[str, Any], p: dict[str, Any]) -> bool | None:
    if _injected_after_done(resp.get("sent") or "", p):
        # Injected after the stream's own end: a client that stops at [DONE] never meets it.
        return resp.get("end") in ("reset", "close")
    return None


def _injected_after_done(sent: str, params: dict[str, Any]) -> bool:
    """Whether the injected event came after the stream's own `data: [DONE]`.

    A malformed event is inserted in the middle of the rendering, whose rest (with [DONE]) still
    goes out when the body is small, so [DONE] being somewhere in `sent` is not enough: the
    injected frame sits at index `after_events` among the frames written.
    """
    if "data: [DONE]" not in sent:
        return False
    if "after_events" not in params:
        return True  # position unknown: keep the older reading
    n = int(params["after_events"])
    frames = [f for f in sent.split("\n\n") if f.strip()]
    own = frames[:n] + frames[n + 1 :]  # the rendering's frames, without the injected one
    done = next((i for i, f in enumerate(own) if f.strip() == "data: [DONE]"), None)
    return done is not None and n > done


# The registry, in the order the schema lists them (and the fuzzer samples them).
FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        HttpError(),
        ResetBeforeHeaders(),
        DelayHeaders(),
        Cut(),
        Stall(),
        EndWithoutFinish(),
        FinishWithoutDone(),
        MalformedEvent(),
        InBandError(),
        Length(),
        SlowDribble(),
        EmptyReply(),
        Rechunk(),
        Pace(),
    )
}


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
