"""The recovery core's tool layer: a reply's tool calls, one at a time, within the turn's cap.

:mod:`.tool_policy` decides (precheck, retries, texts, the output cap), the driver executes one
attempt at a time (``RunTool``) and reports its raw :class:`ToolOutcome`. An unknown name or
invalid arguments get their error result at once; a ``transient`` outcome is retried after a
``tool_retry`` timer; the ``tool_limit`` timer covers every attempt and wait of a call. A
``run_in_background`` call is started and not waited for (TRN-10). Loop reminders follow all
results, so the call/result pairing stays intact.
"""

from __future__ import annotations

import json
from typing import Any

from ._actions import CallStopHook, CancelTimer, CancelTool, LogToolCall, RunTool, ShowToolResult
from ._base import Reply, ToolCall
from ._events import TimerFired, ToolOutcome
from ._messages import BACKGROUND_STARTED, REPEATED_TEXT_NOTE, backgrounded
from ._requests import Requests
from ._transitions import Phase
from .continuation import CONTINUATION_TEXT, assistant_to_wire
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

__all__ = ["Tools"]


class Tools(Requests):
    """The tool layer; background calls finish in any live phase and leave it as it is."""

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
        self._show_message("user", CONTINUATION_TEXT, meta=self.b.hide_continuation)

    def _append(self, r: Reply) -> None:
        wire = assistant_to_wire(
            r.content, r.reasoning, r.tool_calls, preserve_reasoning=self.b.reasoning_preservation
        )
        if wire is not None:
            self.messages.append(wire)
        elif not self.b.drop_empty_turns:
            # Broken copy: the empty turn goes back into history as it came (RSN-03).
            self.messages.append({"role": "assistant", "content": ""})

    def _done(self, reply: Reply) -> Phase:
        self._append(reply)
        if self.config.get("stop_hook") and self.start.get("tool_endpoint"):
            self._out.append(CallStopHook())
            return Phase.STOP_HOOK
        return self._end("completed")

    def _run_next_tool(self) -> Phase:
        if not self._calls:
            self._add_notes()
            if self._truncated and self.b.continuation:
                # TRN-03: tools first, then the continuation, last; the count is not used.
                self._continue()
            return self._next_step()
        if self.calls_left <= 0 and self.b.tool_call_cap:
            return self._error("bad_request", "Too many tool calls in this turn; stopping.")
        self.calls_left -= 1
        call = self._calls[0]
        fn = call.get("function") or {}
        cid, name = str(call.get("id", "")), str(fn.get("name", ""))
        raw = fn.get("arguments") or "{}"
        if self.b.background_tools and backgrounded(fn.get("arguments")):
            # TRN-10: started, not waited for; its result is only logged.
            self._calls.pop(0)
            self._start_tool(cid, name, raw, background=True)
            self._out.append(ShowToolResult(cid, name, "ok", BACKGROUND_STARTED))
            self.messages.append(
                {"role": "tool", "tool_call_id": cid, "content": BACKGROUND_STARTED}
            )
            return self._run_next_tool()
        self._running = cid
        # A call decided at once (unknown tool, invalid arguments) leads on to the next one.
        return self._start_tool(cid, name, raw, background=False) or Phase.TOOLS

    # ---- the tool layer (tool_policy decides, the driver executes one attempt) ----------
    def _start_tool(
        self, cid: str, name: str, raw: str | dict[str, Any], *, background: bool
    ) -> Phase | None:
        """Start the call; the phase it led to if it was decided at once (foreground only)."""
        chars = len(raw) if isinstance(raw, str) else len(json.dumps(raw))
        pre = precheck(
            name,
            raw,
            truncated=self._truncated,
            schemas=self._schemas,
            strict=self.b.strict_truncated_json,
            b=self.b,
        )
        if pre.parsed is None:
            # Unknown tool or invalid arguments: decided here, nothing is executed (TOL-01, TJS-*).
            self._log_tool(cid, name, pre.status, pre.output, 0.0, 0, chars)
            if not background:
                return self._tool_result(cid, name, pre.status, pre.output)
            return None
        args = pre.parsed.arguments or {}
        call = ToolCall(cid, name, args, pre.parsed.warning, chars, self.now, background)
        self._tool_calls[cid] = call
        self._out.append(RunTool(cid, name, args, 1))
        # A batch is bounded item by item by its runner.
        if name != BATCH_TOOL and self.b.tool_time_limit:
            limit = self.tool_timeout_s * (1.0 if self.b.exact_tool_limit else 2.0)
            call.limit_timer = self._tool_timer(call, limit, "tool_limit")
        return None

    def _tool_timer(self, call: ToolCall, delay_s: float, purpose: str) -> int:
        tid = self._start_timer(delay_s, purpose)
        self._tool_timers[tid] = call.call_id
        return tid

    def _drop_tool(self, call: ToolCall) -> None:
        """The call is over: cancel its timers; later events about it are stale."""
        for tid in (call.limit_timer, call.retry_timer):
            if tid is not None:
                self._tool_timers.pop(tid, None)
                self._out.append(CancelTimer(tid))
        call.limit_timer = call.retry_timer = None
        self._tool_calls.pop(call.call_id, None)

    def _on_tool_outcome(self, event: ToolOutcome) -> Phase:
        call = self._tool_calls[event.call_id]
        call.running = False
        name, attempts = call.name, call.attempts
        if event.kind == "final":  # a batch, finished by its runner
            return self._finish_tool(call, event.error_type or "error", event.text, 1, capped=True)
        if event.kind == "denied" and not self.b.final_denials:
            event = ToolOutcome(event.call_id, "transient", event.text, event.error_type)
        if event.kind == "transient":
            if call.attempts <= RETRIES and self.b.retry_transient_tools:
                call.retry_timer = self._tool_timer(call, backoff_s(call.attempts), "tool_retry")
                return self.phase
            status, output = "error", unavailable_text(name, event.text)
        elif event.kind == "ok":
            status, output = "ok", event.text
        elif event.kind == "denied":
            status, output = "denied", denied_text(name, event.text)
        else:
            status, output = "error", error_text(name, event.error_type, event.text)
            if event.error_type == "unconfigured":
                attempts = 0  # nothing could be attempted
            elif not self.b.capture_tool_errors:
                # Broken copy: the tool's exception escapes the loop and ends the turn.
                self._drop_tool(call)
                return self._error("bad_request", f"Tool {name!r} raised: {event.text}")
        return self._finish_tool(call, status, output, attempts)

    def _on_tool_timer(self, event: TimerFired) -> Phase:
        timer_id = event.timer_id
        call = self._tool_calls[self._tool_timers.pop(timer_id)]
        if timer_id == call.retry_timer:
            call.retry_timer = None
            call.attempts += 1
            call.running = True
            self._out.append(RunTool(call.call_id, call.name, call.arguments, call.attempts))
            return self.phase
        # The time limit covers every attempt and wait of the call.
        call.limit_timer = None
        if call.running:
            self._out.append(CancelTool(call.call_id))
        call.running = False
        return self._finish_tool(call, "timeout", timeout_text(call.name, self.tool_timeout_s), 1)

    def _finish_tool(
        self, call: ToolCall, status: str, output: str, attempts: int, *, capped: bool = False
    ) -> Phase:
        """The call is over; a foreground call's result leads on, a background one's does not."""
        self._drop_tool(call)
        if not capped:
            output = final_output(output, call.warning, b=self.b)
        self._log_tool(
            call.call_id,
            call.name,
            status,
            output,
            self.now - call.started,
            attempts,
            call.arguments_chars,
        )
        if call.background:
            return self.phase
        return self._tool_result(call.call_id, call.name, status, output)

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
        if self.start.get("debug_dir") and self.b.tool_call_log:  # off: a broken copy (DBG-03)
            record = log_record(cid, name, status, duration, attempts, chars, len(output))
            self._out.append(LogToolCall(record))

    def _tool_result(self, cid: str, name: str, status: str, output: str) -> Phase:
        """A foreground call's result: shown, added to the history, checked for loops."""
        call = self._calls.pop(0)
        self._running = None
        if status in ("error", "timeout", "denied") and not self.b.keep_tool_errors_local:
            # Broken copy: the failure reaches the request retry, which resends the request
            # that asked for the tool, as if the chat request itself had failed.
            self._calls, self._reminders = [], []
            self.messages = list(self._body.get("messages") or [])
            return self._send()
        self._out.append(ShowToolResult(cid, name, status, output))
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": output})
        if self.b.loop_detection:
            args = (call.get("function") or {}).get("arguments")
            note = self.loops.record_tool(name, args, status != "ok")
            if note:
                self._reminders.append(note)
        return self._run_next_tool()
