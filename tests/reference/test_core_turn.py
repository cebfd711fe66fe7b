"""The sans-IO recovery core, one test (at least) per criterion: no sockets, no sleeps.

Each test feeds hand-built events to a ``TurnCore`` and reads the actions it returns.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from conformance.reference.continuation import CONTINUATION_TEXT, OUTPUT_LIMIT_ERROR
from conformance.reference.core import (
    MISSING_RESULT,
    Aborted,
    Behaviours,
    BodyEnded,
    BodyFailed,
    CallStopHook,
    CancelRequest,
    CancelTimer,
    Chunk,
    ConnectFailed,
    CoreError,
    EmitMessage,
    EndTurn,
    HeadersReceived,
    NoteRetry,
    Phase,
    RemoveMessage,
    ReportUsage,
    RunTool,
    SendRequest,
    ShowError,
    ShowToolResult,
    StartTimer,
    StopHookDone,
    TimerFired,
    ToolOutcome,
    TurnCore,
    WriteDebugDump,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def start_msg(**config) -> dict:
    extra = config.pop("_start", {})
    msg = {
        "model": "m",
        "prompt": "say hi",
        "tools": [{"name": "read", "parameters": {"type": "object"}}],
        "tool_endpoint": "http://tools",
        "config": {"fallback_model": None, "max_output_tokens": None, **config},
    }
    msg.update(extra)
    return msg


def delta_event(content="", reasoning="", finish=None, calls=None, usage=None) -> str:
    delta: dict = {}
    if content:
        delta["content"] = content
    if reasoning:
        delta["reasoning_content"] = reasoning
    if calls:
        delta["tool_calls"] = calls
    data: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        data["usage"] = usage
    return json.dumps(data)


def call(cid="c1", name="read", args='{"path": "a"}', index=0) -> dict:
    return {"index": index, "id": cid, "function": {"name": name, "arguments": args}}


class Drive:
    """A test driver: answers the core's actions by hand and records everything."""

    def __init__(self, behaviours: Behaviours = Behaviours(), **config) -> None:  # noqa: B008
        self.core = TurnCore(start_msg(**config), behaviours=behaviours, rand=lambda: 0.5)
        self.log: list = []
        self.timers: dict[int, StartTimer] = {}
        self._take(self.core.begin(0.0))

    def _take(self, out: list) -> list:
        self.log += out
        for a in out:
            if isinstance(a, StartTimer):
                self.timers[a.timer_id] = a
        return out

    def feed(self, event) -> list:
        return self._take(self.core.handle(event, 0.0))

    def of(self, kind) -> list:
        return [a for a in self.log if isinstance(a, kind)]

    @property
    def sends(self) -> list[SendRequest]:
        return [s for s in self.of(SendRequest) if s.purpose == "chat"]

    @property
    def rid(self) -> int:
        return self.of(SendRequest)[-1].request_id

    def status(self, code: int, headers=None, body="", received_at=NOW) -> list:
        out = self.feed(HeadersReceived(self.rid, code, headers or {}, received_at))
        return out + self.feed(BodyEnded(self.rid, body))

    def stream(self, *events: str, done: bool = True, fail: str | None = None) -> list:
        rid = self.rid
        out = self.feed(HeadersReceived(rid, 200, {}, NOW))
        for e in events:
            out += self.feed(Chunk(rid, e))
        if fail is not None:
            out += self.feed(BodyFailed(rid, fail))
        elif done:
            out += self.feed(Chunk(rid, "[DONE]"))
        else:
            out += self.feed(BodyEnded(rid))
        return out

    def full(self, content="", finish="stop", calls=None, reasoning="") -> list:
        msg: dict = {"role": "assistant", "content": content}
        if calls:
            msg["tool_calls"] = calls
        if reasoning:
            msg["reasoning_content"] = reasoning
        body = json.dumps({"choices": [{"message": msg, "finish_reason": finish}]})
        return self.status(200, body=body)

    def text(self, content="hi", finish="stop") -> list:
        return self.stream(delta_event(content, finish=finish))

    def fire(self) -> list:
        """Fire the most recent timer."""
        return self.feed(TimerFired(max(self.timers)))

    def tool(self, output="ok", status="ok") -> list:
        """Answer the latest RunTool with a raw outcome (``status``: ok, error, denied, ...)."""
        run = self.of(RunTool)[-1]
        etype = "execution_error" if status == "error" else ""
        return self.feed(ToolOutcome(run.call_id, status, output, etype))

    @property
    def end(self) -> EndTurn | None:
        ends = self.of(EndTurn)
        assert len(ends) <= 1
        return ends[0] if ends else None

    def fail_n(self, n: int, code=503, headers=None) -> None:
        for _ in range(n):
            self.status(code, headers)
            if self.core.phase is Phase.WAIT:
                self.fire()


# ---- RTY ------------------------------------------------------------------------------
def test_RTY_01_retry_after_seconds_replaces_backoff():
    d = Drive()
    d.status(429, {"Retry-After": "7"})
    assert d.of(NoteRetry)[-1].delay_s == 7.0
    assert d.of(StartTimer)[-1].delay_s == 7.0 and d.of(StartTimer)[-1].purpose == "wait"
    assert len(d.sends) == 1  # nothing sent before the timer fires
    d.fire()
    assert len(d.sends) == 2


def test_RTY_02_retry_after_http_date_uses_the_headers_time():
    d = Drive()
    when = format_datetime(NOW + timedelta(seconds=5), usegmt=True)
    d.status(429, {"Retry-After": when}, received_at=NOW)
    assert d.of(StartTimer)[-1].delay_s == pytest.approx(5.0)


