"""The recovery core's state and plumbing: what every layer of :class:`TurnCore` shares.

The core is one class built in layers, each a module with one job: this base (the turn's state,
ids, timers, the end of the turn), :mod:`._requests` (steps, attempts, recovery), :mod:`._tools`
(the tool layer), :mod:`._replies` (bodies and replies) and :mod:`.core` (the transition-table
dispatch). Handlers return the phase the turn is in after them; only the dispatch assigns it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._actions import (
    Action,
    CancelRequest,
    CancelTimer,
    EmitMessage,
    EndTurn,
    ReportUsage,
    ShowError,
    StartTimer,
)
from ._behaviours import Behaviours
from ._messages import tool_name, tools_of
from ._transitions import Phase
from .continuation import DEFAULT_MAX_TOKENS, TruncationCounter
from .loops import LoopDetector

__all__ = ["EXTRA_STEPS", "Attempt", "CoreBase", "Reply", "ToolCall", "as_int"]

EXTRA_STEPS = 20  # steps beyond the tool-call cap: continuations, limit changes, compaction
DEFAULT_CONTEXT_WINDOW = 128000  # tokens; config.context_window overrides it


@dataclass
class Reply:
    """A model reply as it is assembled (streamed) or parsed (whole)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    msg_id: str | None = None


@dataclass
class Attempt:
    """One HTTP request in flight."""

    request_id: int
    purpose: str  # chat | title | compact
    stream: bool
    body: dict[str, Any]
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    received_at: datetime | None = None
    reply: Reply = field(default_factory=Reply)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ToolCall:
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


class CoreBase:
    """The state of one user turn and the plumbing every layer uses."""

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
        self.tools: list[dict[str, Any]] = []
        self._schemas: dict[str, Any] = {}
        self.offer(list(tools) if tools is not None else tools_of(self.start))
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
        self._attempt: Attempt | None = None
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
        self._tool_calls: dict[str, ToolCall] = {}  # executing calls, background ones too
        self._tool_timers: dict[int, str] = {}  # timer id -> call id
        self.tool_timeout_s = float(self.config.get("tool_timeout_s") or 120)
        # None: no limit of our own on waiting for response headers.
        self.request_timeout_s = _positive(self.config.get("request_timeout_s"))
        self._request_timer: int | None = None
        self._truncated = False
        self._reminders: list[str] = []
        self._last_text: str | None = None
        self._texts = 0  # how often in a row the reply text was _last_text
        self._refreshed = False  # RTY-10: one refresh until a request succeeds
        self._media_stripped = False  # CTX-05: media stripped once per turn
        self._compact_due = False  # the last reply's usage is near the context window
        self._proactive = False  # the compaction in flight is proactive (not an overflow)
        self._proactive_tried = False
        self.context_window = as_int(self.config.get("context_window")) or DEFAULT_CONTEXT_WINDOW

    @property
    def ended(self) -> bool:
        return self.phase is Phase.DONE

    def offer(self, tools: list[dict[str, Any]]) -> None:
        """The tools offered from the next request on (OpenAI ``tools`` entries); a call of
        another is unknown. The driver's word when its tool server lists other tools."""
        self.tools = list(tools)
        self._schemas = {
            tool_name(t): (t.get("function") or {}).get("parameters") or {} for t in self.tools
        }

    def _flush(self) -> list[Action]:
        out, self._out = self._out, []
        return out

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

    def _close_attempt(self, *, cancel: bool = False) -> Attempt:
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

    def _error(self, kind: str, message: str) -> Phase:
        self._out.append(ShowError(kind, message))
        return self._end("error")

    def _leak(self, kind: str, message: str) -> None:
        """Broken copy (``withhold_errors`` off): a failure about to be recovered is shown."""
        if not self.b.withhold_errors:
            self._out.append(ShowError(kind, message))

    def _end(self, reason: str) -> Phase:
        if reason != "aborted" and (self.usage["prompt_tokens"] or self.usage["completion_tokens"]):
            self._out.append(ReportUsage(**self.usage))
        self._out.append(EndTurn(reason))
        self.reason = reason
        return Phase.DONE


def _positive(value: Any) -> float | None:
    """A positive number of seconds from the config, else None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x > 0 else None


def as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
