"""The tool layer inside the recovery core: decisions on hand-fed outcomes (no sockets, no sleeps).

Each test plays the driver: it feeds one model reply with tool calls, answers each ``RunTool``
attempt with a raw ``ToolOutcome`` and fires timers by hand, then checks what the model sees
(``ShowToolResult`` and the tool message of the next request) and the ``LogToolCall`` records.
"""

from __future__ import annotations

import json

from conformance.reference.core import (
    Aborted,
    Behaviours,
    BodyEnded,
    CancelTimer,
    CancelTool,
    EndTurn,
    HeadersReceived,
    LogToolCall,
    NoteRetry,
    RunTool,
    SendRequest,
    ShowToolResult,
    StartTimer,
    TimerFired,
    ToolOutcome,
    TurnCore,
)
from conformance.reference.formatting import cap_output
from conformance.reference.tool_policy import OUTPUT_LIMIT

HINT = "(output truncated, please reduce your output)"
TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
    {
        "name": "write_note",
        "description": "Write a note.",
        "parameters": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title"],
        },
    },
    {"name": "batch", "description": "Run several calls.", "parameters": {"type": "object"}},
]


class Turn:
    """One turn answered by hand; ``now`` advances one second per event."""

    def __init__(
        self,
        *,
        debug: bool = True,
        behaviours: Behaviours = Behaviours(),  # noqa: B008 - frozen
        **config,
    ) -> None:
        start = {
            "model": "m",
            "prompt": "go",
            "stream": False,
            "tools": TOOLS,
            "tool_endpoint": "http://tools",
            "config": config,
        }
        if debug:
            start["debug_dir"] = "/dbg"
        self.core = TurnCore(start, behaviours=behaviours, rand=lambda: 0.5)
        self.now = 0.0
        self.log: list = list(self.core.begin(self.now))

    def feed(self, event) -> list:
        self.now += 1.0
        out = self.core.handle(event, self.now)
        self.log += out
        return out

    def of(self, kind) -> list:
        return [a for a in self.log if isinstance(a, kind)]

    def reply(self, *calls: tuple[str, str, str], finish: str = "tool_calls") -> list:
        """The model answers the latest request with these (id, name, arguments) calls."""
        rid = self.of(SendRequest)[-1].request_id
        tool_calls = [
            {"id": c, "type": "function", "function": {"name": n, "arguments": a}}
            for c, n, a in calls
        ]
        msg = {"role": "assistant", "content": None, "tool_calls": tool_calls}
        body = json.dumps({"choices": [{"message": msg, "finish_reason": finish}]})
        return self.feed(HeadersReceived(rid, 200, {}, None)) + self.feed(BodyEnded(rid, body))

    def outcome(self, kind: str, text: str = "", error_type: str = "") -> list:
        run = self.of(RunTool)[-1]
        return self.feed(ToolOutcome(run.call_id, kind, text, error_type))

    def fire(self, purpose: str) -> list:
        cancelled = {a.timer_id for a in self.of(CancelTimer)}
        fired = {a.timer_id for a in self.log if isinstance(a, TimerFired)}
        live = [t for t in self.of(StartTimer) if t.purpose == purpose]
        live = [t for t in live if t.timer_id not in cancelled | fired]
        return self.feed(TimerFired(live[-1].timer_id))

    @property
    def results(self) -> list[ShowToolResult]:
        return self.of(ShowToolResult)

    @property
    def records(self) -> list[dict]:
        return [a.record for a in self.of(LogToolCall)]

    def last_tool_message(self) -> dict:
        return self.of(SendRequest)[-1].body["messages"][-1]


# ---- decided before any execution ---------------------------------------------------------
def test_TOL_01_unknown_tool_lists_tools_and_suggests_without_running():
    t = Turn()
    t.reply(("c1", "get_wether", "{}"))
    [res] = t.results
    assert res.status == "unknown" and "does not exist" in res.output
    assert "get_weather" in res.output and "write_note" in res.output
    assert "Did you mean 'get_weather'" in res.output
    assert not t.of(RunTool) and t.last_tool_message()["content"] == res.output


def test_TOL_02_schema_violation_names_the_field_and_is_not_run():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "Oslo", "days": "two"}'))
    [res] = t.results
    assert res.status == "invalid" and "days" in res.output and "integer" in res.output
    assert not t.of(RunTool)


def test_TJS_01_malformed_arguments_of_a_cut_reply_carry_the_hint():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": ["Os'), finish="length")
    assert t.results[0].status == "invalid" and HINT in t.results[0].output
    assert not t.of(RunTool)


def test_TJS_05_malformed_arguments_without_truncation_have_no_hint():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "Os'))
    assert t.results[0].status == "invalid" and HINT not in t.results[0].output


