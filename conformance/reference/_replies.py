"""The recovery core's body layer: a chat attempt's body, and what its reply leads to.

A non-200 body is the error text of a failed attempt. A streaming body that fails, goes idle,
carries a malformed or in-band error event, or ends without ``finish_reason`` withdraws its
partial message and falls back to non-streaming; its tool calls never run (STR-03). Once
``finish_reason`` has arrived, a failure or silence before ``[DONE]`` ends a complete reply
instead (STR-13). Empty replies are re-sent at most :data:`MAX_EMPTY_REPLIES` times (STR-16).
A reply: ``length`` without tool calls raises the output limit once, then continues (bounded);
tool calls run; usage near the context window makes the next step compact first; otherwise the
step and the turn are done.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ._actions import EmitMessage, RemoveMessage, RunTool
from ._base import Attempt, Reply, as_int
from ._events import BodyEnded, BodyFailed, Chunk, TimerFired
from ._messages import REPEATED_TEXT_NOTE
from ._requests import IDLE_TIMEOUT_S
from ._tools import Tools
from ._transitions import CoreError, Phase
from .continuation import OUTPUT_LIMIT_ERROR, raised_limit

__all__ = ["MAX_EMPTY_REPLIES", "Replies"]

MAX_EMPTY_REPLIES = 3  # bounded re-sends of empty 200 replies
TEXT_REPEATS = 3  # the same reply text this often in a row is a loop (LOP-06)
COMPACT_AT = 0.9  # proactive compaction once the last reply's usage fills this share


class Replies(Tools):
    """Body events of a chat attempt; each returns the phase the turn is in after it."""

    # ---- body events -------------------------------------------------------------------
    def _on_body_failed(self, event: BodyFailed) -> Phase:
        attempt = self._chat_attempt()
        if attempt.status != 200:
            self._close_attempt()
            return self._attempt_failed(attempt.status, attempt.headers, event.reason, None, None)
        if attempt.stream:
            return self._stream_broke(attempt, event.reason or "the body failed")
        self._close_attempt()
        return self._attempt_failed(None, {}, event.reason or "reset", "reset", None)

    def _on_body_ended(self, event: BodyEnded) -> Phase:
        attempt = self._chat_attempt()
        if attempt.status == 200 and attempt.stream:
            if not self.b.finish_completes:  # a broken copy: only [DONE] completes (STR-13)
                return self._stream_failed("stream ended without [DONE]")
            return self._stream_complete(attempt, cancel=False)
        self._close_attempt()
        if attempt.status != 200:
            text = event.body[:500]
            if attempt.status == 400:
                self._dump(attempt.body, text)
            return self._attempt_failed(
                attempt.status, attempt.headers, text, None, attempt.received_at
            )
        return self._on_full_body(event.body)

    def _on_idle(self, event: TimerFired) -> Phase:
        self._idle_timer = None  # it fired: nothing to cancel
        return self._stream_broke(self._chat_attempt(), "no data for the idle time limit")

    def _on_chunk(self, event: Chunk) -> Phase:
        attempt = self._chat_attempt()
        if attempt.status != 200 or not attempt.stream:
            raise CoreError(f"Chunk for request {attempt.request_id}, which is not a stream")
        data = event.data
        if data == "[DONE]":
            # Completion is judged by finish_reason; stop reading what may follow.
            return self._stream_complete(attempt, cancel=True)
        try:
            parsed = json.loads(data)
        except json.JSONDecodeError:
            if not self.b.contain_crashes:
                raise  # a broken copy: an unreadable event is a bug that takes it down (ERR-05)
            return self._stream_failed(f"malformed event: {data[:80]!r}")
        if not isinstance(parsed, dict) or "error" in parsed:
            return self._stream_failed(f"error event: {data[:200]}")
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
        return Phase.BODY

    def _chat_attempt(self) -> Attempt:
        attempt = self._attempt
        assert attempt is not None  # a body event is stale without one
        return attempt

    # ---- streams -----------------------------------------------------------------------
    def _show_reply(self, r: Reply) -> None:
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

    def _stream_complete(self, attempt: Attempt, *, cancel: bool) -> Phase:
        r = attempt.reply
        if r.finish_reason is None:
            return self._stream_failed("stream ended without finish_reason")
        self._close_attempt(cancel=cancel)
        if r.finish_reason != "length" and not (r.content or r.reasoning or r.tool_calls):
            return self._empty_reply()
        return self._got_reply(r)

    def _stream_broke(self, attempt: Attempt, why: str) -> Phase:
        """The stream broke off after its headers (reset, idle): done if it was already done.

        STR-13: completion is judged by the finish marker, so a break after ``finish_reason``
        and before ``[DONE]`` ends a complete reply; before it, the attempt failed.
        """
        if attempt.reply.finish_reason is not None and self.b.finish_completes:
            return self._stream_complete(attempt, cancel=True)
        return self._stream_failed(why)

    def _empty_reply(self) -> Phase:
        """STR-16: an empty 200 reply is sent again, a bounded number of times."""
        self._empties += 1
        if self._empties > MAX_EMPTY_REPLIES:
            return self._surface("server", "The model kept returning empty replies")
        return self._send()

    def _stream_failed(self, why: str) -> Phase:
        """The streaming body failed after the headers: withdraw, then fall back or surface."""
        attempt = self._close_attempt(cancel=True)
        if not self.b.successful_usage_only and attempt.reply.usage:
            # Broken copy: the failed attempt's usage is counted too (STR-11).
            for k in self.usage:
                self.usage[k] += as_int(attempt.reply.usage.get(k))
        if not self.b.discard_failed_tool_calls:
            # Broken copy: what the failed stream parsed is run (cut JSON repaired where it can
            # be), unawaited; recovery then goes on as usual. The raw argument text goes as
            # it is, unparsed: that is the bug this copy carries.
            for c in attempt.reply.tool_calls:
                fn = c.get("function") or {}
                cid, name = str(c.get("id", "")), str(fn.get("name", ""))
                raw = fn.get("arguments") or "{}"
                self._out.append(RunTool(cid, name, raw, True))  # type: ignore[arg-type]
        msg_id = attempt.reply.msg_id
        if msg_id is not None and self.b.remove_partial_messages:
            self._out.append(RemoveMessage(msg_id))
        if not self._fallback_allowed():
            return self._step_failed("stream", f"The response stream failed: {why}", "")
        if not self.b.fallback_after_first_cut:
            # Broken copy: the cut stream is retried like a reset, streaming, until the budget
            # is spent; only then does the non-streaming fallback come.
            return self._attempt_failed(None, {}, f"stream failed ({why})", "reset", None)
        self._fallback_why = f"stream failed ({why})"
        self._leak("server", f"The response stream failed: {why}")
        return self._start_mode(False)

    def _on_full_body(self, text: str) -> Phase:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return self._attempt_failed(None, {}, f"unreadable body: {exc.msg}", "reset", None)
        reply = _parse_full(data)
        if reply is None:
            return self._empty_reply()
        reply.msg_id = self._new_id()
        self._show_reply(reply)
        return self._got_reply(reply)

    # ---- a reply -----------------------------------------------------------------------
    def _got_reply(self, reply: Reply) -> Phase:
        self.loops.on_request_sent()
        self._refreshed = False  # a request got through: a later expiry may refresh again
        if reply.usage:
            for k in self.usage:
                self.usage[k] += as_int(reply.usage.get(k))
            used = as_int(reply.usage.get("prompt_tokens")) + as_int(
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
                return self._next_step()
            if not self.b.continuation:
                return self._done(reply)
            if not self.counter.on_truncation(has_tool_calls=False) and self.b.bound_continuations:
                return self._error("output_limit", OUTPUT_LIMIT_ERROR)
            if self.b.keep_partial_output:  # off, a broken copy: the cut reply is dropped (TRN-08)
                self._append(reply)
            self._add_notes()
            self._continue()
            return self._next_step()
        if not reply.tool_calls:
            return self._done(reply)
        # Broken copy (free_tool_truncation off): a truncated reply with tool calls is counted
        # like any other, and the turn gives up on it once the count is spent (TRN-06).
        spent = truncated and not self.b.free_tool_truncation
        if spent and not self.counter.on_truncation(has_tool_calls=False):
            return self._error("output_limit", OUTPUT_LIMIT_ERROR)
        if self.b.tool_calls_reset_count:  # off, a broken copy: the count runs on (TRN-05)
            self.counter.on_tool_calls()
        self._append(reply)
        self._calls = list(reply.tool_calls)
        self._truncated = truncated
        return self._run_next_tool()

    def _repeated(self, text: str) -> bool:
        """LOP-06: the same non-empty reply text 3 times in a row (tool calls between count)."""
        norm = text.strip()
        if not norm:
            return False
        self._texts = self._texts + 1 if norm == self._last_text else 1
        self._last_text = norm
        return self._texts == TEXT_REPEATS


def _parse_full(data: Any) -> Reply | None:
    """A non-streaming reply, or None when it is empty (STR-16)."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return None
    ch = choices[0]
    msg = ch.get("message") or {}
    reply = Reply(
        str(msg.get("content") or ""),
        str(msg.get("reasoning_content") or ""),
        list(msg.get("tool_calls") or []),
        ch.get("finish_reason"),
        data.get("usage") if isinstance(data.get("usage"), dict) else None,
    )
    if not (reply.content or reply.reasoning or reply.tool_calls):
        return None
    return reply
