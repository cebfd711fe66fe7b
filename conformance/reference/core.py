"""Sans-IO recovery core of the reference agent: one user turn as a state machine.

Theory of operation
-------------------
:class:`TurnCore` holds one user turn. The driver calls :meth:`TurnCore.begin` once, then
:meth:`TurnCore.handle` with each :mod:`event <conformance.reference._events>` (and the current
monotonic time); both return a list of :mod:`actions <conformance.reference._actions>` to carry
out in order. The core never reads a clock, sleeps, draws randomness of its own or touches a
socket: waits are :class:`StartTimer` actions answered by :class:`TimerFired`, jitter comes from
the injected ``rand`` callable, and the wall-clock time needed for ``Retry-After`` HTTP-dates
comes with :class:`HeadersReceived`.

A turn is a sequence of *steps*; each step is one model request (a body), bounded by
``max_tool_calls + 20`` steps. A step is tried in *modes*: streaming first (unless the start
message says ``stream: false``), then at most one non-streaming fallback, each with its own retry
budget (:func:`retry.decide`). An *attempt* is one HTTP request of a mode.

- Before headers (``ConnectFailed``) or with a non-200 status (``HeadersReceived`` then
  ``BodyEnded`` with the error text): the attempt failed. With ``config.request_timeout_s``
  every request starts a ``request`` timer, cancelled by its headers; when it fires first the
  request is cancelled and taken for a ``ConnectFailed`` of kind ``timeout`` (RTY-06: retried
  like a 429, within the same budget; an auxiliary request simply failed). Three consecutive 529s switch to the
  fallback model (private fields stripped) with a fresh budget; otherwise retry after the decided
  wait (``NoteRetry`` + ``StartTimer``), or, when recovery says no, *surface* the failure.
- Before the retry decision: a 401 saying "expired" asks the driver to refresh the credentials
  (``RefreshCredentials``) and resends the identical body, once until a request succeeds; a
  media-too-large error strips media parts from the request and the history and resends, once.
- A surfaced failure of an exhausted streaming mode takes the non-streaming fallback; otherwise
  the step fails: RTY-11 lowers ``max_tokens`` once, a context overflow gets one compaction
  request per turn (at most 3 failed compactions), else the error is shown, typed, once, naming
  the fallback when one was tried, and the turn ends.
- A streaming body that fails, goes idle (the ``idle`` timer), carries a malformed or in-band
  error event, or ends without ``finish_reason`` withdraws its partial message
  (``RemoveMessage`` by id) and resends the identical body with ``stream: false``; its tool calls
  never run. Once ``finish_reason`` has arrived, a failure or silence before ``[DONE]`` ends a
  complete reply instead (STR-13). Empty non-streaming replies are re-sent at most
  ``MAX_EMPTY_REPLIES`` times.
- A reply: ``length`` without tool calls first raises the default output limit once, then
  appends the hidden continuation message (bounded by :class:`TruncationCounter`); tool calls run
  one at a time within the per-turn cap (a ``run_in_background`` call is started and not waited
  for), loop reminders follow all results; a reply whose usage
  nears ``config.context_window`` makes the next step begin with a proactive compaction, whose
  failure is not fatal (3 failures in a row stop compacting); no tool calls ends the step, then
  the stop hook (``CallStopHook``), then ``EndTurn``.
- A tool call (:mod:`tool_policy`): an unknown name or invalid arguments get their error result
  at once, with no I/O; otherwise ``RunTool`` (one attempt) plus a ``tool_limit`` timer of
  ``config.tool_timeout_s`` (default 120 s). The driver reports each attempt's raw
  ``ToolOutcome``: ``transient`` is retried after a ``tool_retry`` timer (0.5 s, x2; 2 retries),
  then "temporarily unavailable"; the limit timer cancels the attempt (``CancelTool``) and gives
  the timeout text; ``denied`` and ``error`` get their texts; the output is capped and the
  truncation warning appended; each finished call is logged (``LogToolCall``) when a debug
  directory is set. ``batch`` runs in the driver as one unit (``final`` outcome, taken as is).
  Tool events are accepted in every live phase (background calls finish at any time).
- ``Aborted`` in any phase cancels what is in flight and ends the turn: after it the core
  returns no action at all (unless the ``stop_on_abort`` switch builds a broken copy).

Which events each phase accepts is the table :data:`ACCEPTS`. An event about a request, timer or
tool call the core no longer waits for is stale and ignored; any other event the phase does not
accept is a driver bug and raises :class:`CoreError`.
"""

from __future__ import annotations

import copy
import enum
import json
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from . import retry
from ._actions import (
    Action,
    CallStopHook,
    CancelRequest,
    CancelTimer,
    CancelTool,
    Emission,
    EmitMessage,
    EndTurn,
    LogToolCall,
    NoteRetry,
    RefreshCredentials,
    RemoveMessage,
    ReportUsage,
    RunTool,
    SendRequest,
    ShowError,
    ShowToolResult,
    StartTimer,
    WriteDebugDump,
)
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
from .continuation import (
    CONTINUATION_TEXT,
    DEFAULT_MAX_TOKENS,
    OUTPUT_LIMIT_ERROR,
    TruncationCounter,
    assistant_to_wire,
    raised_limit,
)
from .loops import LoopDetector
from .tool_policy import (
    BATCH_TOOL,
    RETRIES,
    backoff_s,
    denied_text,
    error_text,
    final_output,
    log_record,
    precheck,
    timeout_text,
    unavailable_text,
)

__all__ = [
    "ACCEPTS",
    "IDLE_TIMEOUT_S",
    "MAX_COMPACTION_FAILURES",
    "MAX_EMPTY_REPLIES",
    "MISSING_RESULT",
    "OVERLOADS_BEFORE_FALLBACK",
    "PRIVATE_CALL_FIELDS",
    "PRIVATE_FIELDS",
    "Aborted",
    "Action",
    "Behaviours",
    "BodyEnded",
    "BodyFailed",
    "CallStopHook",
    "CancelRequest",
    "CancelTimer",
    "CancelTool",
    "Chunk",
    "ConnectFailed",
    "CoreError",
    "EmitMessage",
    "Emission",
    "EndTurn",
    "Event",
    "HeadersReceived",
    "LogToolCall",
    "NoteRetry",
    "Phase",
    "RefreshCredentials",
    "RemoveMessage",
    "ReportUsage",
    "RunTool",
    "SendRequest",
    "ShowError",
    "ShowToolResult",
    "StartTimer",
    "StopHookDone",
    "TimerFired",
    "ToolOutcome",
    "TurnCore",
    "WriteDebugDump",
    "corrected_max_tokens",
    "repair_history",
    "sanitize_history",
    "strip_media",
    "strip_private",
]

