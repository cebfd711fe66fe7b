"""Decide what to send for one chat request: a pure function of the step and the request.

Theory of operation: ``make_plan`` renders the reply fully (``full``), letting the step's fault
(a class of ``fakes.faults``) act at each stage, to get the list of byte chunks actually written
(each with an unscaled delay before it) and how the response ends. The server only carries out
a plan, scaling the delays.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from fakes.dialects import CHAT, REGISTRY, Dialect
from fakes.faults import FAULTS, Context, Fault, Rendering, mask_key
from fakes.response import JSON_HEADERS, SSE_HEADERS, Chunk, Plan
from fakes.scenario import OTHERWISE_INDEX, Step

__all__ = ["Chunk", "Plan", "make_plan", "harness_error_plan", "mask_key", "DIALECTS"]

# Wire dialects by the name the journal records, each rendered through ``Dialect``.
DIALECTS: Mapping[str, Dialect] = REGISTRY


def harness_error_plan(message: str, dialect: str = CHAT) -> Plan:
    """A 500 reply for a request the script cannot serve, shaped as ``dialect``'s error."""
    body = json.dumps(DIALECTS[dialect].error_body(message, "harness_error")).encode()
    return Plan(
        status=500,
        headers=dict(JSON_HEADERS),
        chunks=[Chunk(body, event=False)],
        full_bytes=len(body),
        harness_error=message,
    )


def _fault(step: Step, stream: bool) -> tuple[str | None, Fault]:
    """The step's fault as it applies to this request: a stream-only one is none without a
    stream (the base ``Fault`` acts nowhere)."""
    fault = FAULTS.get(step.fault_name or "")
    if fault is None or (fault.stream_only and not stream):
        return None, Fault()
    return fault.name, fault


def make_plan(
    step: Step, request: dict[str, Any], dialect: str = CHAT, api_key: str | None = None
) -> Plan:
    """The plan for ``request`` (parsed JSON body) served by ``step`` in ``dialect``;
    ``api_key`` is the key the request carried (only an ``echo_api_key`` error shows it)."""
    if step.replay is not None:
        return _replay_plan(step, request, dialect, api_key)
    stream = bool(request.get("stream"))
    model = str(request.get("model") or "fake-model")
    name, fault = _fault(step, stream)
    p = step.fault_params
    plan = Plan(stream=stream, fault=name)
    ctx = Context(DIALECTS[dialect], model, api_key)
    replaced = fault.replace(plan, p, ctx)
    if replaced is not None:
        return replaced
    fault.on_plan(plan, p)
    r = Rendering(dict(step.reply or {}))
    fault.on_reply(r, p)
    d = DIALECTS[dialect]
    if not stream:
        body = d.json_body(r.reply, model, empty=r.empty)
        raw = json.dumps(body, ensure_ascii=False).encode()
        plan.headers, plan.full_bytes = dict(JSON_HEADERS), len(raw)
        plan.chunks = fault.on_body(plan, raw, p)
        return plan
    reply_json = json.dumps(r.reply, sort_keys=True)
    frames, marks = _frames(d.NAME, reply_json, model, r.terminal, r.empty)
    n = _neutral_position(int(p.get("after_events", 0)), _chat_marks(reply_json), marks)
    plan.headers = dict(SSE_HEADERS)
    plan.full_bytes = sum(len(f) for f in frames)
    plan.chunks = fault.on_stream([Chunk(f) for f in frames], n, plan, p, ctx)
    return plan


# Every dialect streams the same content milestones (``Dialect.marks``): the finish marker is
# the dialect's (chat's finish chunk, ``message_delta``, the terminal ``response.*`` event), the
# end-of-stream marker its own (``[DONE]``, ``message_stop``; Responses has none apart from the
# terminal event), see docs/gateway.md.


@functools.lru_cache(maxsize=256)
def _frames(
    dialect: str, reply_json: str, model: str, terminal: bool, empty: str | None
) -> tuple[tuple[bytes, ...], tuple[tuple[int, ...] | None, ...]]:
    """The frames of a streamed reply and the content milestone of each (``marks``), cached:
    scripts replay the same reply many times."""
    d = DIALECTS[dialect]
    events = d.stream_events(json.loads(reply_json), model, terminal=terminal, empty=empty)
    return tuple(d.frame(name, payload) for name, payload in events), tuple(d.marks(events))


