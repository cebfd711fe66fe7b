"""The recovery core's request layer: steps, modes, attempts, their failures, aux requests.

A step is one model request (a body); it is tried streaming, then at most once non-streaming,
each mode with its own retry budget; an attempt is one HTTP request of a mode. A failed attempt
goes through the ordered :data:`~._recovery.ATTEMPT_POLICIES`; when a mode's recovery is over
the step falls back to non-streaming once, or fails through :data:`~._recovery.STEP_POLICIES`.
The title and compaction requests are auxiliary: one attempt each, never retried.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from . import retry
from ._actions import CancelRequest, SendRequest, WriteDebugDump
from ._base import Attempt, CoreBase
from ._events import BodyEnded, ConnectFailed, Event, HeadersReceived, TimerFired
from ._messages import compaction_body, strip_private, summary_of, tool_name
from ._recovery import (
    ATTEMPT_POLICIES,
    MAX_COMPACTION_FAILURES,
    OVERLOADS_BEFORE_FALLBACK,
    STEP_POLICIES,
    AttemptFailure,
    StepFailure,
)
from ._transitions import TRANSITIONS, CoreError, Phase

__all__ = ["IDLE_TIMEOUT_S", "OVERLOADS_BEFORE_FALLBACK", "Requests"]

IDLE_TIMEOUT_S = 60.0  # unscaled: no chunk for this long = stream failure


class Requests(CoreBase):
    """Steps and attempts; every method that leads on returns the phase it leads to."""

    # ---- steps -------------------------------------------------------------------------
    def _next_step(self) -> Phase:
        if self._compact_due:
            self._compact_due = False
            if self.compaction_failures < MAX_COMPACTION_FAILURES or not self.b.compaction_breaker:
                # LOP-05: compact before the window overflows; a failure is not fatal.
                self._proactive = self._proactive_tried = True
                self._send_aux("compact", compaction_body(self.model, self.messages))
                return Phase.COMPACT
        if self.steps_left <= 0:
            return self._error("bad_request", "Turn step limit reached.")
        self.steps_left -= 1
        first = self.model == str(self.start.get("model", ""))
        wire = list(self.messages) if first else strip_private(self.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "max_tokens": self.max_tokens,
        }
        blocked = self.loops.blocked_tools() if self.b.loop_detection else set()
        offered = [t for t in self.tools if tool_name(t) not in blocked]
        if offered:
            body["tools"] = offered
        self._body = body
        self._fallback_why = None
        return self._start_mode(self.start.get("stream", True) is not False)

    def _start_mode(self, stream: bool) -> Phase:
        self._stream = stream
        self._retries = 0
        self._empties = 0
        return self._send()

    def _send(self) -> Phase:
        self._request_ids += 1
        body = {**self._body, "stream": self._stream}
        self._attempt = Attempt(self._request_ids, "chat", self._stream, body)
        self._out.append(SendRequest(self._request_ids, body, "chat"))
        self._arm_request_timer()
        return Phase.REQUEST

    def _send_aux(self, purpose: str, body: dict[str, Any]) -> None:
        self._request_ids += 1
        self._attempt = Attempt(self._request_ids, purpose, False, body)
        self._out.append(SendRequest(self._request_ids, body, purpose))
        self._arm_request_timer()

    def _fallback_allowed(self) -> bool:
        switched_off = self.config.get("stream_fallback", True) is False
        # A broken copy (fallback_switch off) ignores the configured switch (STR-12).
        return self.b.stream_fallback and not (switched_off and self.b.fallback_switch)

    # ---- a chat attempt before its body --------------------------------------------------
    def _on_connect_failed(self, event: ConnectFailed) -> Phase:
        self._close_attempt()
        return self._attempt_failed(None, {}, event.reason or event.kind, event.kind, None)

    def _on_headers(self, event: HeadersReceived) -> Phase:
        attempt = self._attempt
        assert attempt is not None
        attempt.status, attempt.headers = event.status, dict(event.headers)
        attempt.received_at = event.received_at
        if event.status == 200 and attempt.stream and self.b.idle_watchdog:
            self._idle_timer = self._start_timer(IDLE_TIMEOUT_S, "idle")
        return Phase.BODY

    def _on_request_timeout(self, event: TimerFired) -> Phase:
        """No headers within ``request_timeout_s``: give the attempt up as a connection-level
        timeout, handled like any failure before headers (retry, budget, fallback)."""
        self._request_timer = None  # it fired: nothing to cancel
        attempt = self._attempt
        assert attempt is not None  # the timer is disarmed whenever an attempt closes
        self._out.append(CancelRequest(attempt.request_id))
        reason = f"no response headers within {self.request_timeout_s:g} s"
        failed = ConnectFailed(attempt.request_id, "timeout", reason)
        # The phase's own row for a failed connection (chat, title or compaction) takes it.
        handler: Callable[[ConnectFailed], Phase]
        handler = getattr(self, TRANSITIONS[(self.phase, ConnectFailed)].handler)
        return handler(failed)

    # ---- failures ----------------------------------------------------------------------
    def _attempt_failed(
        self,
        status: int | None,
        headers: Mapping[str, str],
        text: str,
        conn: str | None,
        received_at: datetime | None,
    ) -> Phase:
        overloaded = status == 529 or (status is not None and "overloaded_error" in text)
        self.overloads = self.overloads + 1 if overloaded else 0
        failure = AttemptFailure(status, headers, text, conn, received_at)
        for policy in ATTEMPT_POLICIES:
            phase = policy(self, failure)
            if phase is not None:
                return phase
        raise CoreError("no recovery policy took the failed attempt")  # the last one always does

    def _max_retries(self) -> int | None:
        """Retries per request mode (RTY-04); the broken copies try one more, or never stop."""
        if not self.b.give_up_when_exhausted:
            return None
        return retry.MAX_RETRIES + (0 if self.b.retry_budget else 1)

    def _surface(
        self, kind: str, message: str, *, body: str = "", fallback_ok: bool = False
    ) -> Phase:
        """Recovery in this mode is over: fall back to non-streaming once, or fail the step."""
        if self._stream and fallback_ok and self._fallback_allowed():
            self._fallback_why = message
            return self._start_mode(False)
        if self._fallback_why is not None:
            message = f"{message}; {self._fallback_why}; after a non-streaming fallback"
        return self._step_failed(kind, message, body)

    def _step_failed(self, kind: str, message: str, body: str) -> Phase:
        failure = StepFailure(kind, message, body)
        for policy in STEP_POLICIES:
            phase = policy(self, failure)
            if phase is not None:
                return phase
        raise CoreError("no recovery policy took the failed step")  # the last one always does

    def _named(self, message: str) -> str:
        """The error text plus the turn-level recovery already tried (ERR-04)."""
        if not self.b.name_recovery_tried:
            return message  # a broken copy: the error says nothing of what was tried
        tried = []
        if self.model != str(self.start.get("model", "")):
            tried.append(f"model fallback to {self.model!r}")
        if self._compacted or self._proactive_tried:
            tried.append("compaction (summarized history)")
        return f"{message}; recovery tried: {', '.join(tried)}" if tried else message

    def _dump(self, payload: dict[str, Any], error: str) -> None:
        """Decide on a debug dump of a rejected request; the driver writes and redacts it."""
        if not self.start.get("debug_dir") or not self.b.debug_dump:
            return  # no directory given; or a broken copy that never dumps (DBG-01)
        self._dumps += 1
        record = {
            "messages": payload.get("messages"),
            "model": payload.get("model"),
            "config": self.config,
            "error": error,
        }
        self._out.append(WriteDebugDump(self._dumps, record))

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

    def _on_title(self, event: Event) -> Phase:
        # One attempt, never retried (RTY-09): its outcome does not matter to the turn.
        attempt = self._attempt
        assert attempt is not None
        finished, _ = self._aux_result(event)
        if not finished:
            return Phase.TITLE
        if not self.b.aux_single_attempt and attempt.status in (429, 529) and self._aux_resends < 3:
            # Broken copy: the background request is retried like the turn's own (RTY-09).
            self._aux_resends += 1
            self._send_aux("title", attempt.body)
            return Phase.TITLE
        return self._next_step()

    def _on_compaction(self, event: Event) -> Phase:
        finished, text = self._aux_result(event)
        if not finished:
            return Phase.COMPACT
        summary = summary_of(text)
        proactive, self._proactive = self._proactive, False
        if summary is None:
            self.compaction_failures += 1
            if proactive:
                return self._next_step()  # carry on uncompacted; the breaker bounds further tries
            kind, message = self._pending_error or ("prompt_too_long", "Prompt too long")
            return self._error(kind, f"{message}; the compaction (summarize) request failed")
        self.compaction_failures = 0
        self.messages = [
            {"role": "user", "content": f"Summary of the conversation so far:\n{summary}"},
            {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": self.start.get("prompt", "")},
        ]
        return self._next_step()