def test_RTY_03_backoff_without_retry_after_uses_injected_jitter():
    d = Drive()
    delays = []
    for _ in range(8):
        d.status(429)
        delays.append(d.of(StartTimer)[-1].delay_s)
        d.fire()
    assert delays == [0.5, 1, 2, 4, 8, 16, 32, 32]  # rand() = 0.5: jitter factor 1


def test_RTY_04_ten_retries_then_no_eleventh_resend_of_that_mode():
    d = Drive(_start={"stream": False})
    d.fail_n(10)
    assert len(d.sends) == 11 and d.end is None
    d.fail_n(1)
    assert len(d.sends) == 11
    assert d.end == EndTurn("error")
    assert "after 10 retries" in d.of(ShowError)[-1].message


@pytest.mark.parametrize("code", [500, 502, 503, 504, 529])
def test_RTY_05_5xx_use_the_429_policy(code):
    d = Drive()
    d.status(code)
    assert d.of(NoteRetry)[-1].delay_s == 0.5


@pytest.mark.parametrize("kind", ["reset", "refused", "timeout"])
def test_RTY_06_connection_errors_before_headers_are_retried(kind):
    d = Drive()
    d.feed(ConnectFailed(d.rid, kind, "boom"))
    assert d.core.phase is Phase.WAIT and d.of(NoteRetry)
    d.fire()
    assert len(d.sends) == 2


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_RTY_07_non_retryable_4xx_surface_at_once(code):
    d = Drive()
    d.status(code, body="nope")
    assert len(d.sends) == 1 and not d.of(NoteRetry)
    assert d.end == EndTurn("error")


def test_RTY_08_jitter_comes_from_the_injected_source():
    delays = []
    for r in (0.0, 1.0):
        core = TurnCore(start_msg(), rand=lambda r=r: r)
        rid = core.begin()[0].request_id
        core.handle(HeadersReceived(rid, 503, {}, NOW))
        out = core.handle(BodyEnded(rid, ""))
        delays.append(next(a.delay_s for a in out if isinstance(a, StartTimer)))
    assert delays == [0.375, 0.625]


def test_RTY_09_title_request_is_one_attempt_even_on_429():
    d = Drive(background_title=True)
    title = d.of(SendRequest)[0]
    assert title.purpose == "title" and title.body["stream"] is False and "tools" not in title.body
    assert "title" in json.dumps(title.body["messages"])
    d.status(429, {"Retry-After": "1"})
    assert not d.of(NoteRetry) and d.sends and d.sends[0].body["stream"] is True


def test_RTY_11_window_overflow_lowers_max_tokens_once():
    d = Drive()
    body = "This model's maximum context length is 10000 tokens. However, you requested 9000 in the messages"
    d.status(400, body=body)
    assert d.sends[-1].body["max_tokens"] == 10000 - 9000 - 16
    d.status(400, body=body)
    assert d.end == EndTurn("error")


def test_RTY_12_retry_resends_the_identical_request():
    d = Drive()
    d.status(503)
    d.fire()
    assert d.sends[0].body == d.sends[1].body


def test_RTY_13_retry_after_ms_is_preferred():
    d = Drive()
    d.status(429, {"retry-after-ms": "250", "Retry-After": "9"})
    assert d.of(StartTimer)[-1].delay_s == 0.25


def test_RTY_14_excessive_retry_after_is_surfaced_not_slept():
    d = Drive(_start={"stream": False})
    d.status(429, {"Retry-After": "3600"})
    assert not d.of(StartTimer) and d.end == EndTurn("error")
    assert "3600" in d.of(ShowError)[0].message


def test_RTY_15_x_should_retry_overrides_the_table():
    d = Drive()
    d.status(503, {"x-should-retry": "false"})
    assert not d.of(NoteRetry)
    d2 = Drive()
    d2.status(400, {"x-should-retry": "true"})
    assert d2.of(NoteRetry)


@pytest.mark.parametrize("code", [408, 409])
def test_RTY_16_408_and_409_are_retried(code):
    d = Drive()
    d.status(code)
    assert d.of(NoteRetry)


# ---- STR ------------------------------------------------------------------------------
def test_STR_01_body_failure_resends_once_without_streaming():
    d = Drive()
    d.stream(delta_event("half"), fail="reset")
    assert [s.body["stream"] for s in d.sends] == [True, False]
    assert {k: v for k, v in d.sends[1].body.items() if k != "stream"} == {
        k: v for k, v in d.sends[0].body.items() if k != "stream"
    }
    d.full("whole")
    assert d.end == EndTurn("completed")


def test_STR_02_partial_message_removed_by_its_id():
    d = Drive()
    d.stream(delta_event("half"), fail="reset")
    shown = d.of(EmitMessage)[0]
    assert d.of(RemoveMessage) == [RemoveMessage(shown.id)]


def test_STR_02_switch_off_keeps_the_partial_message():
    d = Drive(Behaviours(remove_partial_messages=False))
    d.stream(delta_event("half"), fail="reset")
    assert not d.of(RemoveMessage)


def test_STR_03_tool_calls_of_a_failed_stream_never_run():
    d = Drive()
    d.stream(delta_event(calls=[call()]), fail="cut")
    assert not d.of(RunTool)
    d.full("done")
    assert not d.of(RunTool)


def test_STR_04_abort_during_stream_no_fallback():
    d = Drive()
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    d.feed(Chunk(d.rid, delta_event("half")))
    out = d.feed(Aborted())
    assert CancelRequest(1) in out and out[-1] == EndTurn("aborted")
    assert d.feed(BodyFailed(1, "reset")) == []
    assert len(d.sends) == 1


def test_STR_05_before_headers_backoff_then_one_fallback_with_its_own_budget():
    d = Drive()
    for _ in range(11):
        d.feed(ConnectFailed(d.rid, "reset"))
        if d.core.phase is Phase.WAIT:
            d.fire()
    assert [s.body["stream"] for s in d.sends] == [True] * 11 + [False]
    d.fail_n(10)
    assert len(d.sends) == 22 and d.end is None