def test_TJS_02_recovered_arguments_run_and_the_warning_follows_the_output():
    t = Turn()
    t.reply(("c1", "write_note", '{"title": "t", "body": "long te'), finish="length")
    assert t.of(RunTool) == [RunTool("c1", "write_note", {"title": "t", "body": "long te"}, 1)]
    t.outcome("ok", "saved")
    out = t.results[0].output
    assert t.results[0].status == "ok" and out.startswith("saved\n\n") and "truncated" in out


DANGLING = '{"title": "t", "body": '  # cut right after a key: it has no value


def test_TJS_04_a_dangling_key_stays_unparsable_and_nothing_runs():
    # Seed 000: closing strings and braces gives '{"title": "t", "body": }', still not JSON.
    t = Turn()
    t.reply(("c1", "write_note", DANGLING), finish="length")
    [res] = t.results
    assert res.status == "invalid" and res.output.startswith("Error: Invalid JSON")
    assert res.output.endswith(HINT)
    assert not t.of(RunTool)
    sent = t.of(SendRequest)[-1].body["messages"]
    assert {"role": "tool", "tool_call_id": "c1", "content": res.output} in sent


def test_TJS_04_a_dangling_key_without_a_length_finish_has_no_hint():
    t = Turn()
    t.reply(("c1", "write_note", DANGLING))
    [res] = t.results
    assert res.status == "invalid" and "Invalid JSON" in res.output and HINT not in res.output


def test_TJS_04_switch_off_drops_the_dangling_key_and_runs_the_call():
    t = Turn(behaviours=Behaviours(strict_truncated_json=False))
    t.reply(("c1", "write_note", DANGLING), finish="length")
    assert t.of(RunTool) == [RunTool("c1", "write_note", {"title": "t"}, 1)]


def test_TJS_06_double_encoded_object_is_repaired_before_running():
    t = Turn()
    t.reply(("c1", "get_weather", json.dumps(json.dumps({"city": "Rome"}))))
    assert t.of(RunTool)[0].arguments == {"city": "Rome"}


# ---- raw outcomes of an attempt -----------------------------------------------------------
def test_TOL_03_execution_error_is_a_result_and_the_loop_goes_on():
    t = Turn()
    t.reply(("c1", "write_note", '{"title": "t"}'))
    t.outcome("error", "disk full", "execution_error")
    [res] = t.results
    assert res.status == "error"
    assert res.output == "Error: tool 'write_note' failed (execution_error): disk full"
    assert len(t.of(SendRequest)) == 2 and len(t.of(RunTool)) == 1


def test_TOL_05_permission_denied_gives_reason_and_remedy_and_is_not_retried():
    t = Turn()
    t.reply(("c1", "write_note", '{"title": "t"}'))
    t.outcome("denied", "writes are disabled")
    [res] = t.results
    assert res.status == "denied" and "writes are disabled" in res.output
    assert "ask the user to allow 'write_note'" in res.output
    assert len(t.of(RunTool)) == 1


def test_TOL_07_transient_failure_is_retried_invisibly_after_a_backoff():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    assert t.outcome("transient", "busy") == [StartTimer(2, 0.5, "tool_retry")]
    assert not t.results
    t.fire("tool_retry")
    assert t.of(RunTool)[-1] == RunTool("c1", "get_weather", {"city": "x"}, 2)
    t.outcome("ok", "ok now")
    assert [(r.status, r.output) for r in t.results] == [("ok", "ok now")]
    assert not t.of(NoteRetry)  # invisible: no retry line, one result
    assert t.records[0]["attempts"] == 2


def test_TOL_07_transient_gives_up_after_two_retries_with_the_last_message():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    delays = []
    for _ in range(2):
        delays += [a.delay_s for a in t.outcome("transient", "busy") if isinstance(a, StartTimer)]
        t.fire("tool_retry")
    t.outcome("transient", "still busy")
    assert delays == [0.5, 1.0] and len(t.of(RunTool)) == 3
    assert t.results[0].output == "Error: tool 'get_weather' is temporarily unavailable: still busy"
    assert t.results[0].status == "error" and t.records[0]["attempts"] == 3


def test_TOL_08_tool_failures_are_not_retried_as_api_requests():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    t.outcome("error", "boom", "execution_error")
    assert len(t.of(SendRequest)) == 2 and not t.of(NoteRetry)


def test_TOL_04_time_limit_stops_the_call_and_names_the_unscaled_limit():
    t = Turn(tool_timeout_s=60)
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    assert StartTimer(1, 60.0, "tool_limit") in t.log  # the driver applies the time scale
    out = t.fire("tool_limit")
    assert CancelTool("c1") in out
    [res] = t.results
    assert res.status == "timeout"
    assert res.output == "Error: tool 'get_weather' timed out after 60 seconds and was stopped."
    assert t.outcome("ok", "late") == []  # the cancelled attempt's outcome is stale