@functools.lru_cache(maxsize=256)
def _chat_marks(reply_json: str) -> tuple[tuple[int, ...] | None, ...]:
    """The milestones of the chat rendering of a reply, the scale ``after_events`` counts on."""
    chat = DIALECTS[CHAT]
    return tuple(chat.marks(chat.stream_events(json.loads(reply_json), "m")))


def _neutral_position(
    n: int, chat: tuple[tuple[int, ...] | None, ...], marks: tuple[tuple[int, ...] | None, ...]
) -> int:
    """How many of a dialect's events to send for a fault placed ``after_events: n``.

    Scenarios are dialect-neutral, so ``n`` counts events of the chat rendering (role chunk
    first); in any dialect the fault strikes right after the event that completes the same
    content as those ``n`` chat events (same pieces of reasoning, text and arguments, nothing
    more), e.g. before ``ping`` and ``content_block_start`` when only the start was sent. In
    chat itself that is the ``n`` events (its milestones rise event by event).
    """
    if n <= 0:
        return 0
    if n >= len(chat):
        return len(marks)
    reached = chat[n - 1]
    assert reached is not None  # every chat event delivers a milestone
    return max((j + 1 for j, m in enumerate(marks) if m is not None and m <= reached), default=0)


# -- replay: recorded bytes (a probe's recording) -------------------------------------------


def _replay_plan(
    step: Step, request: dict[str, Any], dialect: str = CHAT, api_key: str | None = None
) -> Plan:
    """Carry out a ``replay`` step: the recorded status, headers and chunks, byte for byte.

    Faults still apply (``fakes.faults``): a replacing one (``http_error``,
    ``reset_before_headers``) answers in the request's dialect, the others act on the chunks
    (those that rewrite a rendered reply are refused at load time, ``Fault.replay_ok``);
    ``after_events`` counts the recorded pieces carrying a ``data:`` line, each recorded write
    split after every blank line (``_recorded``), since a recording's write boundaries need not
    match events. A recording is in one dialect (``replay.dialect``,
    default ``openai_chat``): a request of another is a harness error, never foreign bytes.
    """
    stream = bool(request.get("stream"))
    name, fault = _fault(step, stream)
    p = step.fault_params
    # A replacing fault (an error status, a reset) answers in the request's dialect.
    replaced = fault.replace(
        Plan(stream=stream, fault=name), p, Context(DIALECTS[dialect], api_key=api_key)
    )
    if replaced is not None:
        return replaced
    rp = step.replay or {}
    recorded = str(rp.get("dialect") or CHAT)
    if recorded != dialect:
        who = "the otherwise step" if step.index == OTHERWISE_INDEX else f"script step {step.index}"
        return harness_error_plan(
            f"{who} replays a recording in dialect {recorded!r} "
            f"and cannot answer a {dialect!r} request",
            dialect,
        )
    plan = Plan(
        status=int(rp.get("status", 200)),
        headers={k: str(v) for k, v in (rp.get("headers") or {}).items()},
        stream=stream,
        fault=name,
        ending=rp.get("end", "complete"),
    )
    chunks = _recorded(rp.get("chunks") or [])
    plan.full_bytes = sum(len(c.data) for c in chunks)
    n = int(p.get("after_events", 0))
    at = next((i + 1 for i, k in enumerate(_event_counts(chunks)) if k >= n), 0) if n else 0
    fault.on_plan(plan, p)
    plan.chunks = fault.on_stream(chunks, at, plan, p, Context(DIALECTS[dialect]))
    return plan


def _recorded(writes: list[str]) -> list[Chunk]:
    """A recording's writes as chunks: each write split after every blank line (the end of an
    SSE event), so a fault can strike between two events that one read brought together, and
    ending with a flush, so the replay writes as the recording was read."""
    out: list[Chunk] = []
    for w in writes:
        parts = [x for x in _EVENT_END.split(w.encode("utf-8")) if x]
        out += [
            Chunk(x, event=b"data:" in x, flush=i == len(parts) - 1) for i, x in enumerate(parts)
        ]
    return out


# After a blank line: where an SSE event ends (LF or CRLF lines).
_EVENT_END = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)")


def _event_counts(chunks: list[Chunk]) -> list[int]:
    """Running count of event-carrying chunks."""
    out, k = [], 0
    for c in chunks:
        k += c.event
        out.append(k)
    return out
