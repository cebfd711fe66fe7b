"""Hypothesis stateful tests of the recovery core: arbitrary fault schedules, five invariants.

The machine plays gateway, timers, tool host and user against one ``TurnCore``: it answers the
request in flight with statuses (with and without Retry-After), resets, cuts, streams that end
without a finish, malformed and in-band error events, ``length`` finishes with cut tool JSON,
empty replies; it fires timers (a tool's time limit and retry waits included), answers tool
attempts with raw outcomes (ok, error, transient, denied), and aborts. Checked always:
the turn ends at most once and nothing follows ``EndTurn``; nothing is sent after an abort;
every request pairs each tool call with exactly one result; no assistant message without
content and without tool calls is sent; requests stay within the caps; only the tool calls of
the reply just completed run, never those of a failed attempt (STR-03). At teardown a hostile
schedule must bring any unfinished turn to its end within a bounded number of events.
"""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from conformance.reference.continuation import RAISED_MAX_TOKENS
from conformance.reference.core import (
    EXTRA_STEPS,
    MAX_EMPTY_REPLIES,
    Aborted,
    BodyEnded,
    BodyFailed,
    CancelRequest,
    CancelTimer,
    CancelTool,
    Chunk,
    ConnectFailed,
    EndTurn,
    HeadersReceived,
    RunTool,
    SendRequest,
    ShowToolResult,
    StartTimer,
    StopHookDone,
    TimerFired,
    ToolOutcome,
    TurnCore,
)
from conformance.reference.retry import MAX_DELAY_S, MAX_RETRIES, MAX_RETRY_AFTER_S
from conformance.reference.tool_policy import RETRIES as TOOL_RETRIES

OVERFLOW = '{"error": {"code": "context_length_exceeded", "message": "too long"}}'
WINDOW = "maximum context length is 9000 tokens. However, you requested 8000 in the messages"
# One identical body is sent at most this often in a row: the first try, the retries, the
# re-sends of empty replies (a model switch changes the body).
MAX_IDENTICAL = 1 + MAX_RETRIES + MAX_EMPTY_REPLIES

# Fault schedules for the teardown: fault names cycled one per event.
HOSTILE = {
    "cut_calls": ["call_cut", "call_cut", "tool_length"],
    "cycle": ["503", "tool_length", "reset", "no_finish", "429", "overflow"],
    "tools": ["tool_length"],
    "503": ["503"],
    "reset": ["reset"],
    "no_finish": ["no_finish"],
}

TOOL_FAULTS = ["transient", "error", "transient", "denied", "transient", "ok"]
statuses = st.sampled_from([400, 401, 404, 408, 429, 500, 503, 529])
retry_headers = st.sampled_from(
    [{}, {"Retry-After": "2"}, {"retry-after-ms": "300"}, {"Retry-After": "3600"}, {}]
)
error_bodies = st.sampled_from(["", "oops", OVERFLOW, WINDOW])