def test_STR_06_fallback_failing_too_surfaces_no_second_fallback():
    d = Drive()
    d.stream(delta_event("x"), fail="reset")
    d.fail_n(11)
    assert [s.body["stream"] for s in d.sends].count(True) == 1
    assert d.end == EndTurn("error")
    assert "after a non-streaming fallback" in d.of(ShowError)[-1].message


def test_STR_07_nothing_streamed_fallback_without_removal():
    d = Drive()
    d.stream(fail="reset")
    assert not d.of(RemoveMessage) and d.sends[-1].body["stream"] is False


def test_STR_08_clean_close_without_finish_reason_takes_the_fallback():
    d = Drive()
    d.stream(delta_event("no finish"), done=False)
    assert d.sends[-1].body["stream"] is False and d.of(RemoveMessage)


def test_STR_09_healthy_stream_no_fallback():
    d = Drive()
    d.text("fine")
    assert len(d.sends) == 1 and d.end == EndTurn("completed")


def test_STR_10_idle_timer_aborts_and_recovers_the_stream():
    d = Drive()
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    idle = d.of(StartTimer)[-1]
    assert idle.purpose == "idle" and idle.delay_s == 60.0
    out = d.feed(TimerFired(idle.timer_id))
    assert CancelRequest(1) in out and d.sends[-1].body["stream"] is False


def test_STR_10_switch_off_starts_no_idle_timer():
    d = Drive(Behaviours(idle_watchdog=False))
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    assert not d.of(StartTimer)


def test_STR_11_only_the_successful_usage_counts():
    d = Drive()
    usage = {"prompt_tokens": 5, "completion_tokens": 7}
    d.stream(delta_event("x", usage=usage), fail="reset")
    d.status(
        200,
        body=json.dumps(
            {
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2},
            }
        ),
    )
    assert d.of(ReportUsage) == [ReportUsage(1, 2)]


def test_STR_12_fallback_switched_off_by_config():
    d = Drive(stream_fallback=False)
    d.stream(delta_event("x"), fail="reset")
    assert len(d.sends) == 1 and d.of(ShowError)[0].kind == "stream"


def test_STR_13_finish_without_done_completes():
    d = Drive()
    d.stream(delta_event("ok", finish="stop"), done=False)
    assert d.end == EndTurn("completed") and len(d.sends) == 1


def test_STR_13_reset_after_the_finish_chunk_completes_without_a_resend():
    d = Drive()
    d.stream(delta_event("ok"), delta_event(finish="stop"), fail="reset")
    assert d.end == EndTurn("completed") and len(d.sends) == 1
    assert not d.of(RemoveMessage) and not d.of(ShowError)
    assert d.of(EmitMessage)[-1].text == "ok"


def test_STR_13_reset_after_finish_tool_calls_runs_the_calls():
    d = Drive()
    d.stream(delta_event(calls=[call()]), delta_event(finish="tool_calls"), fail="reset")
    assert [r.call_id for r in d.of(RunTool)] == ["c1"] and len(d.sends) == 1


def test_STR_13_silence_after_the_finish_chunk_completes_too():
    d = Drive()
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    d.feed(Chunk(d.rid, delta_event("ok", finish="stop")))
    idle = [t for t in d.of(StartTimer) if t.purpose == "idle"][-1]
    out = d.feed(TimerFired(idle.timer_id))
    assert CancelRequest(1) in out and d.end == EndTurn("completed") and len(d.sends) == 1


def test_STR_13_a_reset_before_the_finish_chunk_is_still_a_failure():
    d = Drive()
    d.stream(delta_event("ok"), fail="reset")
    assert d.sends[-1].body["stream"] is False and d.of(RemoveMessage)


def test_STR_14_malformed_event_takes_the_fallback():
    d = Drive()
    d.stream("{not json", done=False)
    assert d.sends[-1].body["stream"] is False


def test_STR_15_in_band_error_event_is_a_failure():
    d = Drive()
    d.stream(json.dumps({"error": {"message": "upstream"}}))
    assert d.sends[-1].body["stream"] is False and d.end is None


def test_STR_16_empty_replies_are_resent_a_bounded_number_of_times():
    d = Drive(_start={"stream": False})
    for _ in range(4):
        d.status(200, body=json.dumps({"choices": []}))
    assert len(d.sends) == 4 and d.end == EndTurn("error")


def test_STR_16_empty_streamed_reply_is_resent_in_the_same_mode():
    d = Drive()
    d.stream(delta_event(finish="stop"))
    assert [s.body["stream"] for s in d.sends] == [True, True] and d.end is None
    d.text("hello")
    assert d.end == EndTurn("completed")


# ---- TRN / RSN ------------------------------------------------------------------------
def test_TRN_01_02_length_appends_the_hidden_continuation():
    d = Drive(max_output_tokens=1000)
    d.text("part", finish="length")
    last = d.sends[-1].body["messages"]
    assert last[-1] == {"role": "user", "content": CONTINUATION_TEXT}
    meta = d.of(EmitMessage)[-1]
    assert meta.meta is True and meta.text == CONTINUATION_TEXT


def test_TRN_03_truncated_with_tool_calls_runs_tools_first():
    d = Drive(max_output_tokens=1000)
    d.stream(delta_event(calls=[call(args='{"path": "a')], finish="length"))
    assert d.of(RunTool) and len(d.sends) == 1
    d.tool("content")
    assert "truncated" in d.of(ShowToolResult)[0].output  # the recovered call is flagged
    roles = [m["role"] for m in d.sends[-1].body["messages"]]
    assert roles[-2:] == ["tool", "user"]
    assert d.sends[-1].body["messages"][-1]["content"] == CONTINUATION_TEXT


