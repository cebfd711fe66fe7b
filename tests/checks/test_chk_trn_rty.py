"""TRN-03, TRN-05..10 and RTY-09..11, RTY-14, RTY-15 checks on hand-built evidence."""

from __future__ import annotations

import json
from typing import Any

from conformance.checks import rty_cases, trn
from conformance.checks.seed_strings import CONTINUATION_TEXT
from tests.checks.synth import Journal, turn_end

CONT = {"role": "user", "content": CONTINUATION_TEXT}
PROMPT = {"role": "user", "content": "Plan."}


def sse(
    text: str = "", reasoning: str = "", calls: list[dict] | None = None, finish: str = "stop"
) -> str:
    """A stream as the gateway writes it."""
    delta: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning:
        delta["reasoning_content"] = reasoning
    if calls:
        delta["tool_calls"] = [
            {"index": k, "id": c["id"], "function": {"name": c["name"], "arguments": c["args"]}}
            for k, c in enumerate(calls)
        ]
    chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def reply(
    j: Journal,
    msgs: list[dict],
    text: str = "",
    *,
    finish: str = "stop",
    calls: list[dict] | None = None,
    reasoning: str = "",
    max_tokens: int | None = 4096,
    step: int | None = None,
) -> dict:
    body: dict[str, Any] = {"model": "m", "stream": True, "messages": list(msgs)}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    e = j.chat(200, body=body, fault="length" if finish == "length" else None)
    e["response"]["sent"] = sse(text, reasoning, calls, finish)
    if step is not None:
        e["step"] = step
    return e


def asst(text: str = "", calls: list[dict] | None = None) -> dict:
    m: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        m["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "{}"}}
            for c in calls
        ]
    return m


def tool_run(j: Journal, call_id: str, name: str = "write_file", status: int = 200) -> dict:
    t = j.t + 0.001
    e = {
        "seq": len(j.entries),
        "kind": "tool",
        "tool": name,
        "call_id": call_id,
        "arguments": {},
        "t_arrival_ns": j._ns(t),
        "response": {"status": status, "t_end_ns": j._ns(t + 0.001), "sent": "{}"},
    }
    j.entries.append(e)
    j.t = t + 0.002
    return e


