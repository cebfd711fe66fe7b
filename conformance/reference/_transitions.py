"""The recovery core's transition table: (phase, event) -> (handler, next phase).

Transitions as data, in the style of h11's ``_state.py``. Every phase change of
:class:`~conformance.reference.core.TurnCore` is one row of :data:`TRANSITIONS`: the handler
(a method name of the core) and the phases the turn may be in after it. One phase means the
handler cannot choose; several mean the handler decides among exactly those (a failed attempt may
be retried, waited on, compacted, or end the turn). The core assigns the phase a handler returns
and raises :class:`CoreError` if the table does not list it, so the table cannot drift from the
code.

Timers are told apart by their role (:class:`Timer`), not by the event type alone: a wait timer,
the idle watchdog, the request (header) time limit and a tool call's timers lead to different
handlers. Tool events and ``Aborted`` are accepted in every live phase, since background tool
calls finish at any time.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ._events import (
    Aborted,
    BodyEnded,
    BodyFailed,
    Chunk,
    ConnectFailed,
    Event,
    HeadersReceived,
    StopHookDone,
    TimerFired,
    ToolOutcome,
)

__all__ = [
    "ACCEPTS",
    "LIVE",
    "TRANSITIONS",
    "Begin",
    "CoreError",
    "Key",
    "Phase",
    "Timer",
    "Transition",
]


class CoreError(Exception):
    """The driver fed an event the current phase cannot accept (a driver bug)."""


class Phase(enum.Enum):
    START = "start"  # begin() not called yet
    TITLE = "title"  # the background title request is in flight
    REQUEST = "request"  # a chat attempt is in flight, no headers yet
    BODY = "body"  # a chat attempt's headers arrived; reading its body
    WAIT = "wait"  # waiting before the next attempt
    TOOLS = "tools"  # one tool call is running (tool events are taken in any live phase)
    COMPACT = "compact"  # the compaction request is in flight
    STOP_HOOK = "stop_hook"  # the stop hook is running
    DONE = "done"  # EndTurn returned; nothing more happens


class Timer(enum.Enum):
    """The role of a :class:`TimerFired`: which of the core's timers ran out."""

    WAIT = "wait"  # the wait before the next attempt
    IDLE = "idle"  # the stream idle watchdog
    REQUEST = "request"  # no response headers within config.request_timeout_s
    TOOL = "tool"  # a tool call's time limit or retry wait


class Begin(Event):
    """Not fed by the driver: :meth:`TurnCore.begin`, as the row of the START phase."""

    __slots__ = ()


Key = type[Event] | Timer


@dataclass(frozen=True)
class Transition:
    """A handler (method name of the core) and the phases the turn may be in after it."""

    handler: str
    next: frozenset[Phase]


def _to(handler: str, *phases: Phase) -> Transition:
    return Transition(handler, frozenset(phases))


_P = Phase
LIVE = frozenset(set(Phase) - {_P.START, _P.DONE})
# Where a model request leads: sent (REQUEST), proactive compaction first (COMPACT), or the step
# limit ends the turn (DONE).
_STEP = (_P.REQUEST, _P.COMPACT, _P.DONE)
# Where a failed chat attempt leads: resent at once (model fallback, refreshed credentials,
# media stripped, non-streaming fallback, lowered max_tokens), retried after a wait, reactive
# compaction, or the error ends the turn.
_FAILED = (_P.REQUEST, _P.WAIT, _P.COMPACT, _P.DONE)
# Where a reply leads: its tool calls run, the next step (continuation, raised limit, after
# tools), the stop hook, or the end of the turn; an empty or broken one is a failed attempt.
_REPLY = (*_FAILED, _P.TOOLS, _P.STOP_HOOK)
# Where finishing a foreground tool call leads: the next call, or the next step.
_TOOL_DONE = (_P.TOOLS, *_STEP)

TRANSITIONS: Mapping[tuple[Phase, Key], Transition] = {
    (_P.START, Begin): _to("_on_begin", _P.TITLE, _P.REQUEST, _P.DONE),
    # The background title request: one attempt, never retried (RTY-09), then the first step.
    (_P.TITLE, HeadersReceived): _to("_on_title", _P.TITLE),
    (_P.TITLE, ConnectFailed): _to("_on_title", _P.TITLE, _P.REQUEST, _P.DONE),
    (_P.TITLE, BodyEnded): _to("_on_title", _P.TITLE, _P.REQUEST, _P.DONE),
    (_P.TITLE, BodyFailed): _to("_on_title", _P.TITLE, _P.REQUEST, _P.DONE),
    (_P.TITLE, Timer.REQUEST): _to("_on_request_timeout", _P.REQUEST, _P.DONE),
    # A chat attempt before its headers.
    (_P.REQUEST, ConnectFailed): _to("_on_connect_failed", *_FAILED),
    (_P.REQUEST, HeadersReceived): _to("_on_headers", _P.BODY),
    (_P.REQUEST, Timer.REQUEST): _to("_on_request_timeout", *_FAILED),
    # Its body: an error text, a whole reply, or a stream.
    (_P.BODY, Chunk): _to("_on_chunk", _P.BODY, *_REPLY),
    (_P.BODY, BodyEnded): _to("_on_body_ended", *_REPLY),
    (_P.BODY, BodyFailed): _to("_on_body_failed", *_REPLY),
    (_P.BODY, Timer.IDLE): _to("_on_idle", *_REPLY),
    (_P.WAIT, Timer.WAIT): _to("_on_wait_over", _P.REQUEST),
    # The compaction request (proactive or after an overflow): one attempt.
    (_P.COMPACT, HeadersReceived): _to("_on_compaction", _P.COMPACT),
    (_P.COMPACT, ConnectFailed): _to("_on_compaction", _P.REQUEST, _P.DONE),
    (_P.COMPACT, BodyEnded): _to("_on_compaction", _P.REQUEST, _P.DONE),
    (_P.COMPACT, BodyFailed): _to("_on_compaction", _P.REQUEST, _P.DONE),
    (_P.COMPACT, Timer.REQUEST): _to("_on_request_timeout", _P.REQUEST, _P.DONE),
    (_P.STOP_HOOK, StopHookDone): _to("_on_stop_hook", _P.DONE, *_STEP),
    # A foreground tool call finishing leads on; a background one leaves the phase as it is.
    (_P.TOOLS, ToolOutcome): _to("_on_tool_outcome", *_TOOL_DONE),
    (_P.TOOLS, Timer.TOOL): _to("_on_tool_timer", *_TOOL_DONE),
    **{(p, ToolOutcome): _to("_on_tool_outcome", p) for p in LIVE - {_P.TOOLS}},
    **{(p, Timer.TOOL): _to("_on_tool_timer", p) for p in LIVE - {_P.TOOLS}},
    # Nothing is sent after an abort (CTL-01). The stop_on_abort broken copy carries on instead:
    # a chat attempt in flight is taken for a failed one, any other phase goes on unchanged.
    **{(p, Aborted): _to("_on_abort", _P.DONE, p) for p in LIVE - {_P.REQUEST, _P.BODY}},
    (_P.REQUEST, Aborted): _to("_on_abort", *_FAILED),
    (_P.BODY, Aborted): _to("_on_abort", *_FAILED),
}

# The events each phase accepts, derived from the table (timers of any role are TimerFired).
ACCEPTS: Mapping[Phase, frozenset[type[Event]]] = {
    phase: frozenset(
        TimerFired if isinstance(key, Timer) else key
        for (p, key) in TRANSITIONS
        if p is phase and key is not Begin
    )
    for phase in Phase
}