def test_TRN_03_switch_off_sends_no_continuation_after_the_tools():
    d = Drive(Behaviours(continuation=False), max_output_tokens=1000)
    d.stream(delta_event(calls=[call()], finish="length"))
    d.tool("content")
    assert d.sends[-1].body["messages"][-1]["role"] == "tool"


def test_TRN_04_fourth_truncation_ends_with_the_output_limit_error():
    d = Drive(max_output_tokens=1000)
    for _ in range(4):
        d.text("p", finish="length")
    assert len(d.sends) == 4
    assert d.of(ShowError) == [ShowError("output_limit", OUTPUT_LIMIT_ERROR)]


def test_TRN_05_tool_call_between_truncations_resets_the_count():
    d = Drive(max_output_tokens=1000)
    for _ in range(3):
        d.text("p", finish="length")
    d.stream(delta_event(calls=[call()], finish="tool_calls"))
    d.tool()
    for _ in range(3):
        d.text("p", finish="length")
    assert d.end is None


def test_TRN_06_truncated_turn_with_tool_calls_does_not_consume_the_count():
    d = Drive(max_output_tokens=1000)
    for _ in range(3):
        d.text("p", finish="length")
    d.stream(delta_event(calls=[call()], finish="length"))
    d.tool()
    d.text("p", finish="length")
    assert d.end is None


def test_TRN_07_default_limit_is_raised_before_continuing():
    d = Drive()
    d.text("p", finish="length")
    assert [s.body["max_tokens"] for s in d.sends] == [8192, 32768]
    assert d.sends[0].body["messages"] == d.sends[1].body["messages"]
    assert d.of(RemoveMessage)
    d.text("p", finish="length")
    assert d.sends[-1].body["messages"][-1]["content"] == CONTINUATION_TEXT


def test_TRN_08_continuation_keeps_the_produced_content():
    d = Drive(max_output_tokens=1000)
    d.text("produced", finish="length")
    assert {"role": "assistant", "content": "produced"} in d.sends[-1].body["messages"]


def test_TRN_09_abort_during_recovery_stops_it():
    d = Drive(max_output_tokens=1000)
    d.text("p", finish="length")
    n = len(d.sends)
    assert d.feed(Aborted())[-1] == EndTurn("aborted")
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    assert len(d.sends) == n


def test_RSN_01_reasoning_only_truncation_carries_reasoning_and_explanatory_content():
    d = Drive(max_output_tokens=1000)
    d.stream(delta_event(reasoning="thinking", finish="length"))
    sent = [m for m in d.sends[-1].body["messages"] if m["role"] == "assistant"][0]
    assert sent["reasoning_content"] == "thinking"
    assert sent["content"] and sent["content"] != "thinking"


def test_RSN_02_truncated_text_sends_reasoning_alongside():
    d = Drive(max_output_tokens=1000)
    d.stream(delta_event("text", reasoning="why", finish="length"))
    sent = [m for m in d.sends[-1].body["messages"] if m["role"] == "assistant"][0]
    assert sent["content"] == "text" and sent["reasoning_content"] == "why"


def test_RSN_02_switch_off_drops_the_reasoning():
    d = Drive(Behaviours(reasoning_preservation=False), max_output_tokens=1000)
    d.stream(delta_event("text", reasoning="why", finish="length"))
    sent = [m for m in d.sends[-1].body["messages"] if m["role"] == "assistant"][0]
    assert "reasoning_content" not in sent


def test_RSN_03_04_empty_assistant_turn_is_never_sent():
    d = Drive(max_output_tokens=1000)
    d.stream(delta_event(finish="length"))
    assert all(m["role"] != "assistant" for m in d.sends[-1].body["messages"])


def test_RSN_03_empty_assistant_turns_in_history_are_never_sent():
    history = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": None, "reasoning_content": "thought"},
    ]
    core = TurnCore({**start_msg(), "history": history})
    sent = core.begin()[0].body["messages"]
    assistants = [m for m in sent if m["role"] == "assistant"]
    assert len(assistants) == 1 and assistants[0]["content"]
    assert assistants[0]["reasoning_content"] == "thought"


# ---- TJS / TOL ------------------------------------------------------------------------
def test_TJS_01_cut_tool_json_is_recovered_and_run():
    d = Drive(max_output_tokens=1000)
    d.stream(delta_event(calls=[call(args='{"path": "a')], finish="length"))
    assert d.of(RunTool) == [RunTool("c1", "read", {"path": "a"}, 1)]


def test_TOL_06_every_call_gets_exactly_one_result_in_the_next_request():
    d = Drive()
    d.stream(delta_event(calls=[call("a"), call("b", index=1)], finish="tool_calls"))
    d.tool("one")
    assert len(d.sends) == 1  # the second call is still to run
    d.tool("two")
    ids = [m["tool_call_id"] for m in d.sends[-1].body["messages"] if m["role"] == "tool"]
    assert ids == ["a", "b"]
    assert [r.call_id for r in d.of(ShowToolResult)] == ["a", "b"]


def test_TOL_08_tool_failures_are_not_retried_as_api_requests():
    d = Drive()
    d.stream(delta_event(calls=[call()], finish="tool_calls"))
    d.tool("Error: boom", status="error")
    assert len(d.sends) == 2 and not d.of(NoteRetry)


def test_TOL_stale_tool_result_is_ignored():
    d = Drive()
    d.stream(delta_event(calls=[call()], finish="tool_calls"))
    assert d.feed(ToolOutcome("other", "ok", "x")) == []


# ---- LOP ------------------------------------------------------------------------------
def _failing_tool_round(d: Drive) -> None:
    d.stream(delta_event(calls=[call(args='{"path": "x"}')], finish="tool_calls"))
    d.tool("Error: no such file", status="error")