IDLE_TIMEOUT_S = 60.0  # unscaled: no chunk for this long = stream failure
MAX_EMPTY_REPLIES = 3  # bounded re-sends of empty 200 replies
OVERLOADS_BEFORE_FALLBACK = 3
MAX_COMPACTION_FAILURES = 3
TEXT_REPEATS = 3  # the same reply text this often in a row is a loop (LOP-06)
EXTRA_STEPS = 20  # steps beyond the tool-call cap: continuations, limit changes, compaction
PRIVATE_FIELDS = ("signature", "reasoning_signature", "thinking_blocks")
PRIVATE_CALL_FIELDS = ("extra_content",)
MISSING_RESULT = "[No result: this tool call was interrupted before it returned.]"
COMPACT_PROMPT = "Summarize the conversation below concisely."
REPEATED_TEXT_NOTE = (
    "<system-reminder>\nYou have written the same text 3 times in a row without making "
    "progress. Do not repeat it: try a different approach, or ask the user.\n</system-reminder>"
)
DEFAULT_CONTEXT_WINDOW = 128000  # tokens; config.context_window overrides it
COMPACT_AT = 0.9  # proactive compaction once the last reply's usage fills this share
MEDIA_PART_TYPES = frozenset(
    {"image_url", "input_image", "image", "file", "input_file", "input_audio", "document"}
)
MEDIA_REMOVED = "[media removed: it was too large for the request]"
BACKGROUND_STARTED = (
    "Started in the background (run_in_background): its result will not be awaited in this turn."
)
TITLE_PROMPT = "Write a short title for this conversation. Reply with the title only."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Behaviours:
    """One switch per recovery behaviour; all on. Switching one off breaks only that one."""

    honour_retry_after: bool = True
    backoff: bool = True
    retry_5xx: bool = True
    retry_connection_errors: bool = True
    stream_fallback: bool = True
    remove_partial_messages: bool = True
    continuation: bool = True
    output_truncation: bool = True
    reasoning_preservation: bool = True
    withhold_errors: bool = True
    idle_watchdog: bool = True
    history_repair: bool = True
    model_fallback: bool = True
    context_recovery: bool = True  # CTX-01: one reactive compaction on prompt too long
    window_correction: bool = True  # RTY-11: a window overflow lowers max_tokens once
    loop_detection: bool = True
    credential_refresh: bool = True  # RTY-10: an expired-credential 401 refreshes once
    background_tools: bool = True  # TRN-10: run_in_background calls are not waited for
    media_stripping: bool = True  # CTX-05: media too large -> resend without media once
    compaction_breaker: bool = True  # LOP-05: 3 failed compactions in a row stop compacting
    # Broken copies for the fuzzer: off = a classic agent bug.
    bound_continuations: bool = True  # off: the continuation never stops (TRN-04)
    discard_failed_tool_calls: bool = True  # off: a failed stream's tool calls run (STR-03)
    stop_on_abort: bool = True  # off: after an abort the agent retries / falls back (CTL-01)
    retry_budget: bool = True  # off: 11 retries of one request instead of 10 (RTY-04)
    give_up_when_exhausted: bool = True  # off: retryable errors are retried without end (RTY-04)
    backoff_cap: bool = True  # off: the backoff 0.5 x 2^(n-1) s is never capped at 32 s (RTY-03)
    fallback_after_first_cut: bool = True  # off: a cut stream is resent streaming 10 times first
    honest_exit: bool = True  # off: the front end exits 89 "unsupported" after turn_end
    strict_truncated_json: bool = True  # off: a dangling key is dropped and the call run (TJS-04)
    redact_own_key: bool = True  # off: the key a server echoes reaches events, logs, dumps (DBG-02)


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


_AUX = frozenset({ConnectFailed, HeadersReceived, BodyEnded, BodyFailed})

# Transitions as data: the events each phase accepts (Aborted is accepted in every live phase).
ACCEPTS: Mapping[Phase, frozenset[type[Event]]] = {
    Phase.START: frozenset(),
    Phase.TITLE: _AUX,
    Phase.REQUEST: frozenset({ConnectFailed, HeadersReceived}),
    Phase.BODY: frozenset({Chunk, BodyEnded, BodyFailed, TimerFired}),
    Phase.WAIT: frozenset({TimerFired}),
    Phase.TOOLS: frozenset({ToolOutcome, TimerFired}),
    Phase.COMPACT: _AUX,
    Phase.STOP_HOOK: frozenset({StopHookDone}),
    Phase.DONE: frozenset(),
}


def repair_history(messages: list[dict]) -> tuple[list[dict], int]:
    """Add a placeholder result after any tool call left without one; returns (messages, count)."""
    out: list[dict] = []
    added = 0
    i = 0
    while i < len(messages):
        msg = messages[i]
        out.append(msg)
        i += 1
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        if not calls:
            continue
        answered: set[str] = set()
        while i < len(messages) and messages[i].get("role") == "tool":
            answered.add(str(messages[i].get("tool_call_id")))
            out.append(messages[i])
            i += 1
        for call in calls:
            cid = str(call.get("id"))
            if cid not in answered:
                out.append({"role": "tool", "tool_call_id": cid, "content": MISSING_RESULT})
                added += 1
    return out, added


def sanitize_history(messages: list[dict], *, preserve_reasoning: bool = True) -> list[dict]:
    """History with no assistant message lacking both content and tool calls (RSN-03, RSN-04).

    A reasoning-only one gets the explanatory content; a fully empty one is dropped.
    """
    out: list[dict] = []
    for msg in messages:
        if msg.get("role") != "assistant" or msg.get("content") or msg.get("tool_calls"):
            out.append(msg)
            continue
        wire = assistant_to_wire(
            None, msg.get("reasoning_content"), None, preserve_reasoning=preserve_reasoning
        )
        if wire is not None:
            out.append({**msg, **wire})
    return out


