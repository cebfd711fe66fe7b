"""TJS-02..06, TOL-02..05, TOL-07..09: passing, failing and not-applicable synthetic runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.checks import run_check
from conformance.checks.seed_strings import TRUNCATION_HINT
from conformance.checks.tjs import classify_truncated, sent_tool_calls
from tests.checks.synth import Journal, turn_end

U = {"role": "user", "content": "do it"}
S = {"type": "string"}
WF = {
    "name": "write_file",
    "parameters": {
        "type": "object",
        "properties": {"path": S, "content": S, "options": {"type": "object"}},
        "required": ["path", "content"],
    },
}
RL = {
    "name": "read_lines",
    "parameters": {
        "type": "object",
        "properties": {
            "path": S,
            "start": {"type": "integer"},
            "mode": {"type": "string", "enum": ["head", "tail"]},
        },
        "required": ["path", "start"],
    },
}


def sse(calls: list[tuple[str, str, str]], finish: str) -> str:
    lines = [
        json.dumps(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": i,
                                    "id": cid,
                                    "type": "function",
                                    "function": {"name": name, "arguments": args},
                                }
                            ]
                        },
                    }
                ]
            }
        )
        for i, (cid, name, args) in enumerate(calls)
    ]
    lines.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    return "".join(f"data: {x}\n\n" for x in [*lines, "[DONE]"])


class Run:
    """A synthetic run: model responses with tool calls, tool host entries, results sent back."""

    def __init__(self, tools: list[dict] | None = None, config: dict | None = None) -> None:
        self.j = Journal()
        self.scenario: dict[str, Any] = {"id": "x", "tools": tools or [WF, RL]}
        if config:
            self.scenario["config"] = config
        self.calls: list[tuple[str, str, str]] = []
        self.history: list[dict] = [U]
        self.events: list[dict] = []

    def end(self, reason: str = "completed") -> Run:
        """The agent ends its turn (until then, what has not come yet may still come)."""
        self.events.append(turn_end(reason))
        return self

    def model(self, *calls: tuple[str, str, str], finish: str = "tool_calls") -> dict:
        e = self.j.chat(body={"model": "m", "stream": True, "messages": list(self.history)})
        e["response"]["sent"] = sse(list(calls), finish)
        if finish == "length":
            e["fault"] = "length"
        self.calls = list(calls)
        return e

    def tool(
        self,
        name: str,
        cid: str,
        args: Any,
        behaviour: str,
        payload: dict | None = None,
        *,
        status: int = 200,
        wait: float = 0.0,
        duration: float = 0.01,
        answered: bool = True,
        left: float | None = None,
    ) -> dict:
        """``left``: the agent hung up that long after the call (the host journals it gone)."""
        j = self.j
        j.t += wait
        start = j.t
        j.t += duration
        gone = {
            "status": None,
            "sent": "",
            "t_headers_ns": None,
            "t_end_ns": j._ns(start + (left or 0.0)),
            "end": "client_gone",
        }
        e = {
            "seq": len(j.entries),
            "kind": "tool",
            "tool": name,
            "call_id": cid,
            "arguments": args,
            "behaviour": behaviour,
            "t_arrival_ns": j._ns(start),
            "response": {
                "status": status,
                "sent": json.dumps(payload or {"output": "ok"}),
                "t_headers_ns": j._ns(j.t),
                "t_end_ns": j._ns(j.t),
                "end": "complete",
            }
            if answered and left is None
            else gone
            if left is not None
            else None,
            "harness_error": None,
        }
        j.entries.append(e)
        return e

    def send_back(
        self, results: dict[str, str], wait: float = 0.0, extra: list | None = None
    ) -> dict:
        assistant = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c, "type": "function", "function": {"name": n, "arguments": a}}
                for c, n, a in self.calls
            ],
        }
        tool_msgs = [{"role": "tool", "tool_call_id": c, "content": t} for c, t in results.items()]
        self.history += [assistant, *tool_msgs, *(extra or [])]
        return self.j.chat(
            wait=wait, body={"model": "m", "stream": True, "messages": list(self.history)}
        )

    def check(self, cid: str) -> Any:
        return run_check(cid, self.j.evidence(list(self.events), scenario=self.scenario))


def outcome(r: Run, cid: str) -> str:
    return r.check(cid).outcome


# --- argument text classification --------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"a": 1}', "whole"),
        ('{"path": "a.txt", "content": "hel', "recoverable"),
        ('{"path": "a.txt"', "recoverable"),
        ('{"a": {"b": "c"', "recoverable"),
        ('{"a": ["x", "y', "array"),
        ('{"path": "a.txt" "content": "hel', "unrecoverable"),
        # Closing strings and braces is the whole repair: a dangling key, a trailing comma or
        # a literal cut short stay unparsable (dropping them would be a guess).
        ('{"path": "a.txt", "content":', "unrecoverable"),
        ('{"path": "a.txt", "content": ', "unrecoverable"),
        ('{"path": "a.txt",', "unrecoverable"),
        ('{"path": "a.txt", "force": tr', "unrecoverable"),
    ],
)
def test_tjs_classify_truncated(text: str, kind: str) -> None:
    assert classify_truncated(text)[0] == kind


def test_tjs_sent_tool_calls_non_streaming() -> None:
    e = {
        "response": {
            "stream": False,
            "sent": json.dumps(
                {
                    "choices": [
                        {
                            "message": {
                                "tool_calls": [
                                    {"id": "c", "function": {"name": "f", "arguments": "{}"}}
                                ]
                            }
                        }
                    ]
                }
            ),
        }
    }
    assert sent_tool_calls(e) == [{"id": "c", "name": "f", "arguments": "{}"}]


# --- TJS-02 ----------------------------------------------------------------------------------
CUT = '{"path": "a.txt", "content": "hel'
WARN = "[warning] the tool arguments were truncated and repaired"


def tjs02_run(result: str, executed_args: Any = None, execute: bool = True) -> Run:
    r = Run()
    r.model(("c1", "write_file", CUT), finish="length")
    if execute:
        r.tool(
            "write_file",
            "c1",
            executed_args or {"path": "a.txt", "content": "hel"},
            "output",
            {"output": "wrote 3 bytes"},
        )
    r.send_back({"c1": result})
    return r


def test_tjs_02_pass_closed_executed_warned() -> None:
    assert outcome(tjs02_run(f"wrote 3 bytes\n\n{WARN}"), "TJS-02") == "pass"


def test_tjs_02_fail_no_warning() -> None:
    f = tjs02_run("wrote 3 bytes").check("TJS-02")
    assert f.outcome == "fail" and "warning" in f.observed


def test_tjs_02_fail_warning_before_output_only() -> None:
    assert outcome(tjs02_run(f"{WARN}\nwrote 3 bytes"), "TJS-02") == "fail"


def test_tjs_02_fail_not_executed() -> None:
    r = tjs02_run(f"Error: invalid JSON {TRUNCATION_HINT}", execute=False)
    assert outcome(r, "TJS-02") == "fail"


def test_tjs_02_fail_executed_with_other_arguments() -> None:
    r = tjs02_run(f"wrote 0 bytes\n{WARN}", executed_args={"path": "a.txt", "content": ""})
    assert outcome(r, "TJS-02") == "fail"


def test_tjs_02_not_applicable_without_length() -> None:
    r = Run()
    r.model(("c1", "write_file", '{"path": "a", "content": "b"}'))
    r.tool("write_file", "c1", {"path": "a", "content": "b"}, "output")
    r.send_back({"c1": "ok"})
    assert outcome(r, "TJS-02") == "not_applicable"


# --- TJS-03 / TJS-04 -------------------------------------------------------------------------
def cut_run(args: str, result: str, execute: bool = False) -> Run:
    r = Run()
    r.model(("c1", "write_file", args), finish="length")
    if execute:
        r.tool("write_file", "c1", {"path": "a"}, "output")
    r.send_back({"c1": result})
    return r


ARRAY = '{"path": "a.txt", "lines": ["one", "tw'
BROKEN = '{"path": "a.txt" "content": "hel'


def test_tjs_03_pass_not_recovered_standard_error() -> None:
    r = cut_run(ARRAY, f"Error: Invalid JSON in tool arguments. {TRUNCATION_HINT}")
    assert outcome(r, "TJS-03") == "pass"


def test_tjs_03_fail_recovered_and_executed() -> None:
    r = cut_run(ARRAY, f"ok\n{WARN}", execute=True)
    assert outcome(r, "TJS-03") == "fail"


def test_tjs_03_fail_no_hint() -> None:
    assert outcome(cut_run(ARRAY, "Error: Invalid JSON in tool arguments."), "TJS-03") == "fail"


def test_tjs_03_not_applicable_without_array() -> None:
    r = cut_run(BROKEN, f"Error: bad {TRUNCATION_HINT}")
    assert outcome(r, "TJS-03") == "not_applicable"


def test_tjs_04_pass_error_with_hint() -> None:
    r = cut_run(BROKEN, f"Error: Invalid JSON in tool arguments. {TRUNCATION_HINT}")
    assert outcome(r, "TJS-04") == "pass"


def test_tjs_04_fail_hint_missing() -> None:
    assert outcome(cut_run(BROKEN, "Error: Invalid JSON."), "TJS-04") == "fail"


def test_tjs_04_fail_executed() -> None:
    r = cut_run(BROKEN, f"ok {TRUNCATION_HINT}", execute=True)
    assert outcome(r, "TJS-04") == "fail"


DANGLING = '{"path": "a.txt", "content": '


def test_tjs_04_a_dangling_key_is_unparsable() -> None:
    # Closing leaves {"path": "a.txt", "content": } : an error with the hint, nothing runs.
    assert outcome(cut_run(DANGLING, f"Error {TRUNCATION_HINT}"), "TJS-04") == "pass"
    # Dropping the dangling key and running the call is a lenient parser's guess.
    r = cut_run(DANGLING, f"wrote 0 bytes\n{WARN}", execute=True)
    f = r.check("TJS-04")
    assert f.outcome == "fail" and "was executed" in f.observed


# --- TJS-01 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [ARRAY, BROKEN, DANGLING])
def test_tjs_01_pass_malformed_not_run_error_with_hint(args: str) -> None:
    r = cut_run(args, f"Error: Invalid JSON in tool arguments. {TRUNCATION_HINT}")
    assert outcome(r, "TJS-01") == "pass"


@pytest.mark.parametrize("args", [ARRAY, BROKEN, DANGLING])
def test_tjs_01_fail_malformed_call_ran(args: str) -> None:
    # The hint is there, but the tool host shows the broken call ran.
    r = cut_run(args, f"ok {TRUNCATION_HINT}", execute=True)
    f = r.check("TJS-01")
    assert f.outcome == "fail" and "was executed" in f.observed


def test_tjs_01_fail_paraphrased_hint() -> None:
    r = cut_run(BROKEN, "Error: invalid JSON (output was truncated, reduce output)")
    f = r.check("TJS-01")
    assert f.outcome == "fail" and "lacks the hint" in f.observed


def test_tjs_01_not_its_business_valid_or_repaired_arguments_in_a_length_finish() -> None:
    # Whole arguments in a length finish run normally; repairable ones are TJS-02's.
    for args, result in (
        ('{"path": "a.txt", "content": "hi"}', "wrote 2 bytes"),
        ('{"path": "a.txt", "content": "hel', f"wrote 3 bytes\n{WARN}"),
    ):
        r = cut_run(args, result, execute=True)
        assert outcome(r, "TJS-01") == "not_applicable", args


def test_tjs_01_waits_for_the_result() -> None:
    r = Run()
    r.model(("c1", "write_file", BROKEN), finish="length")
    assert outcome(r, "TJS-01") == "not_applicable"  # the result may still be sent
    f = r.end("error").check("TJS-01")
    assert f.outcome == "fail" and "no tool result" in f.observed


# --- TJS-05 ----------------------------------------------------------------------------------
def tjs05_run(result: str, execute: bool = False) -> Run:
    r = Run()
    r.model(("c1", "write_file", '{"path": "a.txt", "content": hello}'))
    if execute:
        r.tool("write_file", "c1", {"path": "a.txt"}, "output")
    r.send_back({"c1": result})
    return r


def test_tjs_05_pass_invalid_json_no_hint() -> None:
    r = tjs05_run("Error: Invalid JSON in tool arguments: Expecting value at column 31.")
    assert outcome(r, "TJS-05") == "pass"


def test_tjs_05_fail_carries_hint() -> None:
    r = tjs05_run(f"Error: Invalid JSON in tool arguments. {TRUNCATION_HINT}")
    assert outcome(r, "TJS-05") == "fail"


def test_tjs_05_fail_vague_error() -> None:
    assert outcome(tjs05_run("Error: the tool failed."), "TJS-05") == "fail"


def test_tjs_05_fail_executed() -> None:
    assert outcome(tjs05_run("Invalid JSON, ran anyway", execute=True), "TJS-05") == "fail"


def test_tjs_05_not_applicable_for_valid_json() -> None:
    r = Run()
    r.model(("c1", "write_file", '{"path": "a", "content": "b"}'))
    r.send_back({"c1": "ok"})
    assert outcome(r, "TJS-05") == "not_applicable"


# --- TJS-06 ----------------------------------------------------------------------------------
WHOLE = json.dumps(json.dumps({"path": "a.txt", "content": "hi"}))
FIELD = json.dumps({"path": "a.txt", "content": "hi", "options": json.dumps({"mode": "fast"})})


def tjs06_run(args: str, executed: Any) -> Run:
    r = Run()
    r.model(("c1", "write_file", args))
    if executed is not None:
        r.tool("write_file", "c1", executed, "output")
    r.send_back({"c1": "ok"})
    return r


def test_tjs_06_pass_whole_arguments_decoded() -> None:
    r = tjs06_run(WHOLE, {"path": "a.txt", "content": "hi"})
    assert outcome(r, "TJS-06") == "pass"


def test_tjs_06_pass_field_decoded() -> None:
    r = tjs06_run(FIELD, {"path": "a.txt", "content": "hi", "options": {"mode": "fast"}})
    assert outcome(r, "TJS-06") == "pass"


def test_tjs_06_fail_not_executed() -> None:
    assert outcome(tjs06_run(WHOLE, None), "TJS-06") == "fail"


def test_tjs_06_fail_field_left_a_string() -> None:
    r = tjs06_run(FIELD, {"path": "a.txt", "content": "hi", "options": '{"mode": "fast"}'})
    assert outcome(r, "TJS-06") == "fail"


def test_tjs_06_not_applicable() -> None:
    assert outcome(tjs06_run('{"path": "a", "content": "b"}', None), "TJS-06") == "not_applicable"


# --- TOL-02 ----------------------------------------------------------------------------------
def tol02_run(args: str, result: str, execute: bool = False) -> Run:
    r = Run()
    r.model(("c1", "read_lines", args))
    if execute:
        r.tool("read_lines", "c1", json.loads(args), "output")
    r.send_back({"c1": result})
    return r


def test_tol_02_pass_wrong_type() -> None:
    r = tol02_run(
        '{"path": "a", "start": "ten"}', "Error: field 'start': expected type 'integer', got str"
    )
    assert outcome(r, "TOL-02") == "pass"


def test_tol_02_fail_type_not_stated() -> None:
    f = tol02_run('{"path": "a", "start": "ten"}', "Error: field 'start' is wrong").check("TOL-02")
    assert f.outcome == "fail" and "integer" in f.observed


def test_tol_02_fail_field_not_named() -> None:
    r = tol02_run('{"path": "a", "start": "ten"}', "Error: expected an integer")
    assert outcome(r, "TOL-02") == "fail"


def test_tol_02_fail_executed_anyway() -> None:
    r = tol02_run('{"path": "a", "start": "ten"}', "start integer", execute=True)
    assert outcome(r, "TOL-02") == "fail"


def test_tol_02_missing_field_needs_its_type() -> None:
    ok = tol02_run('{"path": "a"}', "Error: missing required field 'start' (integer)")
    bare = tol02_run('{"path": "a"}', "Error: missing required field(s): 'start'")
    assert outcome(ok, "TOL-02") == "pass"
    assert outcome(bare, "TOL-02") == "fail"


def test_tol_02_enum_needs_allowed_values() -> None:
    args = '{"path": "a", "start": 1, "mode": "middle"}'
    ok = tol02_run(args, "Error: field 'mode': 'middle' is not one of ['head', 'tail']")
    bare = tol02_run(args, "Error: field 'mode' has a bad value")
    assert outcome(ok, "TOL-02") == "pass"
    assert outcome(bare, "TOL-02") == "fail"


def test_tol_02_not_applicable_for_valid_arguments() -> None:
    r = tol02_run('{"path": "a", "start": 1}', "line 1", execute=True)
    assert outcome(r, "TOL-02") == "not_applicable"


# --- TOL-03 ----------------------------------------------------------------------------------
ERR = {"error": {"type": "execution_error", "message": "OSError: no space left on device"}}


def tol03_run(result: str | None) -> Run:
    r = Run()
    r.model(("c1", "write_file", '{"path": "a", "content": "b"}'))
    r.tool("write_file", "c1", {"path": "a", "content": "b"}, "error", ERR)
    if result is not None:
        r.send_back({"c1": result})
    return r


def test_tol_03_pass_error_fed_back() -> None:
    r = tol03_run("Error: tool 'write_file' failed: OSError: no space left on device")
    assert outcome(r, "TOL-03") == "pass"


def test_tol_03_fail_message_lost() -> None:
    assert outcome(tol03_run("Error: something went wrong"), "TOL-03") == "fail"


def test_tol_03_fail_loop_stopped() -> None:
    assert outcome(tol03_run(None).end("error"), "TOL-03") == "fail"
    assert outcome(tol03_run(None), "TOL-03") == "not_applicable"  # the result may still come


def test_tol_03_not_applicable() -> None:
    r = Run()
    r.model(("c1", "write_file", '{"path": "a", "content": "b"}'))
    r.tool("write_file", "c1", {"path": "a", "content": "b"}, "output")
    r.send_back({"c1": "ok"})
    assert outcome(r, "TOL-03") == "not_applicable"


# --- TOL-04 ----------------------------------------------------------------------------------
RT = {"name": "run_tests", "parameters": {"type": "object", "properties": {"target": S}}}


def tol04_run(result: str, *, moved: float = 2.1, answered: bool = False, limit: Any = 2) -> Run:
    r = Run(tools=[RT], config={"tool_timeout_s": limit} if limit else None)
    r.model(("c1", "run_tests", '{"target": "all"}'))
    t = r.tool(
        "run_tests",
        "c1",
        {"target": "all"},
        "hang",
        {"error": {"type": "timeout"}},
        status=504,
        duration=30.0 if answered else 0.0,
        answered=answered,
    )
    r.j.t = t["t_arrival_ns"] / r.j.scale / 1e9 + moved
    r.send_back({"c1": result})
    return r


def test_tol_04_pass_stopped_at_limit_and_stated() -> None:
    r = tol04_run("Error: tool 'run_tests' timed out after 2 seconds and was stopped.")
    assert outcome(r, "TOL-04") == "pass"


def test_tol_04_pass_limit_in_ms() -> None:
    assert outcome(tol04_run("Timeout: killed after 2000ms"), "TOL-04") == "pass"


def test_tol_04_fail_limit_not_stated() -> None:
    f = tol04_run("Error: tool 'run_tests' timed out.").check("TOL-04")
    assert f.outcome == "fail" and "state" in f.observed


def test_tol_04_fail_waited_for_the_tool() -> None:
    r = tol04_run("Error: timed out after 2 seconds", moved=30.5, answered=True)
    f = r.check("TOL-04")
    assert f.outcome == "fail" and "waited" in f.observed


def test_tol_04_fail_waited_on_a_run_cut_short() -> None:
    # The tool answered after 30 s and nothing of the agent's came first: a FAIL that stands
    # whatever the agent would have done next (TOL-04 is final on partial evidence).
    r = Run(tools=[RT], config={"tool_timeout_s": 2})
    r.model(("c1", "run_tests", '{"target": "all"}'))
    r.tool(
        "run_tests",
        "c1",
        {"target": "all"},
        "hang",
        {"error": {"type": "timeout"}},
        status=504,
        duration=30.0,
        answered=True,
    )
    f = r.check("TOL-04")
    assert f.outcome == "fail" and "waited" in f.observed


def test_tol_04_not_judged_while_the_stop_may_still_come() -> None:
    r = Run(tools=[RT], config={"tool_timeout_s": 2})
    r.model(("c1", "run_tests", '{"target": "all"}'))
    r.tool("run_tests", "c1", {"target": "all"}, "hang", None, duration=0.0, answered=False)
    assert outcome(r, "TOL-04") == "not_applicable"
    assert outcome(r.end("error"), "TOL-04") == "fail"  # the turn ended: nothing ever followed


def test_tol_04_fail_gave_up_early() -> None:
    assert outcome(tol04_run("timed out after 2 seconds", moved=0.5), "TOL-04") == "fail"


def hung_up_run(left: float, moved: float) -> Run:
    """The agent hung up on the tool ``left`` s after the call; its next request came at ``moved``
    s, after the 30 s the tool would have taken."""
    r = Run(tools=[RT], config={"tool_timeout_s": 2})
    r.model(("c1", "run_tests", '{"target": "all"}'))
    t = r.tool("run_tests", "c1", {"target": "all"}, "hang", None, duration=0.0, left=left)
    r.j.t = t["t_arrival_ns"] / r.j.scale / 1e9 + moved
    r.send_back({"c1": "Error: tool 'run_tests' timed out after 2 seconds and was stopped."})
    return r


def test_tol_04_pass_hung_up_at_the_limit_whenever_the_next_request_came() -> None:
    # Hanging up is the stop: a next request held up (a loaded machine) is not waiting.
    assert outcome(hung_up_run(left=2.05, moved=31.0), "TOL-04") == "pass"


def test_tol_04_fail_hung_up_early_though_the_next_request_came_late() -> None:
    f = hung_up_run(left=0.5, moved=31.0).check("TOL-04")
    assert f.outcome == "fail" and "before the 2 s limit" in f.observed


def test_tol_04_fail_stopped_well_past_the_limit() -> None:
    # A limit twice the one given, its result stating the one given: the hang (30 s) was longer
    # still, so only the stop's moment tells.
    f = hung_up_run(left=4.0, moved=31.0).check("TOL-04")
    assert f.outcome == "fail" and "past the 2 s limit" in f.observed, f.observed
    f = tol04_run("timed out after 2 seconds", moved=4.0).check("TOL-04")
    assert f.outcome == "fail" and "past the 2 s limit" in f.observed, f.observed
    # A timer's slop past it is no other limit.
    assert outcome(hung_up_run(left=2.4, moved=31.0), "TOL-04") == "pass"


def test_tol_07_a_hang_hung_up_on_is_no_timeout_the_tool_reported() -> None:
    # The agent stopped the tool itself: no failure reached it to retry invisibly.
    r = hung_up_run(left=2.05, moved=2.1)
    assert outcome(r, "TOL-07") == "not_applicable"


def test_tol_04_not_applicable_without_limit() -> None:
    assert outcome(tol04_run("timed out", limit=None), "TOL-04") == "not_applicable"


# --- TOL-05 ----------------------------------------------------------------------------------
DENY = {"error": {"type": "permission_denied", "message": "read-only checkout"}}
GOOD_DENY = (
    "Error: permission denied for tool 'write_file': read-only checkout. Not retried. "
    "To obtain permission, ask the user to allow 'write_file'."
)


def tol05_run(result: str, retries: int = 0) -> Run:
    r = Run()
    r.model(("c1", "write_file", '{"path": "a", "content": "b"}'))
    for _ in range(retries + 1):
        r.tool("write_file", "c1", {"path": "a", "content": "b"}, "permission_denied", DENY)
    r.send_back({"c1": result})
    return r


def test_tol_05_pass() -> None:
    assert outcome(tol05_run(GOOD_DENY), "TOL-05") == "pass"


def test_tol_05_fail_retried() -> None:
    f = tol05_run(GOOD_DENY, retries=1).check("TOL-05")
    assert f.outcome == "fail" and "again" in f.observed


def test_tol_05_fail_no_way_to_permission() -> None:
    r = tol05_run("Error: permission denied: read-only checkout")
    assert outcome(r, "TOL-05") == "fail"


def test_tol_05_fail_reason_dropped() -> None:
    assert outcome(tol05_run("Denied. Ask the user to allow it."), "TOL-05") == "fail"


def test_tol_05_not_applicable() -> None:
    assert outcome(tol03_run("x OSError: no space left on device"), "TOL-05") == "not_applicable"


# --- TOL-07 ----------------------------------------------------------------------------------
FU = {"name": "fetch_url", "parameters": {"type": "object", "properties": {"url": S}}}
TRANSIENT = {"error": {"type": "transient", "message": "connection reset by peer"}}
ARGS = {"url": "http://e.test/"}


def tol07_run(result: str, behaviours: list[str], first: str = "transient") -> Run:
    r = Run(tools=[FU])
    r.model(("c1", "fetch_url", json.dumps(ARGS)))
    if first == "transient":
        r.tool("fetch_url", "c1", ARGS, "transient", TRANSIENT, status=503)
    else:  # the tool itself answered with a timeout
        r.tool("fetch_url", "c1", ARGS, "hang", {"error": {"type": "timeout"}}, status=504)
    for b in behaviours:
        payload = {"output": "<html>ok</html>"} if b == "output" else TRANSIENT
        r.tool("fetch_url", "c1", ARGS, b, payload, status=200 if b == "output" else 503, wait=0.5)
    r.send_back({"c1": result})
    return r


def test_tol_07_pass_retried_invisibly() -> None:
    assert outcome(tol07_run("<html>ok</html>", ["output"]), "TOL-07") == "pass"


def test_tol_07_pass_tool_timeout_retried() -> None:
    assert outcome(tol07_run("<html>ok</html>", ["output"], first="hang"), "TOL-07") == "pass"


def test_tol_07_pass_every_retry_failed() -> None:
    r = tol07_run("Error: fetch_url unavailable", ["transient", "transient"])
    assert outcome(r, "TOL-07") == "pass"


def test_tol_07_fail_not_retried() -> None:
    f = tol07_run("Error: connection reset by peer", []).check("TOL-07")
    assert f.outcome == "fail" and "not retried" in f.observed
    assert f.beyond_load  # an order on the wire: no run on a slower clock could change it
    # A retry whose output the model does not get is a failure too, but not one marked so.
    shown = tol07_run("<html>ok</html>\n(succeeded after 1 retry)", ["output"]).check("TOL-07")
    assert shown.outcome == "fail" and not shown.beyond_load


def test_tol_07_fail_retry_shown_to_model() -> None:
    r = tol07_run("<html>ok</html>\n(succeeded after 1 retry)", ["output"])
    assert outcome(r, "TOL-07") == "fail"


def test_tol_07_fail_failure_message_leaks_elsewhere() -> None:
    r = Run(tools=[FU])
    r.model(("c1", "fetch_url", json.dumps(ARGS)))
    r.tool("fetch_url", "c1", ARGS, "transient", TRANSIENT, status=503)
    r.tool("fetch_url", "c1", ARGS, "output", {"output": "<html>ok</html>"})
    note = {"role": "user", "content": "note: connection reset by peer once"}
    r.send_back({"c1": "<html>ok</html>"}, extra=[note])
    assert outcome(r, "TOL-07") == "fail"


def test_tol_07_not_applicable() -> None:
    assert outcome(tol03_run("x OSError: no space left on device"), "TOL-07") == "not_applicable"


# --- TOL-08 ----------------------------------------------------------------------------------
def test_tol_08_pass_results_sent_forward() -> None:
    r = tol03_run("Error: OSError: no space left on device")
    assert outcome(r, "TOL-08") == "pass"


def test_tol_08_fail_request_resent() -> None:
    r = Run()
    first = r.model(("c1", "write_file", '{"path": "a", "content": "b"}'))
    r.tool("write_file", "c1", {"path": "a", "content": "b"}, "error", ERR)
    r.j.chat(body=first["body"])  # the same request again
    f = r.check("TOL-08")
    assert f.outcome == "fail" and "resends" in f.observed


def test_tol_08_not_applicable_after_length_finish() -> None:
    r = Run()
    first = r.model(("c1", "write_file", '{"path": "a", "content": "b"}'), finish="length")
    r.tool("write_file", "c1", {"path": "a", "content": "b"}, "error", ERR)
    r.j.chat(body=first["body"])  # TRN-07's raised-limit resend, not a tool retry
    assert outcome(r, "TOL-08") == "not_applicable"


def test_tol_08_not_applicable_without_failure() -> None:
    assert outcome(tjs06_run(WHOLE, {"path": "a.txt", "content": "hi"}), "TOL-08") == (
        "not_applicable"
    )


# --- TOL-09 ----------------------------------------------------------------------------------
BATCH = {"name": "batch", "parameters": {"type": "object"}}
ITEMS = [
    {"tool": "write_file", "arguments": {"path": p, "content": "x"}}
    for p in ("a.txt", "b.txt", "c.txt")
]


def tol09_run(result: str) -> Run:
    r = Run(tools=[WF, BATCH])
    r.model(("c1", "batch", json.dumps({"items": ITEMS, "stop_on_error": True})))
    r.tool("write_file", "c1", ITEMS[0]["arguments"], "output", {"output": "wrote 1 byte"})
    r.tool("write_file", "c1", ITEMS[1]["arguments"], "error", {"error": {"message": "disk full"}})
    r.send_back({"c1": result})
    return r


def test_tol_09_pass_each_item_reported() -> None:
    text = (
        "Batch partly done: 1 completed, 1 failed, 1 skipped\n"
        "[completed] a.txt\n[failed] b.txt: disk full\n[skipped] c.txt: stopped after a failure"
    )
    assert outcome(tol09_run(text), "TOL-09") == "pass"


def test_tol_09_fail_skipped_reported_as_done() -> None:
    text = "[completed] a.txt\n[failed] b.txt: disk full\n[completed] c.txt"
    f = tol09_run(text).check("TOL-09")
    assert f.outcome == "fail" and "c.txt" in f.observed


def test_tol_09_fail_single_error() -> None:
    assert outcome(tol09_run("Error: batch failed: disk full"), "TOL-09") == "fail"


def test_tol_09_not_applicable() -> None:
    assert outcome(tol03_run("x OSError: no space left on device"), "TOL-09") == "not_applicable"


def test_tjs_06_executions_matched_by_time_without_call_ids() -> None:
    # An agent that sends no call_id to the tool host: executions are matched by tool name
    # between the response and the next chat request.
    r = Run()
    r.model(("c1", "write_file", WHOLE))
    r.tool("write_file", None, {"path": "a.txt", "content": "hi"}, "output")  # type: ignore[arg-type]
    r.send_back({"c1": "ok"})
    assert outcome(r, "TJS-06") == "pass"


def test_tol_05_model_calling_again_is_not_an_agent_retry() -> None:
    # The model reuses the id "c1" in a second response; each call has one invocation.
    r = tol05_run(GOOD_DENY)
    r.j.entries[-1]["response"]["sent"] = sse(
        [("c1", "write_file", '{"path": "a", "content": "b"}')], "tool_calls"
    )
    r.tool("write_file", "c1", {"path": "a", "content": "b"}, "permission_denied", DENY)
    r.send_back({"c1": GOOD_DENY})
    assert outcome(r, "TOL-05") == "pass"