def test_LOP_01_reminder_after_three_same_failures():
    d = Drive()
    for _ in range(3):
        _failing_tool_round(d)
    last = d.sends[-1].body["messages"][-1]
    assert last["role"] == "user" and "same arguments" in last["content"]


def test_LOP_02_ignored_reminder_blocks_the_tool():
    d = Drive()
    for _ in range(4):
        _failing_tool_round(d)
    assert "tools" not in d.sends[-1].body


def test_LOP_02_switch_off_never_reminds():
    d = Drive(Behaviours(loop_detection=False))
    for _ in range(4):
        _failing_tool_round(d)
    assert "tools" in d.sends[-1].body
    assert all("same arguments" not in json.dumps(s.body) for s in d.sends)


def test_LOP_03_tool_call_cap_ends_the_turn():
    d = Drive(max_tool_calls=2)
    d.stream(
        delta_event(calls=[call("a"), call("b", index=1), call("c", index=2)], finish="tool_calls")
    )
    d.tool()
    d.tool()
    assert len(d.of(RunTool)) == 2 and d.end == EndTurn("error")
    assert "Too many tool calls" in d.of(ShowError)[0].message


def test_LOP_04_step_limit_bounds_endless_truncation_recovery():
    d = Drive(Behaviours(output_truncation=False), max_tool_calls=1)
    for _ in range(30):
        if d.end:
            break
        if d.of(RunTool) and d.core.phase is Phase.TOOLS:
            d.tool()
        else:
            d.stream(delta_event(calls=[call()], finish="length"))
    assert d.end is not None


def test_LOP_05_compaction_stops_after_three_failures():
    core = TurnCore(start_msg())
    core.compaction_failures = 3
    rid = core.begin()[0].request_id
    core.handle(HeadersReceived(rid, 400, {}, NOW))
    out = core.handle(BodyEnded(rid, '{"error": {"code": "context_length_exceeded"}}'))
    assert not [a for a in out if isinstance(a, SendRequest)] and out[-1] == EndTurn("error")


def test_LOP_06_same_text_three_times_gets_a_note_before_the_continuation():
    d = Drive(max_output_tokens=1000)
    for _ in range(3):
        d.text("I am still thinking.", finish="length")
    msgs = d.sends[-1].body["messages"]
    assert "same text 3 times" in msgs[-2]["content"] and msgs[-1]["content"] == CONTINUATION_TEXT
    assert all("same text" not in json.dumps(s.body) for s in d.sends[:-1])


def test_LOP_06_same_text_with_tool_calls_between_gets_a_note_after_the_results():
    d = Drive()
    for i in range(3):
        args = json.dumps({"path": str(i)})
        d.stream(delta_event("Next file.", calls=[call(f"c{i}", args=args)], finish="tool_calls"))
        d.tool("not it")
    msgs = d.sends[-1].body["messages"]
    assert msgs[-2]["role"] == "tool"
    assert msgs[-1]["role"] == "system" and "same text 3 times" in msgs[-1]["content"]


def test_LOP_06_switch_off_adds_no_note():
    d = Drive(Behaviours(loop_detection=False), max_output_tokens=1000)
    for _ in range(3):
        d.text("I am still thinking.", finish="length")
    assert "same text" not in json.dumps(d.sends[-1].body)


# ---- CTX ------------------------------------------------------------------------------
OVERFLOW = '{"error": {"code": "context_length_exceeded", "message": "too long"}}'


def _compaction_reply(text="the summary") -> str:
    return json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]})


def test_CTX_01_prompt_too_long_compacts_once_then_retries():
    d = Drive()
    d.status(400, body=OVERFLOW)
    compact = d.of(SendRequest)[-1]
    assert compact.purpose == "compact" and "tools" not in compact.body
    assert "summarize" in json.dumps(compact.body).lower()
    d.status(200, body=_compaction_reply())
    assert "the summary" in json.dumps(d.sends[-1].body["messages"])


def test_CTX_02_overflow_again_surfaces_the_error():
    d = Drive()
    d.status(400, body=OVERFLOW)
    d.status(200, body=_compaction_reply())
    d.status(400, body=OVERFLOW)
    assert d.of(ShowError)[0].kind == "prompt_too_long" and d.end == EndTurn("error")
    assert len([s for s in d.of(SendRequest) if s.purpose == "compact"]) == 1


def test_CTX_02_failed_compaction_surfaces_the_original_error():
    d = Drive()
    d.status(400, body=OVERFLOW)
    d.status(500, body="down")
    assert d.of(ShowError)[0].kind == "prompt_too_long"


def test_CTX_03_unpaired_history_calls_get_placeholders():
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "h1", "function": {}}]},
    ]
    core = TurnCore({**start_msg(), "history": history})
    sent = core.begin()[0].body["messages"]
    assert sent[2] == {"role": "tool", "tool_call_id": "h1", "content": MISSING_RESULT}


def test_CTX_04_training_data_mode_refuses_the_repair():
    history = [{"role": "assistant", "content": None, "tool_calls": [{"id": "h1"}]}]
    core = TurnCore({**start_msg(training_data_mode=True), "history": history})
    out = core.begin()
    assert not [a for a in out if isinstance(a, SendRequest)] and out[-1] == EndTurn("error")


# ---- MFB ------------------------------------------------------------------------------
def test_MFB_01_03_fallback_model_after_three_529s_not_before():
    d = Drive(fallback_model="fb")
    d.fail_n(2, 529)
    assert {s.body["model"] for s in d.sends} == {"m"}
    d.status(529)
    assert d.sends[-1].body["model"] == "fb"