def strip_private(messages: list[dict]) -> list[dict]:
    """History without vendor-private fields, for a different (fallback) model.

    Message-level signatures and thinking blocks go, and so do tool calls' ``extra_content``
    (where gateways carry thought signatures).
    """
    out = []
    for m in messages:
        clean = {k: v for k, v in m.items() if k not in PRIVATE_FIELDS}
        if isinstance(clean.get("tool_calls"), list):
            clean["tool_calls"] = [
                {k: v for k, v in c.items() if k not in PRIVATE_CALL_FIELDS}
                if isinstance(c, dict)
                else c
                for c in clean["tool_calls"]
            ]
        out.append(clean)
    return out


_CTX_MAX = re.compile(r"maximum context length is (\d+)")
_CTX_INPUT = re.compile(r"(\d+) in the messages")


def corrected_max_tokens(error_text: str) -> int | None:
    """RTY-11: a lower ``max_tokens`` that fits the window stated in a 400, or None."""
    m, i = _CTX_MAX.search(error_text), _CTX_INPUT.search(error_text)
    if not (m and i):
        return None
    room = int(m.group(1)) - int(i.group(1)) - 16  # small margin for counting differences
    return room if room > 0 else None


@dataclass
class _Reply:
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    msg_id: str | None = None


@dataclass
class _ToolCall:
    """One tool call being executed (attempts, backoff waits, its time limit)."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    warning: str | None
    arguments_chars: int
    started: float
    background: bool
    attempts: int = 1
    running: bool = True  # an attempt is in flight (else waiting to retry)
    limit_timer: int | None = None
    retry_timer: int | None = None


@dataclass
class _Attempt:
    """One HTTP request in flight."""

    request_id: int
    purpose: str  # chat | title | compact
    stream: bool
    body: dict[str, Any]
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    received_at: datetime | None = None
    reply: _Reply = field(default_factory=_Reply)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)


class TurnCore:
    """One user turn of the reference agent, without I/O. See the module docstring."""

    def __init__(
        self,
        start: Mapping[str, Any],
        *,
        behaviours: Behaviours = Behaviours(),  # noqa: B008 - frozen, shared safely
        rand: Callable[[], float] | random.Random | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        """``start``: the adapter start message. ``rand``: jitter source, floats in [0, 1].

        ``tools``: the OpenAI ``tools`` entries to offer (default: those of ``start``).
        """
        self.start = dict(start)
        self.b = behaviours
        if isinstance(rand, random.Random):
            rand = rand.random
        self._rand: Callable[[], float] = rand or random.Random().random
        self.config: dict[str, Any] = dict(self.start.get("config") or {})
        self.tools = list(tools) if tools is not None else _tools_of(self.start)
        self.model = str(self.start.get("model", ""))
        self.phase = Phase.START
        self.reason: str | None = None  # the EndTurn reason once ended
        self.now = 0.0  # monotonic time of the latest event, as the driver passed it
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.messages: list[dict[str, Any]] = []
        self.loops = LoopDetector()
        self.counter = TruncationCounter()
        self.user_limit = self.config.get("max_output_tokens")
        self.max_tokens = int(self.user_limit or DEFAULT_MAX_TOKENS)
        self.calls_left = int(self.config.get("max_tool_calls") or 50)
        self.steps_left = self.calls_left + EXTRA_STEPS
        self.overloads = 0
        self.compaction_failures = 0
        self._raised = self._lowered = self._compacted = False
        self._ids = self._request_ids = self._timer_ids = self._dumps = 0
        self._out: list[Action] = []
        self._attempt: _Attempt | None = None
        self._wait_timer: int | None = None
        self._idle_timer: int | None = None
        # The current step: its body (without "stream"), its mode and that mode's budget.
        self._body: dict[str, Any] = {}
        self._stream = True
        self._retries = 0
        self._empties = 0
        self._fallback_why: str | None = None  # set once the non-streaming fallback is taken
        self._pending_error: tuple[str, str] | None = None  # shown if compaction fails
        self._calls: list[dict[str, Any]] = []  # tool calls of the reply still to run
        self._running: str | None = None  # call id of the running tool
        self._tool_calls: dict[str, _ToolCall] = {}  # executing calls, background ones too
        self._tool_timers: dict[int, str] = {}  # timer id -> call id
        self.tool_timeout_s = float(self.config.get("tool_timeout_s") or 120)
        # None: no limit of our own on waiting for response headers.
        self.request_timeout_s = _positive(self.config.get("request_timeout_s"))
        self._request_timer: int | None = None
        self._schemas = {
            _tool_name(t): (t.get("function") or {}).get("parameters") or {} for t in self.tools
        }
        self._truncated = False
        self._reminders: list[str] = []
        self._last_text: str | None = None
        self._texts = 0  # how often in a row the reply text was _last_text
        self._refreshed = False  # RTY-10: one refresh until a request succeeds
        self._media_stripped = False  # CTX-05: media stripped once per turn
        self._compact_due = False  # the last reply's usage is near the context window
        self._proactive = False  # the compaction in flight is proactive (not an overflow)
        self._proactive_tried = False
        self.context_window = _int(self.config.get("context_window")) or DEFAULT_CONTEXT_WINDOW

    # ---- public interface --------------------------------------------------------------
    @property
    def ended(self) -> bool:
        return self.phase is Phase.DONE

    def begin(self, now: float = 0.0) -> list[Action]:
        """Start the turn: history repair, the optional title request, the first request."""
        if self.phase is not Phase.START:
            raise CoreError(f"begin() called twice (phase {self.phase.value})")
        self.now = now
        messages = list(self.start.get("history") or [])
        if self.b.history_repair:
            repaired, added = repair_history(messages)
            if added and self.config.get("training_data_mode"):
                # Fabricated results would poison training data: refuse instead of repairing.
                self._error(
                    "bad_request",
                    f"History has {added} tool call(s) without results; training-data mode "
                    "refuses to add placeholder results.",
                )
                return self._flush()
            messages = repaired
        messages = sanitize_history(messages, preserve_reasoning=self.b.reasoning_preservation)
        messages.append({"role": "user", "content": self.start.get("prompt", "")})
        self.messages = messages
        if self.config.get("background_title"):
            self._send_aux("title", _title_body(self.start))
            self.phase = Phase.TITLE
        else:
            self._next_step()
        return self._flush()

    def handle(self, event: Event, now: float = 0.0) -> list[Action]:
        """Feed one event; returns the actions to carry out, in order."""
        self.now = now
        if self.phase is Phase.START:
            raise CoreError("handle() before begin()")
        if self.phase is Phase.DONE:
            return []
        if isinstance(event, Aborted):
            if self.b.stop_on_abort:
                self._abort()
            else:
                self._abort_ignored()
            return self._flush()
        if self._stale(event):
            return []
        if isinstance(event, ToolOutcome):
            self._on_tool_outcome(event)
            return self._flush()
        if isinstance(event, TimerFired) and event.timer_id in self._tool_timers:
            self._on_tool_timer(event.timer_id)
            return self._flush()
        if isinstance(event, TimerFired) and event.timer_id == self._request_timer:
            return self._on_request_timeout(now)
        if type(event) not in ACCEPTS[self.phase]:
            raise CoreError(
                f"{type(event).__name__} cannot be handled in phase {self.phase.value!r}; "
                f"it accepts {sorted(t.__name__ for t in ACCEPTS[self.phase])}"
            )
        if isinstance(event, HeadersReceived):
            self._disarm_request_timer()
        if self.phase is Phase.TITLE:
            self._on_title(event)
        elif self.phase is Phase.COMPACT:
            self._on_compaction(event)
        elif self.phase is Phase.STOP_HOOK:
            assert isinstance(event, StopHookDone)
            if event.blocked is not None:
                self._show_message("system", f"Stop hook blocked: {event.blocked}")
            self._end("completed")
        elif self.phase is Phase.WAIT:
            self._wait_timer = None
            self._send()
        else:
            self._on_chat(event)
        return self._flush()

    # ---- plumbing ----------------------------------------------------------------------
    def _flush(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def _stale(self, event: Event) -> bool:
        rid = getattr(event, "request_id", None)
        if rid is not None:
            return self._attempt is None or rid != self._attempt.request_id
        if isinstance(event, TimerFired):
            return event.timer_id not in (
                self._wait_timer,
                self._idle_timer,
                self._request_timer,
                *self._tool_timers,
            )
        if isinstance(event, ToolOutcome):
            call = self._tool_calls.get(event.call_id)
            return call is None or not call.running
        if isinstance(event, StopHookDone):
            return self.phase is not Phase.STOP_HOOK
        return False

    def _new_id(self) -> str:
        self._ids += 1
        return f"m{self._ids}"

    def _start_timer(self, delay_s: float, purpose: str) -> int:
        self._timer_ids += 1
        self._out.append(StartTimer(self._timer_ids, max(0.0, delay_s), purpose))
        return self._timer_ids

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._out.append(CancelTimer(self._idle_timer))
            self._idle_timer = None

    def _arm_request_timer(self) -> None:
        if self.request_timeout_s is not None:
            self._request_timer = self._start_timer(self.request_timeout_s, "request")

    def _disarm_request_timer(self) -> None:
        if self._request_timer is not None:
            self._out.append(CancelTimer(self._request_timer))
            self._request_timer = None

    def _on_request_timeout(self, now: float) -> list[Action]:
        """No headers within ``request_timeout_s``: give the attempt up as a connection-level
        timeout, handled like any failure before headers (retry, budget, fallback)."""
        self._request_timer = None  # it fired: nothing to cancel
        attempt = self._attempt
        assert attempt is not None  # the timer is disarmed whenever an attempt closes
        self._out.append(CancelRequest(attempt.request_id))
        reason = f"no response headers within {self.request_timeout_s:g} s"
        return self.handle(ConnectFailed(attempt.request_id, "timeout", reason), now)

    def _close_attempt(self, *, cancel: bool = False) -> _Attempt:
        """The current attempt is over: later events about it are stale."""
        attempt = self._attempt
        assert attempt is not None
        self._cancel_idle()
        self._disarm_request_timer()
        if cancel:
            self._out.append(CancelRequest(attempt.request_id))
        self._attempt = None
        return attempt

    def _show_message(self, role: str, text: str, *, meta: bool = False) -> None:
        self._out.append(EmitMessage(self._new_id(), role, text, None, None, meta))

    def _error(self, kind: str, message: str) -> None:
        self._out.append(ShowError(kind, message))
        self._end("error")

    def _leak(self, kind: str, message: str) -> None:
        """Broken copy (``withhold_errors`` off): a failure about to be recovered is shown."""
        if not self.b.withhold_errors:
            self._out.append(ShowError(kind, message))

    def _end(self, reason: str) -> None:
        if reason != "aborted" and (self.usage["prompt_tokens"] or self.usage["completion_tokens"]):
            self._out.append(ReportUsage(**self.usage))
        self._out.append(EndTurn(reason))
        self.reason = reason
        self.phase = Phase.DONE

    def _abort(self) -> None:
        # Nothing is sent after an abort: no retry, no fallback, no continuation (CTL-01).
        if self._attempt is not None:
            self._close_attempt(cancel=True)
        if self._wait_timer is not None:
            self._out.append(CancelTimer(self._wait_timer))
            self._wait_timer = None
        for call in list(self._tool_calls.values()):
            if call.running:
                self._out.append(CancelTool(call.call_id))
            self._drop_tool(call)
        self._end("aborted")

    def _abort_ignored(self) -> None:
        """Broken copy (``stop_on_abort`` off): the abort is taken for a failed attempt."""
        attempt = self._attempt
        if attempt is None or attempt.purpose != "chat":
            return  # waiting or running a tool: carry on as if nothing happened
        if self.phase is Phase.BODY and attempt.stream and attempt.status == 200:
            self._stream_failed("aborted by the user")  # falls back to non-streaming
            return
        self._close_attempt(cancel=True)
        self._attempt_failed(None, {}, "aborted by the user", "reset", None)

    # ---- steps -------------------------------------------------------------------------
    def _next_step(self) -> None:
        if self._compact_due:
            self._compact_due = False
            if self.compaction_failures < MAX_COMPACTION_FAILURES or not self.b.compaction_breaker:
                # LOP-05: compact before the window overflows; a failure is not fatal.
                self._proactive = self._proactive_tried = True
                self._send_aux("compact", _compaction_body(self.model, self.messages))
                self.phase = Phase.COMPACT
                return
        if self.steps_left <= 0:
            self._error("bad_request", "Turn step limit reached.")
            return
        self.steps_left -= 1
        first = self.model == str(self.start.get("model", ""))
        wire = list(self.messages) if first else strip_private(self.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "max_tokens": self.max_tokens,
        }
        blocked = self.loops.blocked_tools() if self.b.loop_detection else set()
        offered = [t for t in self.tools if _tool_name(t) not in blocked]
        if offered:
            body["tools"] = offered
        self._body = body
        self._fallback_why = None
        self._start_mode(self.start.get("stream", True) is not False)

    def _start_mode(self, stream: bool) -> None:
        self._stream = stream
        self._retries = 0
        self._empties = 0
        self._send()

    def _send(self) -> None:
        self._request_ids += 1
        body = {**self._body, "stream": self._stream}
        self._attempt = _Attempt(self._request_ids, "chat", self._stream, body)
        self._out.append(SendRequest(self._request_ids, body, "chat"))
        self._arm_request_timer()
        self.phase = Phase.REQUEST

    def _send_aux(self, purpose: str, body: dict[str, Any]) -> None:
        self._request_ids += 1
        self._attempt = _Attempt(self._request_ids, purpose, False, body)
        self._out.append(SendRequest(self._request_ids, body, purpose))
        self._arm_request_timer()

    def _fallback_allowed(self) -> bool:
        return self.b.stream_fallback and self.config.get("stream_fallback", True) is not False

    # ---- a chat attempt ----------------------------------------------------------------
    def _on_chat(self, event: Event) -> None:
        attempt = self._attempt
        assert attempt is not None
        if isinstance(event, ConnectFailed):
            self._close_attempt()
            self._attempt_failed(None, {}, event.reason or event.kind, event.kind, None)
        elif isinstance(event, HeadersReceived):
            attempt.status, attempt.headers = event.status, dict(event.headers)
            attempt.received_at = event.received_at
            self.phase = Phase.BODY
            if event.status == 200 and attempt.stream and self.b.idle_watchdog:
                self._idle_timer = self._start_timer(IDLE_TIMEOUT_S, "idle")
        elif isinstance(event, TimerFired):
            self._idle_timer = None  # it fired: nothing to cancel
            self._stream_broke(attempt, "no data for the idle time limit")
        elif isinstance(event, Chunk):
            if attempt.status != 200 or not attempt.stream:
                raise CoreError(f"Chunk for request {attempt.request_id}, which is not a stream")
            self._on_chunk(attempt, event.data)
        elif isinstance(event, BodyFailed):
            if attempt.status != 200:
                self._close_attempt()
                self._attempt_failed(attempt.status, attempt.headers, event.reason, None, None)
            elif attempt.stream:
                self._stream_broke(attempt, event.reason or "the body failed")
            else:
                self._close_attempt()
                self._attempt_failed(None, {}, event.reason or "reset", "reset", None)
        elif isinstance(event, BodyEnded):
            if attempt.status == 200 and attempt.stream:
                self._stream_complete(attempt, cancel=False)
                return
            self._close_attempt()
            if attempt.status != 200:
                text = event.body[:500]
                if attempt.status == 400:
                    self._dump(attempt.body, text)
                self._attempt_failed(
                    attempt.status, attempt.headers, text, None, attempt.received_at
                )
            else:
                self._on_full_body(event.body)

    def _on_chunk(self, attempt: _Attempt, data: str) -> None:
        if data == "[DONE]":
            # Completion is judged by finish_reason; stop reading what may follow.
            self._stream_complete(attempt, cancel=True)
            return
        try:
            parsed = json.loads(data)
        except json.JSONDecodeError:
            self._stream_failed(f"malformed event: {data[:80]!r}")
            return
        if not isinstance(parsed, dict) or "error" in parsed:
            self._stream_failed(f"error event: {data[:200]}")
            return
        r = attempt.reply
        if parsed.get("usage"):
            r.usage = parsed["usage"]
        for ch in parsed.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            delta = ch.get("delta") or {}
            r.content += str(delta.get("content") or "")
            r.reasoning += str(delta.get("reasoning_content") or "")
            for tc in delta.get("tool_calls") or []:
                slot = attempt.calls.setdefault(
                    tc.get("index", 0),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if ch.get("finish_reason"):
                r.finish_reason = ch["finish_reason"]
        r.tool_calls = [attempt.calls[i] for i in sorted(attempt.calls)]
        if r.content or r.reasoning or r.tool_calls:
            r.msg_id = r.msg_id or self._new_id()
            self._show_reply(r)
        if self._idle_timer is not None:
            # Any data resets the idle watchdog.
            self._cancel_idle()
            self._idle_timer = self._start_timer(IDLE_TIMEOUT_S, "idle")

    def _show_reply(self, r: _Reply) -> None:
        self._out.append(
            EmitMessage(
                r.msg_id or self._new_id(),
                "assistant",
                r.content,
                r.reasoning or None,
                copy.deepcopy(r.tool_calls) or None,  # later chunks must not alter it
                False,
            )
        )

    def _stream_complete(self, attempt: _Attempt, *, cancel: bool) -> None:
        r = attempt.reply
        if r.finish_reason is None:
            self._stream_failed("stream ended without finish_reason")
            return
        self._close_attempt(cancel=cancel)
        if r.finish_reason != "length" and not (r.content or r.reasoning or r.tool_calls):
            self._empty_reply()
            return
        self._got_reply(r)

    def _stream_broke(self, attempt: _Attempt, why: str) -> None:
        """The stream broke off after its headers (reset, idle): done if it was already done.

        STR-13: completion is judged by the finish marker, so a break after ``finish_reason``
        and before ``[DONE]`` ends a complete reply; before it, the attempt failed.
        """
        if attempt.reply.finish_reason is not None:
            self._stream_complete(attempt, cancel=True)
        else:
            self._stream_failed(why)

    def _empty_reply(self) -> None:
        """STR-16: an empty 200 reply is sent again, a bounded number of times."""
        self._empties += 1
        if self._empties > MAX_EMPTY_REPLIES:
            self._surface("server", "The model kept returning empty replies")
        else:
            self._send()

    def _stream_failed(self, why: str) -> None:
        """The streaming body failed after the headers: withdraw, then fall back or surface."""
        attempt = self._close_attempt(cancel=True)
        if not self.b.discard_failed_tool_calls:
            # Broken copy: what the failed stream parsed is run (cut JSON repaired where it can
            # be), unawaited; recovery then goes on as usual.
            for c in attempt.reply.tool_calls:
                fn = c.get("function") or {}
                cid, name = str(c.get("id", "")), str(fn.get("name", ""))
                self._out.append(RunTool(cid, name, fn.get("arguments") or "{}", True))
        msg_id = attempt.reply.msg_id
        if msg_id is not None and self.b.remove_partial_messages:
            self._out.append(RemoveMessage(msg_id))
        if not self._fallback_allowed():
            self._step_failed("stream", f"The response stream failed: {why}", "")
            return
        if not self.b.fallback_after_first_cut:
            # Broken copy: the cut stream is retried like a reset, streaming, until the budget
            # is spent; only then does the non-streaming fallback come.
            self._attempt_failed(None, {}, f"stream failed ({why})", "reset", None)
            return
        self._fallback_why = f"stream failed ({why})"
        self._leak("server", f"The response stream failed: {why}")
        self._start_mode(False)

    def _on_full_body(self, text: str) -> None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            self._attempt_failed(None, {}, f"unreadable body: {exc.msg}", "reset", None)
            return
        reply = _parse_full(data)
        if reply is None:
            self._empty_reply()
            return
        reply.msg_id = self._new_id()
        self._show_reply(reply)
        self._got_reply(reply)

    def _attempt_failed(
        self,
        status: int | None,
        headers: Mapping[str, str],
        text: str,
        conn: str | None,
        received_at: datetime | None,
    ) -> None:
        overloaded = status == 529 or (status is not None and "overloaded_error" in text)
        self.overloads = self.overloads + 1 if overloaded else 0
        fb = self.config.get("fallback_model")
        if (
            self.b.model_fallback
            and fb
            and self.model != fb
            and self.overloads >= OVERLOADS_BEFORE_FALLBACK
        ):
            # Switch models and resend at once; the new model starts a fresh budget.
            self.model, self.overloads, self._retries = str(fb), 0, 0
            self._body = {
                **self._body,
                "model": self.model,
                "messages": strip_private(self._body["messages"]),
            }
            self._send()
            return
        if (
            self.b.credential_refresh
            and status == 401
            and "expired" in text.lower()
            and not self._refreshed
        ):
            # RTY-10: refresh the credentials once, resend the identical request at once.
            self._refreshed = True
            self._leak("auth", text)
            self._out.append(RefreshCredentials())
            self._send()
            return
        if (
            self.b.media_stripping
            and not self._media_stripped
            and is_media_error(status, text)
            and _has_media(self._body["messages"])
        ):
            # CTX-05: resend once without the media parts (kept out of later steps too).
            self._media_stripped = True
            self._leak("media_too_large", text)
            self.messages = strip_media(self.messages)
            self._body = {**self._body, "messages": strip_media(self._body["messages"])}
            self._send()
            return
        if status is None and conn not in retry.CONNECTION_ERROR_KINDS:
            conn = "reset"
        d = retry.decide(
            retries_done=self._retries,
            now=received_at or _EPOCH,
            rand=self._rand,
            status=status,
            connection_error=conn if status is None else None,
            headers=headers,
            honour_retry_after=self.b.honour_retry_after,
            backoff=self.b.backoff,
            cap=self.b.backoff_cap,
            max_retries=self._max_retries(),
        )
        allowed = d.retry
        if status is None and not self.b.retry_connection_errors:
            allowed = False
        if status is not None and status >= 500 and not self.b.retry_5xx:
            allowed = False
        if not allowed:
            exhausted = d.retry or self._retries > 0 or "after" in d.reason
            msg = f"{d.reason}: {text}" if text else d.reason
            if self._retries:
                msg += f" (after {self._retries} retries)"
            kind = d.kind
            if "context_length_exceeded" in text:
                kind = "prompt_too_long"
            elif is_media_error(status, text):
                kind = "media_too_large"
            self._surface(
                kind,
                msg,
                body=text,
                fallback_ok=exhausted
                and d.delay_s is None
                and (status is None or status in retry.RETRYABLE_STATUSES or status >= 500),
            )
            return
        self._leak(d.kind, d.reason)
        self._retries += 1
        self._out.append(NoteRetry(self._retries, d.delay_s, d.reason))
        self._wait_timer = self._start_timer(d.delay_s or 0.0, "wait")
        self.phase = Phase.WAIT

    def _max_retries(self) -> int | None:
        """Retries per request mode (RTY-04); the broken copies try one more, or never stop."""
        if not self.b.give_up_when_exhausted:
            return None
        return retry.MAX_RETRIES + (0 if self.b.retry_budget else 1)

    def _surface(
        self, kind: str, message: str, *, body: str = "", fallback_ok: bool = False
    ) -> None:
        """Recovery in this mode is over: fall back to non-streaming once, or fail the step."""
        if self._stream and fallback_ok and self._fallback_allowed():
            self._fallback_why = message
            self._start_mode(False)
            return
        if self._fallback_why is not None:
            message = f"{message}; {self._fallback_why}; after a non-streaming fallback"
        self._step_failed(kind, message, body)

    def _step_failed(self, kind: str, message: str, body: str) -> None:
        fixed = corrected_max_tokens(body)
        if fixed is not None and not self.b.window_correction:
            # Broken copy: the output-limit overflow is surfaced as it is (no other recovery).
            self._error(kind, self._named(message))
            return
        if fixed is not None and fixed < self.max_tokens and not self._lowered:
            self.max_tokens, self._lowered = fixed, True
            self._next_step()
            return
        if (
            kind == "prompt_too_long"
            and self.b.context_recovery
            and not self._compacted
            and (
                self.compaction_failures < MAX_COMPACTION_FAILURES or not self.b.compaction_breaker
            )
        ):
            self._compacted = True  # one reactive compaction per user turn
            self._pending_error = (kind, message)
            self._send_aux("compact", _compaction_body(self.model, self.messages))
            self.phase = Phase.COMPACT
            return
        self._error(kind, self._named(message))

    def _named(self, message: str) -> str:
        """The error text plus the turn-level recovery already tried (ERR-04)."""
        tried = []
        if self.model != str(self.start.get("model", "")):
            tried.append(f"model fallback to {self.model!r}")
        if self._compacted or self._proactive_tried:
            tried.append("compaction (summarized history)")
        return f"{message}; recovery tried: {', '.join(tried)}" if tried else message

    def _dump(self, payload: dict[str, Any], error: str) -> None:
        """Decide on a debug dump of a rejected request; the driver writes and redacts it."""
        if not self.start.get("debug_dir"):
            return
        self._dumps += 1
        record = {
            "messages": payload.get("messages"),
            "model": payload.get("model"),
            "config": self.config,
            "error": error,
        }
        self._out.append(WriteDebugDump(self._dumps, record))

    # ---- a reply -----------------------------------------------------------------------
    def _got_reply(self, reply: _Reply) -> None:
        self.loops.on_request_sent()
        self._refreshed = False  # a request got through: a later expiry may refresh again
        if reply.usage:
            for k in self.usage:
                self.usage[k] += _int(reply.usage.get(k))
            used = _int(reply.usage.get("prompt_tokens")) + _int(
                reply.usage.get("completion_tokens")
            )
            if used >= COMPACT_AT * self.context_window:
                self._compact_due = True
        if self.b.loop_detection and self._repeated(reply.content):
            # LOP-06, sent with the next request; a system note, as it is no user progress.
            self._reminders.append(REPEATED_TEXT_NOTE)
        truncated = reply.finish_reason == "length"
        if truncated and not reply.tool_calls:
            new = raised_limit(self.user_limit, self.max_tokens, already_raised=self._raised)
            if self.b.output_truncation and new is not None:
                # Resend the same messages with a larger limit; this reply is superseded.
                self._raised, self.max_tokens = True, new
                if reply.msg_id:
                    self._out.append(RemoveMessage(reply.msg_id))
                self._next_step()
                return
            if not self.b.continuation:
                self._done(reply)
                return
            if not self.counter.on_truncation(has_tool_calls=False) and self.b.bound_continuations:
                self._error("output_limit", OUTPUT_LIMIT_ERROR)
                return
            self._append(reply)
            self._add_notes()
            self._continue()
            self._next_step()
            return
        if not reply.tool_calls:
            self._done(reply)
            return
        self.counter.on_tool_calls()
        self._append(reply)
        self._calls = list(reply.tool_calls)
        self._truncated = truncated
        self._run_next_tool()

    def _repeated(self, text: str) -> bool:
        """LOP-06: the same non-empty reply text 3 times in a row (tool calls between count)."""
        norm = text.strip()
        if not norm:
            return False
        self._texts = self._texts + 1 if norm == self._last_text else 1
        self._last_text = norm
        return self._texts == TEXT_REPEATS

    def _add_notes(self) -> None:
        for note in self._reminders:
            # After all tool results, so the call/result pairing stays intact.
            role = "system" if note == REPEATED_TEXT_NOTE else "user"
            self.messages.append({"role": role, "content": note})
            self._show_message(role, note, meta=True)
        self._reminders = []

    def _continue(self) -> None:
        """The hidden continuation message: sent on the wire, shown as meta (TRN-01, TRN-02)."""
        self.messages.append({"role": "user", "content": CONTINUATION_TEXT})
        self._show_message("user", CONTINUATION_TEXT, meta=True)

    def _append(self, r: _Reply) -> None:
        wire = assistant_to_wire(
            r.content, r.reasoning, r.tool_calls, preserve_reasoning=self.b.reasoning_preservation
        )
        if wire is not None:
            self.messages.append(wire)

    def _done(self, reply: _Reply) -> None:
        self._append(reply)
        if self.config.get("stop_hook") and self.start.get("tool_endpoint"):
            self._out.append(CallStopHook())
            self.phase = Phase.STOP_HOOK
            return
        self._end("completed")

    def _run_next_tool(self) -> None:
        if not self._calls:
            self._add_notes()
            if self._truncated and self.b.continuation:
                # TRN-03: tools first, then the continuation, last; the count is not used.
                self._continue()
            self._next_step()
            return
        if self.calls_left <= 0:
            self._error("bad_request", "Too many tool calls in this turn; stopping.")
            return
        self.calls_left -= 1
        call = self._calls[0]
        fn = call.get("function") or {}
        cid, name = str(call.get("id", "")), str(fn.get("name", ""))
        raw = fn.get("arguments") or "{}"
        if self.b.background_tools and _backgrounded(fn.get("arguments")):
            # TRN-10: started, not waited for; its result is only logged.
            self._calls.pop(0)
            self._start_tool(cid, name, raw, background=True)
            self._out.append(ShowToolResult(cid, name, "ok", BACKGROUND_STARTED))
            self.messages.append(
                {"role": "tool", "tool_call_id": cid, "content": BACKGROUND_STARTED}
            )
            self._run_next_tool()
            return
        self._running = cid
        self.phase = Phase.TOOLS
        self._start_tool(cid, name, raw, background=False)

    # ---- the tool layer (tool_policy decides, the driver executes one attempt) ----------
    def _start_tool(self, cid: str, name: str, raw: str | dict, *, background: bool) -> None:
        chars = len(raw) if isinstance(raw, str) else len(json.dumps(raw))
        pre = precheck(
            name,
            raw,
            truncated=self._truncated,
            schemas=self._schemas,
            strict=self.b.strict_truncated_json,
        )
        if pre.parsed is None:
            # Unknown tool or invalid arguments: decided here, nothing is executed (TOL-01, TJS-*).
            self._log_tool(cid, name, pre.status, pre.output, 0.0, 0, chars)
            if not background:
                self._tool_result(cid, name, pre.status, pre.output)
            return
        args = pre.parsed.arguments or {}
        call = _ToolCall(cid, name, args, pre.parsed.warning, chars, self.now, background)
        self._tool_calls[cid] = call
        self._out.append(RunTool(cid, name, args, 1))
        if name != BATCH_TOOL:  # a batch is bounded item by item by its runner
            call.limit_timer = self._tool_timer(call, self.tool_timeout_s, "tool_limit")

    def _tool_timer(self, call: _ToolCall, delay_s: float, purpose: str) -> int:
        tid = self._start_timer(delay_s, purpose)
        self._tool_timers[tid] = call.call_id
        return tid

    def _drop_tool(self, call: _ToolCall) -> None:
        """The call is over: cancel its timers; later events about it are stale."""
        for tid in (call.limit_timer, call.retry_timer):
            if tid is not None:
                self._tool_timers.pop(tid, None)
                self._out.append(CancelTimer(tid))
        call.limit_timer = call.retry_timer = None
        self._tool_calls.pop(call.call_id, None)

    def _on_tool_outcome(self, event: ToolOutcome) -> None:
        call = self._tool_calls[event.call_id]
        call.running = False
        name, attempts = call.name, call.attempts
        if event.kind == "final":  # a batch, finished by its runner
            self._finish_tool(call, event.error_type or "error", event.text, 1, capped=True)
            return
        if event.kind == "transient":
            if call.attempts <= RETRIES:
                call.retry_timer = self._tool_timer(call, backoff_s(call.attempts), "tool_retry")
                return
            status, output = "error", unavailable_text(name, event.text)
        elif event.kind == "ok":
            status, output = "ok", event.text
        elif event.kind == "denied":
            status, output = "denied", denied_text(name, event.text)
        else:
            status, output = "error", error_text(name, event.error_type, event.text)
            if event.error_type == "unconfigured":
                attempts = 0  # nothing could be attempted
        self._finish_tool(call, status, output, attempts)

    def _on_tool_timer(self, timer_id: int) -> None:
        call = self._tool_calls[self._tool_timers.pop(timer_id)]
        if timer_id == call.retry_timer:
            call.retry_timer = None
            call.attempts += 1
            call.running = True
            self._out.append(RunTool(call.call_id, call.name, call.arguments, call.attempts))
            return
        # The time limit covers every attempt and wait of the call.
        call.limit_timer = None
        if call.running:
            self._out.append(CancelTool(call.call_id))
        call.running = False
        self._finish_tool(call, "timeout", timeout_text(call.name, self.tool_timeout_s), 1)

    def _finish_tool(
        self, call: _ToolCall, status: str, output: str, attempts: int, *, capped: bool = False
    ) -> None:
        self._drop_tool(call)
        if not capped:
            output = final_output(output, call.warning)
        self._log_tool(
            call.call_id,
            call.name,
            status,
            output,
            self.now - call.started,
            attempts,
            call.arguments_chars,
        )
        if not call.background:
            self._tool_result(call.call_id, call.name, status, output)

    def _log_tool(
        self,
        cid: str,
        name: str,
        status: str,
        output: str,
        duration: float,
        attempts: int,
        chars: int,
    ) -> None:
        if self.start.get("debug_dir"):
            record = log_record(cid, name, status, duration, attempts, chars, len(output))
            self._out.append(LogToolCall(record))

    def _tool_result(self, cid: str, name: str, status: str, output: str) -> None:
        """A foreground call's result: shown, added to the history, checked for loops."""
        call = self._calls.pop(0)
        self._running = None
        self._out.append(ShowToolResult(cid, name, status, output))
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": output})
        if self.b.loop_detection:
            args = (call.get("function") or {}).get("arguments")
            note = self.loops.record_tool(name, args, status != "ok")
            if note:
                self._reminders.append(note)
        self._run_next_tool()

    # ---- auxiliary requests --------------------------------------------------------------
    def _aux_result(self, event: Event) -> tuple[bool, str | None]:
        """(finished, body text of a 200 reply) for an auxiliary request's event."""
        attempt = self._attempt
        assert attempt is not None
        if isinstance(event, HeadersReceived):
            attempt.status = event.status
            return False, None
        self._close_attempt()
        if isinstance(event, BodyEnded) and attempt.status == 200:
            return True, event.body
        return True, None

    def _on_title(self, event: Event) -> None:
        # One attempt, never retried (RTY-09): its outcome does not matter to the turn.
        finished, _ = self._aux_result(event)
        if finished:
            self._next_step()

    def _on_compaction(self, event: Event) -> None:
        finished, text = self._aux_result(event)
        if not finished:
            return
        summary = _summary_of(text)
        proactive, self._proactive = self._proactive, False
        if summary is None:
            self.compaction_failures += 1
            if proactive:
                self._next_step()  # carry on uncompacted; the breaker bounds further tries
                return
            kind, message = self._pending_error or ("prompt_too_long", "Prompt too long")
            self._error(kind, f"{message}; the compaction (summarize) request failed")
            return
        self.compaction_failures = 0
        self.messages = [
            {"role": "user", "content": f"Summary of the conversation so far:\n{summary}"},
            {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": self.start.get("prompt", "")},
        ]
        self._next_step()


def _positive(value: Any) -> float | None:
    """A positive number of seconds from the config, else None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x > 0 else None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _tools_of(start: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("parameters") or {},
            },
        }
        for t in start.get("tools") or []
    ]


def _tool_name(entry: Mapping[str, Any]) -> str:
    return str((entry.get("function") or {}).get("name", ""))


def _parse_full(data: Any) -> _Reply | None:
    """A non-streaming reply, or None when it is empty (STR-16)."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return None
    ch = choices[0]
    msg = ch.get("message") or {}
    reply = _Reply(
        str(msg.get("content") or ""),
        str(msg.get("reasoning_content") or ""),
        list(msg.get("tool_calls") or []),
        ch.get("finish_reason"),
        data.get("usage") if isinstance(data.get("usage"), dict) else None,
    )
    if not (reply.content or reply.reasoning or reply.tool_calls):
        return None
    return reply


_MEDIA_WORDS = re.compile(r"\b(image|images|pdf|media|file|files|attachment|audio)\b", re.I)
_TOO_LARGE = re.compile(r"too (large|big)|exceeds?|maximum size|size limit", re.I)


def is_media_error(status: int | None, text: str) -> bool:
    """CTX-05: a 413, or a 400 whose error names media and says it is too large."""
    if status == 413:
        return True
    return status == 400 and bool(_MEDIA_WORDS.search(text) and _TOO_LARGE.search(text))


def _is_media_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in MEDIA_PART_TYPES


def _has_media(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list) and any(_is_media_part(p) for p in m["content"])
        for m in messages
    )