def result(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


TOOLS = [{"name": "write_file"}]
CALL = [{"id": "call_1", "name": "write_file", "args": '{"path": "a"}'}]


# --- TRN-03 ---------------------------------------------------------------------------------
def _trn03(with_cont: bool, run_tool: bool = True) -> Any:
    j = Journal()
    h = [PROMPT]
    reply(j, h, "Writing", finish="length", calls=CALL)
    if run_tool:
        tool_run(j, "call_1")
    nxt = [*h, asst("Writing", CALL), result("call_1")] + ([CONT] if with_cont else [])
    reply(j, nxt, "Done.")
    return j.evidence(scenario={"id": "s", "tools": TOOLS})


def test_trn_03_pass_tool_then_continuation() -> None:
    f = trn.check_trn_03(_trn03(True))
    assert f.outcome == "pass", f


def test_trn_03_fail_no_continuation_after_tool_results() -> None:
    f = trn.check_trn_03(_trn03(False))
    assert f.outcome == "fail" and "not the continuation" in f.observed


def test_trn_03_fail_hosted_tool_never_ran() -> None:
    f = trn.check_trn_03(_trn03(True, run_tool=False))
    assert f.outcome == "fail" and "tool host" in f.observed


def test_trn_03_fail_continuation_before_results() -> None:
    j = Journal()
    reply(j, [PROMPT], "Writing", finish="length", calls=CALL)
    tool_run(j, "call_1")
    reply(j, [PROMPT, asst("Writing", CALL), CONT], "Done.")
    f = trn.check_trn_03(j.evidence(scenario={"id": "s", "tools": TOOLS}))
    assert f.outcome == "fail" and "lacks the results" in f.observed


def test_trn_03_not_applicable_without_tool_truncation() -> None:
    j = Journal()
    reply(j, [PROMPT], "Hi", finish="length")
    reply(j, [PROMPT, asst("Hi"), CONT], "there")
    assert trn.check_trn_03(j.evidence()).outcome == "not_applicable"


# --- TRN-05 ---------------------------------------------------------------------------------
def _chain(j: Journal, h: list[dict], n: int, word: str) -> list[dict]:
    """n plain truncations, each continued; returns the history after the last one."""
    for k in range(n):
        reply(j, h, f"{word} {k}", finish="length")
        h = [*h, asst(f"{word} {k}"), CONT]
    return h


def _trn05(after_tool: int, continue_last: bool = True) -> Any:
    j = Journal()
    h = _chain(j, [PROMPT], 3, "plan")
    reply(j, h, "", finish="tool_calls", calls=CALL)
    tool_run(j, "call_1")
    h = [*h, asst("", CALL), result("call_1")]
    h = _chain(j, h, after_tool - 1, "more")
    reply(j, h, "last", finish="length")
    if continue_last:
        reply(j, [*h, asst("last"), CONT], "Done.")
    return j.evidence(scenario={"id": "s", "tools": TOOLS})


def test_trn_05_pass_count_restarts_after_tool() -> None:
    f = trn.check_trn_05(_trn05(3))
    assert f.outcome == "pass", f
    assert "3 since the reset, 6 in all" in f.observed


def test_trn_05_fail_turn_stopped_after_tool() -> None:
    f = trn.check_trn_05(_trn05(1, continue_last=False))
    assert f.outcome == "fail" and "1 since the reset, 4 in the turn" in f.observed


def test_trn_05_not_applicable_when_reset_cannot_matter() -> None:
    j = Journal()
    h = _chain(j, [PROMPT], 1, "plan")
    reply(j, h, "", finish="tool_calls", calls=CALL)
    h = [*h, asst("", CALL), result("call_1")]
    reply(j, h, "x", finish="length")
    reply(j, [*h, asst("x"), CONT], "Done.")
    assert trn.check_trn_05(j.evidence()).outcome == "not_applicable"


# --- TRN-06 ---------------------------------------------------------------------------------
def _trn06(go_on: bool) -> Any:
    j = Journal()
    h = _chain(j, [PROMPT], 3, "plan")
    reply(j, h, "Recording", finish="length", calls=CALL)
    if go_on:
        tool_run(j, "call_1")
        reply(j, [*h, asst("Recording", CALL), result("call_1"), CONT], "Done.")
    return j.evidence(scenario={"id": "s", "tools": TOOLS})


def test_trn_06_pass_tool_truncation_after_three_goes_on() -> None:
    f = trn.check_trn_06(_trn06(True))
    assert f.outcome == "pass" and "after 3 plain truncation(s)" in f.observed


def test_trn_06_fail_tool_truncation_ended_recovery() -> None:
    f = trn.check_trn_06(_trn06(False))
    assert f.outcome == "fail" and "after 3 plain truncation(s)" in f.observed


def test_trn_06_not_applicable_without_tool_truncation() -> None:
    j = Journal()
    _chain(j, [PROMPT], 2, "plan")
    assert trn.check_trn_06(j.evidence()).outcome == "not_applicable"


# --- TRN-07 ---------------------------------------------------------------------------------
def test_trn_07_pass_limit_raised_first() -> None:
    j = Journal()
    reply(j, [PROMPT], "Once", finish="length", max_tokens=8192)
    reply(j, [PROMPT], "Once upon", finish="length", max_tokens=32768)
    reply(j, [PROMPT, asst("Once upon"), CONT], "The end.", max_tokens=32768)
    f = trn.check_trn_07(j.evidence(scenario={"id": "s", "config": {"max_output_tokens": None}}))
    assert f.outcome == "pass" and "8192 raised to 32768" in f.observed


def test_trn_07_fail_continued_at_the_default_limit() -> None:
    j = Journal()
    reply(j, [PROMPT], "Once", finish="length", max_tokens=8192)
    reply(j, [PROMPT, asst("Once"), CONT], "The end.", max_tokens=8192)
    f = trn.check_trn_07(j.evidence(scenario={"id": "s", "config": {}}))
    assert f.outcome == "fail" and "changed the messages" in f.observed


def test_trn_07_fail_resent_without_raising() -> None:
    j = Journal()
    reply(j, [PROMPT], "Once", finish="length", max_tokens=8192)
    reply(j, [PROMPT], "Once", max_tokens=8192)
    f = trn.check_trn_07(j.evidence(scenario={"id": "s", "config": {}}))
    assert f.outcome == "fail" and "not raised" in f.observed


def test_trn_07_user_limit_never_raised() -> None:
    sc = {"id": "s", "config": {"max_output_tokens": 2048}}
    j = Journal()
    reply(j, [PROMPT], "Once", finish="length", max_tokens=2048)
    reply(j, [PROMPT, asst("Once"), CONT], "The end.", max_tokens=2048)
    assert trn.check_trn_07(j.evidence(scenario=sc)).outcome == "pass"
    j = Journal()
    reply(j, [PROMPT], "Once", finish="length", max_tokens=2048)
    reply(j, [PROMPT], "Once upon", max_tokens=8192)
    assert trn.check_trn_07(j.evidence(scenario=sc)).outcome == "fail"


def test_trn_07_not_applicable_without_length() -> None:
    j = Journal()
    reply(j, [PROMPT], "Hello")
    assert trn.check_trn_07(j.evidence(scenario={"id": "s"})).outcome == "not_applicable"


# --- TRN-08 ---------------------------------------------------------------------------------
def test_trn_08_pass_text_carried() -> None:
    j = Journal()
    reply(j, [PROMPT], "Water evaporates", finish="length")
    reply(j, [PROMPT, asst("Water evaporates"), CONT], " and rains.")
    assert trn.check_trn_08(j.evidence()).outcome == "pass"


def test_trn_08_fail_text_dropped() -> None:
    j = Journal()
    reply(j, [PROMPT], "Water evaporates", finish="length")
    reply(j, [PROMPT, CONT], "Water evaporates and rains.")
    f = trn.check_trn_08(j.evidence())
    assert f.outcome == "fail" and "Water evaporates" in f.observed
    # Old text: "...; assistant messages added: []" (a Python list).
    assert f.observed.endswith("assistant messages added: none"), f.observed


def test_trn_08_reasoning_only_carried_as_reasoning() -> None:
    j = Journal()
    reply(j, [PROMPT], "", reasoning="Stages in order", finish="length")
    kept = {"role": "assistant", "content": "[cut]", "reasoning_content": "Stages in order"}
    reply(j, [PROMPT, kept, CONT], "Evaporation.")
    assert trn.check_trn_08(j.evidence()).outcome == "pass"
    j = Journal()
    reply(j, [PROMPT], "", reasoning="Stages in order", finish="length")
    reply(j, [PROMPT, CONT], "Evaporation.")
    assert trn.check_trn_08(j.evidence()).outcome == "fail"


def test_trn_08_superseded_reply_not_judged() -> None:
    j = Journal()
    reply(j, [PROMPT], "Water", finish="length", max_tokens=8192)
    reply(j, [PROMPT], "Water evaporates.", max_tokens=32768)
    assert trn.check_trn_08(j.evidence()).outcome == "not_applicable"


# --- TRN-09 ---------------------------------------------------------------------------------
def _trn09(sent_after: bool) -> Any:
    sc = {
        "id": "s",
        "abort": {"when_step": 1},
        "script": [{"reply": {"finish_reason": "length"}}, {"reply": {"finish_reason": "length"}}],
    }
    j = Journal()
    reply(j, [PROMPT], "Plan", finish="length", step=0)
    h = [PROMPT, asst("Plan"), CONT]
    e = j.chat(200, body={"model": "m", "stream": True, "messages": h}, end="client_gone")
    e["step"] = 1
    if sent_after:
        reply(j, [*h, asst("Pl"), CONT], "more", step=2)
    return j.evidence(scenario=sc, events=[{"type": "turn_end", "reason": "aborted"}])


def test_trn_09_pass_nothing_after_abort() -> None:
    assert trn.check_trn_09(_trn09(False)).outcome == "pass"


def test_trn_09_fail_continuation_after_abort() -> None:
    f = trn.check_trn_09(_trn09(True))
    assert f.outcome == "fail" and "continuation" in f.observed


def test_trn_09_not_applicable_outside_recovery() -> None:
    sc = {"id": "s", "abort": {"when_step": 0}, "script": [{"reply": {"finish_reason": "stop"}}]}
    j = Journal()
    reply(j, [PROMPT], "Hello", step=0)
    assert trn.check_trn_09(j.evidence(scenario=sc)).outcome == "not_applicable"
    assert trn.check_trn_09(j.evidence(scenario={"id": "s"})).outcome == "not_applicable"


# --- TRN-10 ---------------------------------------------------------------------------------
BG = [
    {
        "id": "call_1",
        "name": "run_command",
        "args": '{"command": "make", "run_in_background": true}',
    }
]


def _trn10(continue_last: bool, waited: bool = False) -> Any:
    j = Journal()
    h = _chain(j, [PROMPT], 3, "plan")
    reply(j, h, "", finish="tool_calls", calls=BG)
    tool_run(j, "call_1", "run_command", status=504 if waited else 200)
    if not waited:
        j.entries[-1]["response"]["t_end_ns"] = j._ns(j.t + 100)  # still running
    h = [*h, asst("", BG), result("call_1")]
    reply(j, h, "notes", finish="length")
    if continue_last:
        reply(j, [*h, asst("notes"), CONT], "Done.")
    return j.evidence()


def test_trn_10_pass_backgrounded_tool_resets_count() -> None:
    f = trn.check_trn_10(_trn10(True))
    assert f.outcome == "pass", f


def test_trn_10_fail_recursion_ended_after_backgrounded_tool() -> None:
    assert trn.check_trn_10(_trn10(False)).outcome == "fail"


def test_trn_10_fail_waited_for_backgrounded_tool() -> None:
    f = trn.check_trn_10(_trn10(True, waited=True))
    assert f.outcome == "fail" and "timed out" in f.observed


def test_trn_10_not_applicable_with_ordinary_tool() -> None:
    assert trn.check_trn_10(_trn05(3)).outcome == "not_applicable"


# --- RTY-09 ---------------------------------------------------------------------------------
TITLE = {
    "model": "m",
    "stream": False,
    "messages": [{"role": "system", "content": "Write a short title."}, PROMPT],
}
MAIN = {"model": "m", "stream": True, "messages": [PROMPT]}


def test_rty_09_pass_background_429_not_retried() -> None:
    for st in (429, 529):
        j = Journal()
        j.chat(st, body=TITLE, stream=False)
        j.chat(200, body=MAIN)
        f = rty_cases.check_rty_09(j.evidence())
        assert f.outcome == "pass" and str(st) in f.observed


def test_rty_09_fail_background_529_retried() -> None:
    j = Journal()
    j.chat(529, body=TITLE, stream=False)
    j.chat(200, body=TITLE, stream=False, wait=0.5)
    j.chat(200, body=MAIN)
    f = rty_cases.check_rty_09(j.evidence())
    assert f.outcome == "fail" and "resent at seq 1" in f.observed


def test_rty_09_not_applicable_foreground_only() -> None:
    j = Journal()
    j.chat(429, body=MAIN)
    j.chat(200, body=MAIN, wait=0.5)
    assert rty_cases.check_rty_09(j.evidence()).outcome == "not_applicable"


# --- RTY-10 ---------------------------------------------------------------------------------
EXPIRED = json.dumps({"error": {"message": "The access token has expired.", "code": "x"}})


def _401(j: Journal, text: str = EXPIRED, key: int | None = 1) -> dict:
    e = j.chat(401, body=MAIN)
    e["response"]["sent"] = text
    e["credential"] = key
    return e


def _ok(j: Journal, key: int | None = 2) -> dict:
    e = j.chat(200, body=MAIN)
    e["credential"] = key
    return e


def test_rty_10_pass_one_retry() -> None:
    j = Journal()
    _401(j)
    _ok(j)
    f = rty_cases.check_rty_10(j.evidence())
    assert f.outcome == "pass" and "key 1, then 2" in f.observed
    j = Journal()
    _401(j)
    _401(j, key=2)
    f = rty_cases.check_rty_10(j.evidence())
    assert f.outcome == "pass" and "answered status 401" in f.observed


def test_rty_10_fail_retried_with_the_expired_key() -> None:
    # A plain retry of the 401: the same body, the same key. No refresh happened.
    j = Journal()
    _401(j)
    _ok(j, key=1)
    f = rty_cases.check_rty_10(j.evidence())
    assert f.outcome == "fail" and "carried the key that had expired" in f.observed


def test_rty_10_not_applicable_on_a_journal_that_does_not_name_the_keys() -> None:
    # Evidence saved before the journal named the keys: a refresh cannot be told apart.
    j = Journal()
    _401(j)
    _ok(j)
    for e in j.entries:
        del e["credential"]
    f = rty_cases.check_rty_10(j.evidence())
    assert f.outcome == "not_applicable" and "release 1.2.0" in f.observed


def test_rty_10_fail_never_retried() -> None:
    j = Journal()
    _401(j)
    f = rty_cases.check_rty_10(j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "never retried" in f.observed
    assert rty_cases.check_rty_10(j.evidence()).outcome == "not_applicable"  # may still come


def test_rty_10_fail_retried_twice() -> None:
    j = Journal()
    for _ in range(3):
        _401(j)
    f = rty_cases.check_rty_10(j.evidence())
    assert f.outcome == "fail" and "2 retries" in f.observed


def test_rty_10_not_applicable_plain_401() -> None:
    j = Journal()
    _401(j, '{"error": {"message": "Incorrect API key provided"}}')
    assert rty_cases.check_rty_10(j.evidence()).outcome == "not_applicable"


# --- RTY-11 ---------------------------------------------------------------------------------
OVER = (
    "This model's maximum context length is 8192 tokens. However, you requested 9192 tokens "
    "(1000 in the messages, 8192 in the completion)."
)


def _rty11(new_limit: int | None, text: str = OVER, *, ended: bool = False) -> Any:
    j = Journal()
    e = j.chat(400, body={**MAIN, "max_tokens": 8192})
    e["response"]["sent"] = json.dumps({"error": {"message": text}})
    if new_limit is not None:
        j.chat(200, body={**MAIN, "max_tokens": new_limit})
    return j.evidence([turn_end("error")] if ended else [])


def test_rty_11_pass_lowered_to_fit() -> None:
    f = rty_cases.check_rty_11(_rty11(7000))
    assert f.outcome == "pass" and "8192 -> 7000" in f.observed


def test_rty_11_pass_anthropic_wording() -> None:
    text = "input length and `max_tokens` exceed context limit: 1000 + 8192 > 8192"
    assert rty_cases.check_rty_11(_rty11(7000, text)).outcome == "pass"


def test_rty_11_fail_not_low_enough() -> None:
    f = rty_cases.check_rty_11(_rty11(7500))
    assert f.outcome == "fail" and "room 7192" in f.observed


def test_rty_11_fail_not_retried() -> None:
    f = rty_cases.check_rty_11(_rty11(None, ended=True))
    assert f.outcome == "fail" and "never corrected" in f.observed
    assert rty_cases.check_rty_11(_rty11(None)).outcome != "fail"  # the correction may still come


def test_rty_11_not_applicable_prompt_alone_too_long() -> None:
    text = "maximum context length is 8192 tokens. (9000 in the messages, 10 in the completion)"
    assert rty_cases.check_rty_11(_rty11(None, text)).outcome == "not_applicable"


# --- RTY-14 ---------------------------------------------------------------------------------
def test_rty_14_pass_surfaced() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "3600"})
    ev = j.evidence(events=[{"type": "error", "kind": "rate_limit", "message": "too long"}])
    f = rty_cases.check_rty_14(ev)
    assert f.outcome == "pass" and "surfaced" in f.observed