def test_MFB_02_404_never_switches_models():
    d = Drive(fallback_model="fb")
    d.fail_n(2, 529)
    d.status(404)
    assert {s.body["model"] for s in d.sends} == {"m"}


def test_MFB_04_private_fields_stripped_for_the_fallback_model():
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "signature": "sig", "thinking_blocks": []},
    ]
    core = TurnCore({**start_msg(fallback_model="fb"), "history": history}, rand=lambda: 0.5)
    out = core.begin()
    for _ in range(3):
        rid = out[-1].request_id
        core.handle(HeadersReceived(rid, 529, {}, NOW))
        out = core.handle(BodyEnded(rid, ""))
        if isinstance(out[-1], StartTimer):
            out = core.handle(TimerFired(out[-1].timer_id))
    sent = out[-1].body
    assert sent["model"] == "fb" and "signature" not in json.dumps(sent)


def test_MFB_01_overloaded_error_body_counts_as_an_overload():
    d = Drive(fallback_model="fb")
    d.fail_n(3, 503, None)
    assert d.sends[-1].body["model"] == "m"
    d2 = Drive(fallback_model="fb")
    for _ in range(3):
        d2.status(503, body='{"error": {"type": "overloaded_error"}}')
        if d2.core.phase is Phase.WAIT:
            d2.fire()
    assert d2.sends[-1].body["model"] == "fb"


def test_MFB_04_tool_call_extra_content_stripped_for_the_fallback_model():
    calls = [{"id": "c", "function": {}, "extra_content": {"google": {"thought_signature": "s"}}}]
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    core = TurnCore({**start_msg(fallback_model="fb"), "history": history}, rand=lambda: 0.5)
    out = core.begin()
    assert "thought_signature" in json.dumps(out[-1].body)
    for _ in range(3):
        rid = out[-1].request_id
        core.handle(HeadersReceived(rid, 529, {}, NOW))
        out = core.handle(BodyEnded(rid, ""))
        if isinstance(out[-1], StartTimer):
            out = core.handle(TimerFired(out[-1].timer_id))
    assert out[-1].body["model"] == "fb" and "thought_signature" not in json.dumps(out[-1].body)


# ---- ERR / DBG / CTL ------------------------------------------------------------------
def test_ERR_01_exhausted_error_is_typed():
    d = Drive(_start={"stream": False})
    d.fail_n(11, 429)
    assert d.of(ShowError)[0].kind == "rate_limit"


def test_ERR_02_intermediate_errors_are_withheld():
    d = Drive()
    d.fail_n(3)
    d.text("fine")
    assert not d.of(ShowError) and d.end == EndTurn("completed")


def test_ERR_02_switch_off_shows_intermediate_errors():
    d = Drive(Behaviours(withhold_errors=False))
    d.status(503)
    assert d.of(ShowError)


def test_ERR_03_no_stop_hook_after_an_api_error():
    d = Drive(stop_hook=True)
    d.status(401)
    assert not d.of(CallStopHook)
    d2 = Drive(stop_hook=True)
    d2.text("ok")
    assert d2.of(CallStopHook) and d2.end is None


def test_ERR_04_surfaced_error_names_the_recovery_tried():
    d = Drive()
    d.stream(fail="reset")
    d.fail_n(11)
    msg = d.of(ShowError)[0].message
    assert "after 10 retries" in msg and "non-streaming fallback" in msg


def test_ERR_04_error_names_compaction_and_model_fallback():
    d = Drive(fallback_model="fb")
    d.fail_n(3, 529)
    d.status(400, body=OVERFLOW)
    d.status(200, body=_compaction_reply())
    d.status(400, body=OVERFLOW)
    msg = d.of(ShowError)[0].message
    assert "model fallback to 'fb'" in msg and "compaction" in msg


def test_ERR_05_a_driver_bug_is_a_clear_error_and_late_events_are_ignored():
    d = Drive()
    with pytest.raises(CoreError, match="Chunk cannot be handled in phase 'request'"):
        d.feed(Chunk(d.rid, "{}"))
    d.text("ok")
    assert d.feed(BodyFailed(1, "late")) == []


def test_DBG_01_http_400_dump_decided_with_messages_model_config_error():
    core = TurnCore({**start_msg(), "debug_dir": "/somewhere"})
    rid = core.begin()[0].request_id
    core.handle(HeadersReceived(rid, 400, {}, NOW))
    out = core.handle(BodyEnded(rid, "bad field"))
    dump = next(a for a in out if isinstance(a, WriteDebugDump))
    assert set(dump.record) == {"messages", "model", "config", "error"}
    assert dump.record["error"] == "bad field" and dump.index == 1


def test_DBG_01_no_debug_dir_no_dump():
    d = Drive()
    d.status(400, body="bad")
    assert not d.of(WriteDebugDump)


def test_CTL_01_nothing_after_abort():
    d = Drive()
    d.status(503)
    out = d.feed(Aborted())
    assert out[-1] == EndTurn("aborted")
    assert d.feed(TimerFired(max(d.timers))) == []
    assert len(d.sends) == 1


def test_CTL_02_stop_hook_block_is_shown_once_never_retried():
    d = Drive(stop_hook=True)
    d.text("ok")
    out = d.feed(StopHookDone("not yet"))
    assert [type(a) for a in out] == [EmitMessage, EndTurn]
    assert out[0].text == "Stop hook blocked: not yet" and len(d.of(CallStopHook)) == 1


# ---- MAY features and their switches ---------------------------------------------------
EXPIRED = '{"error": {"message": "The access token has expired.", "code": "token_expired"}}'