def strip_media(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every media content part replaced by a short text note."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(_is_media_part(p) for p in content):
            parts = [
                {"type": "text", "text": MEDIA_REMOVED} if _is_media_part(p) else p for p in content
            ]
            m = {**m, "content": parts}
        out.append(m)
    return out


def _backgrounded(arguments: Any) -> bool:
    """TRN-10: the call's arguments ask for ``run_in_background: true``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return False
    return isinstance(arguments, dict) and arguments.get("run_in_background") is True


def _summary_of(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        summary = json.loads(text)["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, TypeError, KeyError, IndexError):
        return None
    return str(summary) if summary else None


def _compaction_body(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A summarize request: no tools, non-streaming (docs/contracts.md §5, compaction)."""
    return {
        "model": model,
        "stream": False,
        "max_tokens": 2048,
        "messages": [
            {"role": "system", "content": COMPACT_PROMPT},
            {"role": "user", "content": json.dumps(messages, ensure_ascii=False)[-200000:]},
        ],
    }


def _title_body(start: Mapping[str, Any]) -> dict[str, Any]:
    """The background title request: non-streaming, no tools, never retried."""
    return {
        "model": start.get("model", ""),
        "stream": False,
        "max_tokens": 32,
        "messages": [
            {"role": "system", "content": TITLE_PROMPT},
            {"role": "user", "content": str(start.get("prompt", ""))},
        ],
    }
