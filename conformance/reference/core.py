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

Transitions as data: :data:`TRANSITIONS` (module :mod:`._transitions`) maps (phase, event) to a
handler and the phases the turn may be in after it; a timer event is keyed by the timer's role.
:meth:`TurnCore.handle` looks the row up, runs the handler and assigns the phase it returns, which
the row must list (several phases: the handler decides among those). :data:`ACCEPTS`, the events
each phase accepts, is derived from the table. An event about a request, timer or tool call the
core no longer waits for is stale and ignored; any other event without a row is a driver bug and
raises :class:`CoreError`.

The core is built in layers, one module each: :mod:`._base` (state, ids, timers, the end of the
turn), :mod:`._requests` (steps, modes, attempts, auxiliary requests), :mod:`._recovery` (the
ordered recovery policies for a failed attempt and a failed step), :mod:`._tools` (the tool
layer), :mod:`._replies` (bodies and replies) and this module (the dispatch, begin and abort).
"""

from __future__ import annotations

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
from ._base import EXTRA_STEPS
from ._behaviours import Behaviours
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
from ._messages import (
    MISSING_RESULT,
    PRIVATE_CALL_FIELDS,
    PRIVATE_FIELDS,
    corrected_max_tokens,
    is_media_error,
    repair_history,
    sanitize_history,
    strip_media,
    strip_private,
    title_body,
)
from ._recovery import MAX_COMPACTION_FAILURES, OVERLOADS_BEFORE_FALLBACK
from ._replies import MAX_EMPTY_REPLIES, Replies
from ._requests import IDLE_TIMEOUT_S
from ._transitions import ACCEPTS, TRANSITIONS, Begin, CoreError, Key, Phase, Timer

__all__ = [
    "ACCEPTS",
    "EXTRA_STEPS",
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
    "TRANSITIONS",
    "TimerFired",
    "ToolOutcome",
    "TurnCore",
    "WriteDebugDump",
    "corrected_max_tokens",
    "repair_history",
    "sanitize_history",
    "is_media_error",
    "strip_media",
    "strip_private",
]


class TurnCore(Replies):
    """One user turn of the reference agent, without I/O. See the module docstring."""

    # ---- public interface --------------------------------------------------------------
    def begin(self, now: float = 0.0) -> list[Action]:
        """Start the turn: history repair, the optional title request, the first request."""
        if self.phase is not Phase.START:
            raise CoreError(f"begin() called twice (phase {self.phase.value})")
        self.now = now
        return self._dispatch(Begin(), Begin)

    def handle(self, event: Event, now: float = 0.0) -> list[Action]:
        """Feed one event; returns the actions to carry out, in order."""
        self.now = now
        if self.phase is Phase.START:
            raise CoreError("handle() before begin()")
        if self.phase is Phase.DONE or self._stale(event):
            return []
        return self._dispatch(event, self._key(event))

    # ---- the dispatch ------------------------------------------------------------------
    def _dispatch(self, event: Event, key: Key) -> list[Action]:
        """Run the table's handler for (phase, key) and take the phase it returns."""
        row = TRANSITIONS.get((self.phase, key))
        if row is None:
            raise CoreError(
                f"{type(event).__name__} cannot be handled in phase {self.phase.value!r}; "
                f"it accepts {sorted(t.__name__ for t in ACCEPTS[self.phase])}"
            )
        if isinstance(event, HeadersReceived):
            self._disarm_request_timer()
        phase = getattr(self, row.handler)(event)
        if phase not in row.next:
            # A core bug: the code led somewhere the table does not list.
            raise CoreError(
                f"{row.handler} led from phase {self.phase.value!r} to {phase!r}; the table "
                f"allows {sorted(p.value for p in row.next)}"
            )
        self.phase = phase
        return self._flush()

    def _key(self, event: Event) -> Key:
        """The table key of a live event: its type, or for a timer its role."""
        if not isinstance(event, TimerFired):
            return type(event)
        tid = event.timer_id
        if tid in self._tool_timers:
            return Timer.TOOL
        if tid == self._request_timer:
            return Timer.REQUEST
        return Timer.IDLE if tid == self._idle_timer else Timer.WAIT

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

    # ---- handlers of the table that belong to no layer ------------------------------------
    def _on_begin(self, event: Begin) -> Phase:
        messages = list(self.start.get("history") or [])
        if self.b.history_repair:
            repaired, added = repair_history(messages, drop=not self.b.placeholder_repair)
            # A broken copy (training_mode_refusal off) repairs in training-data mode (CTX-04).
            if added and self.config.get("training_data_mode") and self.b.training_mode_refusal:
                # Fabricated results would poison training data: refuse instead of repairing.
                return self._error(
                    "bad_request",
                    f"History has {added} tool call(s) without results; training-data mode "
                    "refuses to add placeholder results.",
                )
            messages = repaired
        if self.b.drop_empty_turns:  # off, a broken copy: history goes out as given (RSN-03)
            messages = sanitize_history(messages, preserve_reasoning=self.b.reasoning_preservation)
        messages.append({"role": "user", "content": self.start.get("prompt", "")})
        self.messages = messages
        if self.config.get("background_title"):
            self._send_aux("title", title_body(self.start))
            return Phase.TITLE
        return self._next_step()

    def _on_wait_over(self, event: TimerFired) -> Phase:
        self._wait_timer = None
        if not self.b.identical_retries:
            # Broken copy: the retry is rebuilt with a note of the attempt in it (RTY-12).
            note = {"role": "user", "content": f"(attempt {self._retries + 1})"}
            self._body = {**self._body, "messages": [*self._body["messages"], note]}
        return self._send()

    def _on_stop_hook(self, event: StopHookDone) -> Phase:
        if event.blocked is not None:
            self._show_message("system", f"Stop hook blocked: {event.blocked}")
            if not self.b.hook_block_final and self._hook_reruns < 2:
                # Broken copy: the block is fed back and the turn run again (CTL-02).
                self._hook_reruns += 1
                self.messages.append({"role": "user", "content": f"Stop hook: {event.blocked}"})
                return self._next_step()
        return self._end("completed")

    def _on_abort(self, event: Aborted) -> Phase:
        if not self.b.stop_on_abort:
            return self._abort_ignored()
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
        return self._end("aborted")

    def _abort_ignored(self) -> Phase:
        """Broken copy (``stop_on_abort`` off): the abort is taken for a failed attempt."""
        attempt = self._attempt
        if attempt is None or attempt.purpose != "chat":
            return self.phase  # waiting or running a tool: carry on as if nothing happened
        if self.phase is Phase.BODY and attempt.stream and attempt.status == 200:
            return self._stream_failed("aborted by the user")  # falls back to non-streaming
        self._close_attempt(cancel=True)
        return self._attempt_failed(None, {}, "aborted by the user", "reset", None)