def test_RTY_10_expired_credentials_refresh_once_and_resend_the_identical_request():
    from conformance.reference.core import RefreshCredentials

    d = Drive()
    out = d.status(401, body=EXPIRED)
    assert out.index(RefreshCredentials()) < out.index(d.sends[-1])  # refresh, then resend
    assert len(d.sends) == 2 and d.sends[0].body == d.sends[1].body
    assert not d.of(NoteRetry) and not d.of(ShowError)
    d.status(401, body=EXPIRED)  # expired again: never a second refresh
    assert len(d.of(RefreshCredentials)) == 1 and len(d.sends) == 2
    assert d.of(ShowError)[0].kind == "auth" and d.end == EndTurn("error")


def test_RTY_10_other_401s_and_the_switch_off_do_not_refresh():
    from conformance.reference.core import RefreshCredentials

    d = Drive()
    d.status(401, body='{"error": {"message": "Invalid API key."}}')
    assert not d.of(RefreshCredentials) and len(d.sends) == 1
    d = Drive(Behaviours(credential_refresh=False))
    d.status(401, body=EXPIRED)
    assert not d.of(RefreshCredentials) and len(d.sends) == 1


def test_RTY_10_a_success_lets_a_later_expiry_refresh_again():
    from conformance.reference.core import RefreshCredentials

    d = Drive()
    d.status(401, body=EXPIRED)
    d.stream(delta_event(calls=[call()], finish="tool_calls"))
    d.tool()
    d.status(401, body=EXPIRED)
    assert len(d.of(RefreshCredentials)) == 2 and d.end is None


BG_ARGS = '{"command": "make", "run_in_background": true}'