def test_TOL_04_the_limit_covers_the_retry_waits():
    t = Turn(tool_timeout_s=5)
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    t.outcome("transient", "busy")
    out = t.fire("tool_limit")
    assert not any(isinstance(a, CancelTool) for a in out)  # nothing was running
    assert any(isinstance(a, CancelTimer) for a in out)  # the retry wait is dropped
    assert t.results[0].status == "timeout" and len(t.of(RunTool)) == 1


def test_TOL_04_an_ok_outcome_cancels_the_time_limit():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    limit = t.of(StartTimer)[-1]
    assert CancelTimer(limit.timer_id) in t.outcome("ok", "sunny")
    assert t.feed(TimerFired(limit.timer_id)) == []


def test_TOL_06_every_call_gets_one_result_in_order_mixing_decided_and_run_calls():
    t = Turn()
    t.reply(("a", "nope", "{}"), ("b", "get_weather", '{"city": "x"}'), ("c", "x", "{}"))
    t.outcome("ok", "sunny")
    msgs = t.of(SendRequest)[-1].body["messages"]
    assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == ["a", "b", "c"]
    assert [r.status for r in t.results] == ["unknown", "ok", "unknown"]


def test_TOL_09_batch_is_run_as_one_unit_and_its_output_taken_as_is():
    t = Turn()
    items = {"items": [{"tool": "write_note", "arguments": {"title": "t"}}]}
    t.reply(("b1", "batch", json.dumps(items)))
    assert t.of(RunTool) == [RunTool("b1", "batch", items, 1)]
    assert not any(s.purpose == "tool_limit" for s in t.of(StartTimer))  # items are bounded
    text = "batch of 1 item(s), 1 failed:\n[1] ...: failed: x" + "y" * (OUTPUT_LIMIT + 10)
    t.outcome("final", text, "error")
    assert (t.results[0].status, t.results[0].output) == ("error", text)


def test_TRN_10_background_call_finishes_into_the_log_only():
    t = Turn()
    t.reply(("bg", "get_weather", '{"city": "x", "run_in_background": true}'))
    assert t.results[0].output.startswith("Started in the background")
    assert len(t.of(SendRequest)) == 2  # not waited for
    t.outcome("transient", "busy")  # retried even while the next request is in flight
    t.fire("tool_retry")
    t.outcome("ok", "done")
    assert len(t.results) == 1 and t.records[-1]["status"] == "ok"


def test_abort_cancels_a_running_tool_and_its_timers():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    out = t.feed(Aborted())
    assert CancelTool("c1") in out and out[-1] == EndTurn("aborted")
    assert any(isinstance(a, CancelTimer) for a in out)


# ---- output size ----------------------------------------------------------------------------
def test_FMT_01_FMT_02_output_over_the_limit_keeps_head_and_tail_with_a_notice():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    big = "".join(f"line {i:06d} xxxxxxxx\n" for i in range(3000))
    t.outcome("ok", big)
    out = t.results[0].output
    assert out == cap_output(big, OUTPUT_LIMIT) and len(out) <= OUTPUT_LIMIT
    assert str(len(big)) in out and "omitted" in out
    assert out.startswith("line 000000") and out.endswith("line 002999 xxxxxxxx\n")


def test_FMT_01_the_truncation_warning_survives_the_cap():
    t = Turn()
    t.reply(("c1", "write_note", '{"title": "t", "body": "b'), finish="length")
    t.outcome("ok", "z" * (OUTPUT_LIMIT * 2))
    out = t.results[0].output
    assert "omitted" in out and out.rstrip().endswith(HINT)


def test_FMT_03_short_output_is_passed_verbatim():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    t.outcome("ok", "  sunny\n\twith tabs  ")
    assert t.results[0].output == "  sunny\n\twith tabs  "


# ---- the tool-call log ----------------------------------------------------------------------
def test_DBG_03_one_record_per_call_without_arguments():
    t = Turn()
    t.reply(("c1", "get_weather", '{"city": "SECRET-CITY"}'), ("c2", "nope", "{}"))
    t.outcome("ok", "sunny")
    recs = t.records
    assert "SECRET-CITY" not in json.dumps(recs)
    assert [(r["call_id"], r["name"], r["status"], r["attempts"]) for r in recs] == [
        ("c1", "get_weather", "ok", 1),
        ("c2", "nope", "unknown", 0),  # decided without running
    ]
    assert recs[0]["duration_ms"] == 1000.0  # from the driver's clock: one event later
    assert recs[0]["arguments_chars"] == len('{"city": "SECRET-CITY"}')
    assert recs[0]["output_chars"] == len("sunny")


def test_DBG_03_no_debug_directory_no_log_actions():
    t = Turn(debug=False)
    t.reply(("c1", "get_weather", '{"city": "x"}'))
    t.outcome("ok", "sunny")
    assert not t.of(LogToolCall)