def _chunk(delta: dict, finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


class TurnMachine(RuleBasedStateMachine):
    @initialize(
        max_calls=st.integers(1, 4),
        stream=st.sampled_from([True, False]),  # streaming first: more to go wrong
        user_limit=st.sampled_from([None, 1000]),
        fallback=st.sampled_from([None, "fb"]),
        title=st.booleans(),
        stop_hook=st.booleans(),
        unpaired_history=st.booleans(),
        seed=st.integers(0, 2**16),
        hostile=st.sampled_from(list(HOSTILE)),
    )
    def start(
        self,
        max_calls,
        stream,
        user_limit,
        fallback,
        title,
        stop_hook,
        unpaired_history,
        seed,
        hostile,
    ):
        self.hostile = HOSTILE[hostile]
        history = []
        if unpaired_history:
            history = [
                {"role": "user", "content": "before"},
                {"role": "assistant", "content": "", "tool_calls": [_call("h1")]},
                {"role": "assistant", "content": ""},
            ]
        self.max_calls = max_calls
        start = {
            "model": "m",
            "prompt": "go",
            "stream": stream,
            "history": history,
            "tools": [{"name": "read", "parameters": {"type": "object"}}],
            "tool_endpoint": "http://tools",
            "config": {
                "max_tool_calls": max_calls,
                "max_output_tokens": user_limit,
                "fallback_model": fallback,
                "background_title": title,
                "stop_hook": stop_hook,
            },
        }
        self.core = TurnCore(start, rand=random.Random(seed).random)
        self.log: list = []
        self.aborted_at: int | None = None  # index in log when the abort was fed
        self.req: SendRequest | None = None
        self.req_state = "none"  # none | sent | stream | full | error | done
        self.timers: dict[int, StartTimer] = {}
        self.tool: RunTool | None = None
        self.hook = False
        self.old_requests: list[int] = []
        self.calls = 0  # tool call ids handed out
        self.origin: dict[str, int] = {}  # tool call id -> the request whose reply carried it
        self.last_chat = 0  # id of the latest chat request
        self.events = 0
        self._take(self.core.begin(0.0))

    # ---- plumbing -------------------------------------------------------------------------
    def _take(self, actions: list) -> None:
        if self.log and isinstance(self.log[-1], EndTurn):
            assert actions == [], f"actions after EndTurn: {actions}"
        self.log += actions
        for a in actions:
            if isinstance(a, SendRequest):
                if a.purpose == "chat":
                    self.last_chat = a.request_id
                if self.req is not None:
                    self.old_requests.append(self.req.request_id)
                self.req, self.req_state = a, "sent"
            elif isinstance(a, CancelRequest) and self.req and a.request_id == self.req.request_id:
                self.req_state = "done"
            elif isinstance(a, StartTimer):
                self.timers[a.timer_id] = a
            elif isinstance(a, CancelTimer):
                self.timers.pop(a.timer_id, None)
            elif isinstance(a, RunTool):
                if a.attempt == 1:
                    # STR-03: only calls of the reply just completed run, never a failed
                    # attempt's.
                    assert self.origin.get(a.call_id) == self.last_chat, (a, self.origin)
                self.tool = a
            elif isinstance(a, CancelTool) and self.tool and a.call_id == self.tool.call_id:
                self.tool = None  # its time limit ran out
            elif type(a).__name__ == "CallStopHook":
                self.hook = True

    def feed(self, event) -> list:
        self.events += 1
        out = self.core.handle(event, float(self.events))
        self._take(out)
        return out

    @property
    def live(self) -> bool:
        return not self.core.ended

    def _new_call(self) -> str:
        self.calls += 1
        self.origin[f"c{self.calls}"] = self.req.request_id
        return f"c{self.calls}"

    # ---- the gateway ----------------------------------------------------------------------
    @precondition(lambda self: self.live and self.req_state == "sent")
    @rule(kind=st.sampled_from(["reset", "timeout", "refused"]))
    def connect_fails(self, kind):
        self.req_state = "done"
        self.feed(ConnectFailed(self.req.request_id, kind, "no"))

    @precondition(lambda self: self.live and self.req_state == "sent")
    @rule(status=statuses, headers=retry_headers, body=error_bodies)
    def error_status(self, status, headers, body):
        rid = self.req.request_id
        self.req_state = "error"
        self.feed(HeadersReceived(rid, status, headers, None))
        if self.req_state == "error":
            self.req_state = "done"
            self.feed(BodyEnded(rid, body))

    @precondition(lambda self: self.live and self.req_state == "sent")
    @rule()
    def headers_ok(self):
        self.req_state = "stream" if self.req.body.get("stream") else "full"
        self.feed(HeadersReceived(self.req.request_id, 200, {}, None))

    @precondition(lambda self: self.live and self.req_state == "stream")
    @rule(
        kind=st.sampled_from(
            ["text", "reasoning", "call", "cut_call", "stop", "length", "calls_done"]
            + ["malformed", "in_band", "done", "usage"]
        )
    )
    def chunk(self, kind):
        data = {
            "text": _chunk({"content": "hi "}),
            "reasoning": _chunk({"reasoning_content": "hmm "}),
            "call": _chunk({"tool_calls": [_delta_call(self._new_call(), '{"path": "a"}')]}),
            "cut_call": _chunk({"tool_calls": [_delta_call(self._new_call(), '{"path": "a')]}),
            "stop": _chunk({}, "stop"),
            "length": _chunk({}, "length"),
            "calls_done": _chunk({}, "tool_calls"),
            "malformed": "{not json",
            "in_band": json.dumps({"error": {"message": "upstream"}}),
            "done": "[DONE]",
            "usage": json.dumps({"choices": [], "usage": {"prompt_tokens": 3}}),
        }[kind]
        self.feed(Chunk(self.req.request_id, data))

    @precondition(lambda self: self.live and self.req_state == "stream")
    @rule()
    def stream_ends(self):
        self.req_state = "done"
        self.feed(BodyEnded(self.req.request_id))

    @precondition(lambda self: self.live and self.req_state in ("stream", "full"))
    @rule(reason=st.sampled_from(["reset", "cut", "timeout"]))
    def body_fails(self, reason):
        self.req_state = "done"
        self.feed(BodyFailed(self.req.request_id, reason))

    @precondition(lambda self: self.live and self.req_state == "full")
    @rule(
        kind=st.sampled_from(
            ["text", "length_text", "calls", "length_cut_calls", "reasoning_length"]
            + ["empty", "no_choices", "garbage"]
        )
    )
    def full_body(self, kind):
        calls = [_call(self._new_call()), _call(self._new_call(), '{"path": "b')]
        message, finish = {
            "text": ({"content": "done"}, "stop"),
            "length_text": ({"content": "part"}, "length"),
            "calls": ({"content": None, "tool_calls": calls[:1]}, "tool_calls"),
            "length_cut_calls": ({"content": "x", "tool_calls": calls}, "length"),
            "reasoning_length": ({"content": "", "reasoning_content": "r"}, "length"),
            "empty": ({"content": ""}, "stop"),
            "no_choices": (None, None),
            "garbage": (None, None),
        }[kind]
        if kind == "garbage":
            body = "<html>"
        elif message is None:
            body = json.dumps({"choices": []})
        else:
            body = json.dumps({"choices": [{"message": message, "finish_reason": finish}]})
        self.req_state = "done"
        self.feed(BodyEnded(self.req.request_id, body))

    # ---- timers, tools, hooks, user -------------------------------------------------------
    @precondition(lambda self: self.live and self.timers)
    @rule(data=st.data())
    def timer_fires(self, data):
        tid = data.draw(st.sampled_from(sorted(self.timers)))
        timer = self.timers.pop(tid)
        out = self.feed(TimerFired(tid))
        if timer.purpose == "idle" and self.req_state == "stream":
            assert any(isinstance(a, CancelRequest) for a in out)
            self.req_state = "done"

    @precondition(lambda self: self.live and self.tool is not None)
    @rule(status=st.sampled_from(["ok", "error", "transient", "denied", "transient"]))
    def tool_returns(self, status):
        t, self.tool = self.tool, None
        out = "no" if status != "ok" else "content"
        self.feed(ToolOutcome(t.call_id, status, out, "boom" if status == "error" else ""))

    @precondition(lambda self: self.live and self.hook)
    @rule(blocked=st.sampled_from([None, "not yet"]))
    def stop_hook_returns(self, blocked):
        self.hook = False
        self.feed(StopHookDone(blocked))

    @precondition(lambda self: self.live)
    @rule(dice=st.integers(0, 7))
    def user_aborts(self, dice):
        if dice:
            return  # an abort ends everything: keep it rare so that schedules get long
        self.aborted_at = len(self.log)
        out = self.feed(Aborted())
        assert out[-1] == EndTurn("aborted")

    @precondition(lambda self: self.old_requests)
    @rule(data=st.data())
    def stale_events_are_ignored(self, data):
        rid = data.draw(st.sampled_from(self.old_requests))
        assert self.feed(BodyFailed(rid, "late")) == []
        assert self.feed(Chunk(rid, "[DONE]")) == []

    @precondition(lambda self: self.core.ended)
    @rule(rid=st.integers(1, 50), tid=st.integers(1, 50))
    def events_after_the_end_do_nothing(self, rid, tid):
        for event in (Aborted(), TimerFired(tid), BodyFailed(rid, "late"), StopHookDone(None)):
            assert self.core.handle(event, 0.0) == []

    # ---- invariants -----------------------------------------------------------------------
    @invariant()
    def turn_ends_once_and_last(self):
        ends = [i for i, a in enumerate(self.log) if isinstance(a, EndTurn)]
        assert len(ends) <= 1
        if ends:
            assert ends[0] == len(self.log) - 1 and self.core.ended

    @invariant()
    def nothing_sent_after_abort(self):
        if self.aborted_at is None:
            return
        after = self.log[self.aborted_at :]
        cancels = (CancelRequest, CancelTimer, CancelTool, EndTurn)
        assert all(isinstance(a, cancels) for a in after), after

    @invariant()
    def every_request_pairs_each_tool_call_with_one_result(self):
        for s in self._sent():
            msgs = s.body["messages"]
            for i, m in enumerate(msgs):
                if m.get("role") != "assistant" or not m.get("tool_calls"):
                    continue
                results = []
                for n in msgs[i + 1 :]:
                    if n.get("role") != "tool":
                        break
                    results.append(n["tool_call_id"])
                assert sorted(results) == sorted(c["id"] for c in m["tool_calls"]), (m, results)

    @invariant()
    def no_empty_assistant_message_is_sent(self):
        for s in self._sent():
            for m in s.body["messages"]:
                if m.get("role") == "assistant":
                    assert m.get("content") or m.get("tool_calls"), m

    @invariant()
    def requests_stay_within_the_caps(self):
        chat = [s for s in self._sent() if s.purpose == "chat"]
        run = 1
        for a, b in zip(chat, chat[1:], strict=False):
            run = run + 1 if a.body == b.body else 1
            assert run <= MAX_IDENTICAL, f"{run} identical requests in a row"
        assert all(s.body["max_tokens"] <= RAISED_MAX_TOKENS for s in chat), "max_tokens cap"
        steps = self.max_calls + EXTRA_STEPS
        # Per step: two modes, each with a model switch at most once restarting its budget.
        assert len(chat) <= steps * 2 * 2 * MAX_IDENTICAL, f"{len(chat)} chat requests"
        runs = [a for a in self.log if isinstance(a, RunTool) and a.attempt == 1]
        assert len(runs) <= self.max_calls, f"{len(runs)} tool runs, cap {self.max_calls}"
        assert len({r.call_id for r in runs}) == len(runs)  # no call starts twice
        for r in self.log:
            if isinstance(r, RunTool):  # retries of a transient failure only, bounded
                assert 1 <= r.attempt <= TOOL_RETRIES + 1, r
        results = [a.call_id for a in self.log if isinstance(a, ShowToolResult)]
        assert len(set(results)) == len(results)
        # Unknown tools and invalid arguments get a result without running.
        assert set(results) <= set(self.origin)
        for t in self.log:
            if isinstance(t, StartTimer) and t.purpose == "wait":
                assert t.delay_s <= max(MAX_RETRY_AFTER_S, MAX_DELAY_S * 1.25)

    def _sent(self) -> list[SendRequest]:
        return [a for a in self.log if isinstance(a, SendRequest)]

    # ---- the turn always ends -------------------------------------------------------------
    def _hostile_answer(self, f: str) -> None:
        """A sent request met by the hostile fault ``f`` (before its body)."""
        if f == "reset":
            self.connect_fails("reset")
        elif f == "overflow":
            self.error_status(400, {}, OVERFLOW)
        elif f in ("tool_length", "no_finish", "call_cut"):
            self.headers_ok()
        else:
            self.error_status(503 if f == "503" else 429, {}, "")

    def _hostile_stream(self, f: str) -> None:
        """A streaming body met by the hostile fault ``f``."""
        if f == "call_cut":
            self.chunk("call")
            if self.req_state == "stream":
                self.body_fails("cut")
        elif f == "tool_length":
            self.chunk("cut_call")
            self.chunk("length")
            if self.req_state == "stream":
                self.chunk("done")
        else:
            self.stream_ends()

    def teardown(self):
        # A hostile schedule (one fault, or a cycle of them) must end any unfinished turn.
        faults = self.hostile
        for n in range(20000):
            if self.core.ended:
                break
            f = faults[n % len(faults)]
            if self.tool is not None:
                # Tool outcomes cycle too: retries, the time limit (the lowest timer fired
                # below) and denials must all still end the turn.
                self.tool_returns(TOOL_FAULTS[n % len(TOOL_FAULTS)])
            elif self.hook:
                self.stop_hook_returns("blocked")
            elif self.req_state == "sent":
                self._hostile_answer(f)
            elif self.req_state == "stream":
                self._hostile_stream(f)
            elif self.req_state == "full":
                self.full_body("garbage" if f == "503" else "length_cut_calls")
            elif self.timers:
                tid = min(self.timers)
                self.timers.pop(tid)
                self.feed(TimerFired(tid))
            else:
                raise AssertionError(
                    f"stuck: phase {self.core.phase.value}, nothing to answer, not ended"
                )
        assert self.core.ended, f"turn not ended after 20000 hostile events ({self.core.phase})"
        for check in (
            self.turn_ends_once_and_last,
            self.nothing_sent_after_abort,
            self.every_request_pairs_each_tool_call_with_one_result,
            self.no_empty_assistant_message_is_sent,
            self.requests_stay_within_the_caps,
        ):
            check()
        runs = {a.call_id for a in self.log if isinstance(a, RunTool)}
        results = {a.call_id for a in self.log if isinstance(a, ShowToolResult)}
        if self.aborted_at is None:
            assert runs <= results, "every tool run gets exactly one result"
        else:
            assert len(runs - results) <= 1  # at most the one running when the user aborted


def _call(cid: str, args: str = '{"path": "a"}') -> dict:
    return {"id": cid, "type": "function", "function": {"name": "read", "arguments": args}}


def _delta_call(cid: str, args: str) -> dict:
    return {"index": int(cid[1:]), "id": cid, "function": {"name": "read", "arguments": args}}


TurnMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_core_turn_machine = TurnMachine.TestCase