def test_rty_14_pass_capped_wait() -> None:
    j = Journal()
    j.chat(429, headers={"retry-after-ms": "3600000"})
    j.chat(200, wait=60)
    assert rty_cases.check_rty_14(j.evidence()).outcome == "pass"


def test_rty_14_fail_slept_the_hour() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "3600"})
    j.chat(200, wait=3600)
    f = rty_cases.check_rty_14(j.evidence())
    assert f.outcome == "fail" and "waited 3600" in f.observed


def test_rty_14_fail_silently_stuck() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "3600"})
    f = rty_cases.check_rty_14(j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "no error shown" in f.observed
    assert rty_cases.check_rty_14(j.evidence()).outcome != "fail"  # still waiting, within the bound


def test_rty_14_fail_still_asleep_when_the_run_stops_past_the_bound() -> None:
    # A run cut at its deadline: no retry, no error, no turn end; the silence since the 429 is
    # what decides (the agent is asleep on the hour), once it has outlasted the bound.
    j = Journal()
    e = j.chat(429, headers={"Retry-After": "3600"})
    end = int(e["response"]["t_end_ns"])
    at = lambda nominal_s: end + int(nominal_s * j.scale * 1e9)  # noqa: E731
    f = rty_cases.check_rty_14(j.evidence(stopped_ns=at(330)))
    assert f.outcome == "fail" and "still silent" in f.observed
    assert rty_cases.check_rty_14(j.evidence(stopped_ns=at(200))).outcome != "fail"


def test_rty_14_not_applicable_short_wait() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"})
    j.chat(200, wait=2)
    assert rty_cases.check_rty_14(j.evidence()).outcome == "not_applicable"


# --- RTY-15 ---------------------------------------------------------------------------------
def test_rty_15_pass_false_suppresses_true_forces() -> None:
    j = Journal()
    j.chat(503, headers={"x-should-retry": "false"})
    assert rty_cases.check_rty_15(j.evidence()).outcome == "pass"
    j = Journal()
    j.chat(400, headers={"x-should-retry": "true"})
    j.chat(200, wait=0.5)
    assert rty_cases.check_rty_15(j.evidence()).outcome == "pass"


def test_rty_15_fail_false_retried() -> None:
    j = Journal()
    j.chat(429, headers={"x-should-retry": "false"})
    j.chat(200, wait=0.5)
    f = rty_cases.check_rty_15(j.evidence())
    assert f.outcome == "fail" and "resent at seq 1" in f.observed


def test_rty_15_fail_true_not_retried() -> None:
    j = Journal()
    j.chat(400, headers={"x-should-retry": "true"})
    f = rty_cases.check_rty_15(j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "not retried" in f.observed
    assert rty_cases.check_rty_15(j.evidence()).outcome != "fail"  # the forced retry may still come


def test_rty_15_not_applicable_without_header() -> None:
    j = Journal()
    j.chat(503)
    j.chat(200, wait=0.5)
    assert rty_cases.check_rty_15(j.evidence()).outcome == "not_applicable"