def test_TRN_10_background_tool_is_started_not_waited_for():
    d = Drive(max_output_tokens=1000)
    d.stream(delta_event(calls=[call("bg", "read", BG_ARGS)], finish="tool_calls"))
    run = d.of(RunTool)[0]
    assert run.call_id == "bg" and len(d.sends) == 2  # the next request went out at once
    tool_msg = d.sends[-1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "bg"
    assert "background" in tool_msg["content"]
    # Its result, when it comes, is stale: the turn does not change.
    out = d.feed(ToolOutcome("bg", "ok", "built"))
    assert all(isinstance(a, CancelTimer) for a in out)  # only its time limit is dropped


def test_TRN_10_background_tool_counts_as_a_tool_call_for_the_truncation_count():
    d = Drive(max_output_tokens=1000)
    for _ in range(3):
        d.text("p", finish="length")
    d.stream(delta_event(calls=[call("bg", "read", BG_ARGS)], finish="tool_calls"))
    for _ in range(3):
        d.text("p", finish="length")
    assert d.end is None and not d.of(ShowError)


def test_TRN_10_switch_off_waits_for_the_background_tool():
    d = Drive(Behaviours(background_tools=False))
    d.stream(delta_event(calls=[call("bg", "read", BG_ARGS)], finish="tool_calls"))
    assert d.core.phase is Phase.TOOLS and len(d.sends) == 1


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
TOO_LARGE = '{"error": {"message": "Image too large: exceeds the maximum size of 5 MB."}}'


def _media_drive(behaviours: Behaviours = Behaviours()) -> Drive:  # noqa: B008
    history = [{"role": "user", "content": [{"type": "text", "text": "what?"}, IMAGE]}]
    return Drive(behaviours, _start={"history": history})


def test_CTX_05_media_too_large_strips_the_media_and_retries_once():
    d = _media_drive()
    d.status(400, body=TOO_LARGE)
    assert len(d.sends) == 2
    assert "image_url" in json.dumps(d.sends[0].body) and "image_url" not in json.dumps(
        d.sends[1].body
    )
    d.status(400, body=TOO_LARGE)  # still too large: no second strip, the error is typed
    assert len(d.sends) == 2 and d.of(ShowError)[0].kind == "media_too_large"


def test_CTX_05_413_counts_and_later_steps_stay_stripped():
    d = _media_drive()
    d.status(413, body="Request Entity Too Large")
    d.stream(delta_event(calls=[call()], finish="tool_calls"))
    d.tool()
    assert len(d.sends) == 3 and "image_url" not in json.dumps(d.sends[-1].body)


def test_CTX_05_switch_off_and_other_400s_do_not_strip():
    d = _media_drive(Behaviours(media_stripping=False))
    d.status(400, body=TOO_LARGE)
    assert len(d.sends) == 1
    d = _media_drive()
    d.status(400, body='{"error": {"message": "Unknown parameter: foo."}}')
    assert len(d.sends) == 1


NEAR = {"prompt_tokens": 125000, "completion_tokens": 10}


def _near_window_round(d: Drive, i: int) -> None:
    d.stream(
        delta_event(
            calls=[call(f"c{i}", args=json.dumps({"path": str(i)}))],
            finish="tool_calls",
            usage=NEAR,
        )
    )
    d.tool()


def test_LOP_05_proactive_compaction_near_the_window_and_its_breaker():
    d = Drive(context_window=128000)
    compactions = []
    for i in range(5):
        _near_window_round(d, i)
        if d.of(SendRequest)[-1].purpose == "compact":
            compactions.append(d.of(SendRequest)[-1])
            d.status(400, body=OVERFLOW)  # the compaction fails; the turn goes on
        assert d.of(SendRequest)[-1].purpose == "chat" and d.end is None
    assert len(compactions) == 3  # three failures in a row: no fourth try
    assert d.core.compaction_failures == 3


def test_LOP_05_successful_proactive_compaction_replaces_the_history():
    d = Drive(context_window=128000)
    _near_window_round(d, 0)
    assert d.of(SendRequest)[-1].purpose == "compact"
    d.status(200, body=_compaction_reply("so far: read 0"))
    assert "so far: read 0" in json.dumps(d.sends[-1].body["messages"])
    assert d.core.compaction_failures == 0


def test_LOP_05_below_the_window_no_compaction():
    d = Drive(context_window=1_000_000)
    for i in range(3):
        _near_window_round(d, i)
    assert all(s.purpose == "chat" for s in d.of(SendRequest))


def test_LOP_05_breaker_switch_off_keeps_compacting():
    d = Drive(Behaviours(compaction_breaker=False), context_window=128000)
    for i in range(5):
        _near_window_round(d, i)
        if d.of(SendRequest)[-1].purpose == "compact":
            d.status(400, body=OVERFLOW)
    assert len([s for s in d.of(SendRequest) if s.purpose == "compact"]) == 5


# ---- broken copies for the fuzzer -------------------------------------------------------
def test_TRN_04_broken_copy_bound_continuations_off_never_stops():
    d = Drive(Behaviours(bound_continuations=False), max_output_tokens=1000)
    for _ in range(8):
        d.text("p", finish="length")
    assert len(d.sends) == 9 and d.end is None and not d.of(ShowError)


def test_STR_03_broken_copy_runs_the_tool_calls_of_a_failed_stream():
    d = Drive(Behaviours(discard_failed_tool_calls=False))
    d.stream(delta_event(calls=[call()]), fail="cut")
    assert [r.call_id for r in d.of(RunTool)] == ["c1"]
    assert d.sends[-1].body["stream"] is False and d.of(RemoveMessage)  # recovery as usual


def test_CTL_01_broken_copy_retries_after_an_abort():
    d = Drive(Behaviours(stop_on_abort=False))
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    d.feed(Chunk(d.rid, delta_event("half")))
    out = d.feed(Aborted())
    assert CancelRequest(1) in out and EndTurn("aborted") not in out
    assert len(d.sends) == 2 and d.sends[-1].body["stream"] is False  # the fallback, after abort
    d.feed(Aborted())  # before headers: taken for a failed attempt, retried after a wait
    assert d.core.phase is Phase.WAIT
    d.fire()
    assert len(d.sends) == 3 and d.end is None


def test_RTY_04_broken_copy_retry_budget_off_retries_once_more():
    d = Drive(Behaviours(retry_budget=False), _start={"stream": False})
    d.fail_n(11)
    assert len(d.sends) == 12 and d.end is None  # 11 retries of one request
    d.fail_n(1)
    assert len(d.sends) == 12 and d.end == EndTurn("error")
    healthy = Drive(_start={"stream": False})
    healthy.fail_n(11)
    assert len(healthy.sends) == 11 and healthy.end == EndTurn("error")


def test_RTY_04_broken_copy_give_up_when_exhausted_off_never_stops():
    d = Drive(Behaviours(give_up_when_exhausted=False), _start={"stream": False})
    d.fail_n(40, code=429)
    assert len(d.sends) == 41 and d.end is None and d.core.phase is Phase.REQUEST
    assert d.of(NoteRetry)[-1].attempt == 40 and d.of(NoteRetry)[-1].delay_s == 32.0
    d.fail_n(1, code=400)  # a non-retryable error still ends the turn
    assert d.end == EndTurn("error")


def test_RTY_03_broken_copy_backoff_cap_off_grows_past_32_s():
    d = Drive(Behaviours(backoff_cap=False), _start={"stream": False})
    d.fail_n(10, code=429)
    assert [r.delay_s for r in d.of(NoteRetry)] == [0.5 * 2**n for n in range(10)]
    healthy = Drive(_start={"stream": False})
    healthy.fail_n(10, code=429)
    assert [r.delay_s for r in healthy.of(NoteRetry)][-4:] == [32.0] * 4


def test_STR_01_broken_copy_fallback_after_first_cut_off_resends_the_stream_first():
    d = Drive(Behaviours(fallback_after_first_cut=False))
    for _ in range(11):
        d.stream(delta_event("half"), fail="reset")
        if d.core.phase is Phase.WAIT:
            d.fire()
    # The cut stream is resent streaming 10 times (with backoff), then the fallback comes.
    assert [s.body["stream"] for s in d.sends] == [True] * 11 + [False]
    assert [r.delay_s for r in d.of(NoteRetry)] == [0.5, 1, 2, 4, 8, 16, 32, 32, 32, 32]
    assert len(d.of(RemoveMessage)) == 11  # each failed attempt's message is still withdrawn
    d.full("whole")
    assert d.end == EndTurn("completed")
    healthy = Drive()
    healthy.stream(delta_event("half"), fail="reset")
    assert [s.body["stream"] for s in healthy.sends] == [True, False]


WINDOW_400 = (
    "This model's maximum context length is 10000 tokens. However, you requested 9000 in the "
    "messages"
)


def test_RTY_11_switches_are_narrow_window_correction_vs_compaction():
    d = Drive(Behaviours(window_correction=False))
    d.status(400, body=WINDOW_400 + ' "code": "context_length_exceeded"')
    assert len(d.of(SendRequest)) == 1 and d.end == EndTurn("error")  # no compaction either
    d = Drive(Behaviours(context_recovery=False))  # compaction off: the window is still fixed
    d.status(400, body=WINDOW_400)
    assert d.sends[-1].body["max_tokens"] == 10000 - 9000 - 16
    d = Drive(Behaviours(window_correction=False))  # window fix off: compaction still happens
    d.status(400, body=OVERFLOW)
    assert d.of(SendRequest)[-1].purpose == "compact"


def test_ERR_02_switch_off_shows_the_recovered_stream_failure_too():
    d = Drive(Behaviours(withhold_errors=False))
    d.stream(delta_event("half"), fail="reset")
    assert [e.kind for e in d.of(ShowError)] == ["server"]
    d.full("fine")
    assert d.end == EndTurn("completed")
    d = Drive()
    d.stream(delta_event("half"), fail="reset")
    d.full("fine")
    assert not d.of(ShowError)
