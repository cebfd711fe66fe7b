"""MFB-01..04, ERR-01/03/04, CTX-01..05, DBG-03, CTL-02 on hand-built runs: pass, fail, n/a."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.checks import run_check
from tests.checks.synth import Journal

P, FB = "conformance-model", "conformance-fallback"
FB_CFG = {"id": "x", "config": {"fallback_model": FB}}
OVERLOADED = json.dumps({"error": {"message": "Overloaded", "type": "overloaded_error"}})
PTL = json.dumps(
    {
        "error": {
            "message": "too long",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
)
U = {"role": "user", "content": "do it"}
TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {}}}]


def body(model: str = P, messages: list | None = None, **kw: Any) -> dict[str, Any]:
    return {"model": model, "stream": True, "messages": messages or [U], **kw}


def chat(j: Journal, status: int | None = 200, sent: str = "", **kw: Any) -> dict[str, Any]:
    e = j.chat(status, **kw)
    if e["response"] is not None:
        e["response"]["sent"] = sent
    return e


def tool(j: Journal, name: str, call_id: str, sent: str = '{"output": "ok"}') -> dict[str, Any]:
    """A tool-host entry arriving after everything so far."""
    j.t += 0.01
    e = {
        "seq": len(j.entries),
        "kind": "tool",
        "tool": name,
        "call_id": call_id,
        "arguments": {},
        "behaviour": "output",
        "t_arrival_ns": j._ns(j.t),
        "response": {"status": 200, "sent": sent},
    }
    j.entries.append(e)
    j.t += 0.01  # whatever comes next arrives strictly later
    return e


def ended(reason: str, kind: str | None = None, message: str = "") -> list[dict[str, Any]]:
    ev = [{"type": "error", "kind": kind, "message": message}] if kind else []
    return [*ev, {"type": "turn_end", "reason": reason}]


def outcome(cid: str, j: Journal, events: list | None = None, **kw: Any) -> str:
    return run_check(cid, j.evidence(events or [], **kw)).outcome


# MFB-01 -------------------------------------------------------------------------------------
def test_mfb_01_pass_switch_after_three_overloads() -> None:
    j = Journal()
    for _ in range(3):
        chat(j, 529, OVERLOADED, body=body())
    chat(j, body=body(FB))
    assert outcome("MFB-01", j, scenario=FB_CFG) == "pass"


def test_mfb_01_fail_never_switched() -> None:
    j = Journal()
    for _ in range(11):
        chat(j, 529, OVERLOADED, body=body())
    f = run_check("MFB-01", j.evidence(ended("error", "overloaded"), scenario=FB_CFG))
    assert f.outcome == "fail" and "11 consecutive" in f.observed


def test_mfb_01_overloaded_error_body_counts_as_overload() -> None:
    j = Journal()
    for _ in range(5):
        chat(j, 503, OVERLOADED, body=body())
    assert outcome("MFB-01", j, ended("error"), scenario=FB_CFG) == "fail"
    assert outcome("MFB-01", j, scenario=FB_CFG) == "not_applicable"  # may still switch


def test_mfb_01_fail_went_back_to_primary() -> None:
    j = Journal()
    for _ in range(3):
        chat(j, 529, OVERLOADED, body=body())
    chat(j, 529, OVERLOADED, body=body(FB))
    chat(j, 529, OVERLOADED, body=body(P, stream=False), stream=False)
    f = run_check("MFB-01", j.evidence(scenario=FB_CFG))
    assert f.outcome == "fail" and "went back" in f.observed


def test_mfb_01_not_applicable_without_fallback_or_after_recovery() -> None:
    j = Journal()
    chat(j, 529, OVERLOADED, body=body())
    chat(j, body=body())
    assert outcome("MFB-01", j, scenario=FB_CFG) == "not_applicable"
    assert outcome("MFB-01", j, scenario={"id": "x"}) == "not_applicable"


# MFB-02 -------------------------------------------------------------------------------------
NOT_FOUND = json.dumps({"error": {"message": "no such model", "code": "model_not_found"}})


def test_mfb_02_pass_no_switch_on_404() -> None:
    j = Journal()
    chat(j, 404, NOT_FOUND, body=body())
    assert outcome("MFB-02", j, ended("error", "not_found"), scenario=FB_CFG) == "pass"


def test_mfb_02_fail_switch_on_404() -> None:
    j = Journal()
    chat(j, 404, NOT_FOUND, body=body())
    chat(j, body=body(FB))
    f = run_check("MFB-02", j.evidence(scenario=FB_CFG))
    assert f.outcome == "fail" and "404" in f.observed


def test_mfb_02_fail_switch_on_403_access() -> None:
    j = Journal()
    chat(j, 403, '{"error": {"message": "no access"}}', body=body())
    chat(j, body=body(FB))
    assert outcome("MFB-02", j, scenario=FB_CFG) == "fail"


def test_mfb_02_not_applicable_without_access_error() -> None:
    j = Journal()
    chat(j, 529, OVERLOADED, body=body())
    chat(j, body=body())
    assert outcome("MFB-02", j, scenario=FB_CFG) == "not_applicable"


# MFB-03 -------------------------------------------------------------------------------------
def test_mfb_03_pass_same_model_after_first_overload() -> None:
    j = Journal()
    chat(j, 529, OVERLOADED, body=body())
    chat(j, body=body())
    assert outcome("MFB-03", j, scenario=FB_CFG) == "pass"


def test_mfb_03_fail_switch_on_first_overload() -> None:
    j = Journal()
    chat(j, 529, OVERLOADED, body=body())
    chat(j, body=body(FB))
    f = run_check("MFB-03", j.evidence(scenario=FB_CFG))
    assert f.outcome == "fail" and "single overload" in f.observed


def test_mfb_03_not_applicable_without_overload() -> None:
    j = Journal()
    chat(j, body=body())
    assert outcome("MFB-03", j, scenario=FB_CFG) == "not_applicable"


# MFB-04 -------------------------------------------------------------------------------------
SIGNED = {"role": "assistant", "content": "Hi", "reasoning_signature": "c2ln"}
PLAIN = {"role": "assistant", "content": "Hi"}


def mfb04_run(to_fallback: dict) -> Journal:
    j = Journal()
    for _ in range(3):
        chat(j, 529, OVERLOADED, body=body(P, [U, SIGNED, U]))
    chat(j, body=body(FB, [U, to_fallback, U]))
    return j


def test_mfb_04_pass_signature_stripped() -> None:
    assert outcome("MFB-04", mfb04_run(PLAIN), scenario=FB_CFG) == "pass"


def test_mfb_04_fail_signature_kept() -> None:
    f = run_check("MFB-04", mfb04_run(SIGNED).evidence(scenario=FB_CFG))
    assert f.outcome == "fail" and "reasoning_signature" in f.observed


def test_mfb_04_fail_thought_signature_on_tool_call() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "function": {"name": "f", "arguments": "{}"},
                "extra_content": {"google": {"thought_signature": "abc"}},
            }
        ],
    }
    f = run_check("MFB-04", mfb04_run(call).evidence(scenario=FB_CFG))
    assert f.outcome == "fail" and "thought_signature" in f.observed


def test_mfb_04_not_applicable_without_private_fields() -> None:
    j = Journal()
    for _ in range(3):
        chat(j, 529, OVERLOADED, body=body(P, [U, PLAIN, U]))
    chat(j, body=body(FB, [U, PLAIN, U]))
    assert outcome("MFB-04", j, scenario=FB_CFG) == "not_applicable"


# ERR-01 -------------------------------------------------------------------------------------
def test_err_01_pass_rate_limit() -> None:
    j = Journal()
    chat(j, 429)
    assert outcome("ERR-01", j, ended("error", "rate_limit", "HTTP 429")) == "pass"


def test_err_01_pass_connection_error() -> None:
    j = Journal()
    chat(j, None, fault="reset_before_headers")
    assert outcome("ERR-01", j, ended("error", "connection", "reset")) == "pass"


def test_err_01_pass_prompt_too_long() -> None:
    j = Journal()
    chat(j, 400, PTL)
    assert outcome("ERR-01", j, ended("error", "prompt_too_long", "too long")) == "pass"


def test_err_01_fail_no_error_shown() -> None:
    j = Journal()
    chat(j, 429)
    assert outcome("ERR-01", j, ended("error")) == "fail"


def test_err_01_fail_untyped_kind() -> None:
    j = Journal()
    chat(j, 429)
    f = run_check("ERR-01", j.evidence(ended("error", "error", "failed")))
    assert f.outcome == "fail" and "not a typed" in f.observed


def test_err_01_fail_kind_does_not_fit() -> None:
    j = Journal()
    chat(j, 401)
    f = run_check("ERR-01", j.evidence(ended("error", "rate_limit", "HTTP 401")))
    assert f.outcome == "fail" and "auth" in f.observed


def test_err_01_fail_completed_after_an_exhausted_error() -> None:
    # The last request failed and nothing followed, yet the turn is reported completed.
    j = Journal()
    for _ in range(11):
        chat(j, 429)
    f = run_check("ERR-01", j.evidence(ended("completed")))
    assert f.outcome == "fail" and "ended the turn as completed; no error" in f.observed


def test_err_01_completed_with_a_typed_error_is_judged_like_any_other() -> None:
    j = Journal()
    chat(j, 429)
    assert outcome("ERR-01", j, ended("completed", "rate_limit", "HTTP 429")) == "pass"
    assert outcome("ERR-01", j, ended("completed", "error", "failed")) == "fail"


def test_err_01_a_failed_title_request_last_is_not_the_turn_s_error() -> None:
    j = Journal()
    chat(j)  # the turn's own request succeeds
    title = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "A title"}]}
    chat(j, 429, body=title, stream=False)
    titled = {"id": "x", "config": {"background_title": True}}
    assert outcome("ERR-01", j, ended("completed"), scenario=titled) == "not_applicable"
    # Without background titles configured, the same request is the turn's own: judged.
    assert outcome("ERR-01", j, ended("completed")) == "fail"


def test_err_01_not_applicable_on_abort() -> None:
    j = Journal()
    chat(j, 429)
    assert outcome("ERR-01", j, ended("aborted")) == "not_applicable"


def test_err_01_not_applicable_on_success() -> None:
    j = Journal()
    chat(j, 429)
    chat(j)
    assert outcome("ERR-01", j, ended("completed")) == "not_applicable"


# ERR-03 -------------------------------------------------------------------------------------
HOOK_CFG = {"id": "x", "config": {"stop_hook": True}}


def test_err_03_pass_no_hook_after_api_error() -> None:
    j = Journal()
    chat(j, 401)
    assert outcome("ERR-03", j, ended("error", "auth"), scenario=HOOK_CFG) == "pass"


def test_err_03_fail_hook_after_api_error() -> None:
    j = Journal()
    chat(j, 401)
    tool(j, "stop_hook", "stop_hook")
    f = run_check("ERR-03", j.evidence(ended("error", "auth"), scenario=HOOK_CFG))
    assert f.outcome == "fail" and "stop_hook" in f.observed


def test_err_03_not_applicable() -> None:
    j = Journal()
    chat(j, 401)
    assert outcome("ERR-03", j, ended("error", "auth")) == "not_applicable"
    k = Journal()
    chat(k)
    tool(k, "stop_hook", "stop_hook")
    assert outcome("ERR-03", k, ended("completed"), scenario=HOOK_CFG) == "not_applicable"


# ERR-04 -------------------------------------------------------------------------------------
def test_err_04_pass_retries_named() -> None:
    j = Journal()
    chat(j, 429)
    chat(j, 429, wait=0.5)
    assert outcome("ERR-04", j, ended("error", "rate_limit", "HTTP 429 after 1 retry")) == "pass"


def test_err_04_fail_retries_not_named() -> None:
    j = Journal()
    chat(j, 429)
    chat(j, 429, wait=0.5)
    # "retryable" does not name the retries that were made.
    f = run_check("ERR-04", j.evidence(ended("error", "rate_limit", "HTTP 429 is retryable")))
    assert f.outcome == "fail" and "retries" in f.observed


def test_err_04_fail_compaction_not_named() -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(tools=TOOLS))
    chat(
        j,
        body={
            "model": P,
            "stream": False,
            "messages": [{"role": "system", "content": "Summarize this."}],
        },
        stream=False,
    )
    chat(j, 400, PTL, body=body(tools=TOOLS))
    f = run_check("ERR-04", j.evidence(ended("error", "prompt_too_long", "HTTP 400: too long")))
    assert f.outcome == "fail" and "compaction" in f.observed
    g = run_check(
        "ERR-04",
        j.evidence(ended("error", "prompt_too_long", "too long, even after compaction")),
    )
    assert g.outcome == "pass"


def test_err_04_fail_model_fallback_not_named() -> None:
    j = Journal()
    for _ in range(3):
        chat(j, 529, OVERLOADED, body=body())
    chat(j, 529, OVERLOADED, body=body(FB))
    msg = "HTTP 529 after 3 retries"
    assert outcome("ERR-04", j, ended("error", "overloaded", msg), scenario=FB_CFG) == "fail"
    msg += f"; switched to the fallback model {FB}"
    assert outcome("ERR-04", j, ended("error", "overloaded", msg), scenario=FB_CFG) == "pass"


def test_err_04_not_applicable_without_recovery() -> None:
    j = Journal()
    chat(j, 401)
    assert outcome("ERR-04", j, ended("error", "auth", "HTTP 401")) == "not_applicable"


# DBG-03 -------------------------------------------------------------------------------------
def dbg_run() -> Journal:
    j = Journal()
    chat(j)
    tool(j, "write_file", "c1")
    tool(j, "write_file", "c2")
    chat(j)
    return j


def log(*records: dict) -> dict[str, str]:
    return {"tool-calls.jsonl": "".join(json.dumps(r) + "\n" for r in records)}


def test_dbg_03_pass() -> None:
    files = log(
        {"call_id": "c1", "name": "write_file", "status": "ok"},
        {"callId": "c2", "toolName": "write_file", "status": "error"},
    )
    assert outcome("DBG-03", dbg_run(), debug_files=files) == "pass"


def test_dbg_03_fail_missing_record() -> None:
    files = log({"call_id": "c1", "name": "write_file", "status": "ok"})
    f = run_check("DBG-03", dbg_run().evidence(debug_files=files))
    assert f.outcome == "fail" and "c2" in f.observed


def test_dbg_03_fail_no_log_or_not_json() -> None:
    assert outcome("DBG-03", dbg_run(), debug_files={}) == "fail"
    bad = {"tool-calls.jsonl": "called write_file c1\n"}
    assert outcome("DBG-03", dbg_run(), debug_files=bad) == "fail"


def test_dbg_03_fail_no_status() -> None:
    files = log({"call_id": "c1", "name": "write_file"}, {"call_id": "c2", "name": "write_file"})
    assert outcome("DBG-03", dbg_run(), debug_files=files) == "fail"


def transcript(*records: dict) -> dict[str, str]:
    """Claude Code's transcript, its debug log beside it (format claude-code)."""
    text = "".join(json.dumps(r) + "\n" for r in records)
    return {"t/s.jsonl": text, "claude-debug.log": "2026-12-07T12:16:52Z [INFO] x\n"}


def use(cid: str, name: str = "mcp__conformance__write_file") -> dict:
    return {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "id": cid, "name": name}]},
    }


def result(cid: str, error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": cid, "is_error": error}
    return {"type": "user", "message": {"content": [block]}}


def test_dbg_03_read_in_its_format() -> None:
    files = transcript(use("c1"), use("c2"), result("c1"), result("c2", error=True))
    f = run_check("DBG-03", dbg_run().evidence(debug_files=files, debug_format="claude-code"))
    assert f.outcome == "pass", f.observed
    assert "mcp__<server>__<tool>" in f.observed and "(c1 ok, c2 error)" in f.observed
    # The same files as the harness's format: no tool-calls.jsonl.
    assert outcome("DBG-03", dbg_run(), debug_files=files) == "fail"


def test_dbg_03_read_in_its_format_fails() -> None:
    def judged(*records: dict) -> str:
        ev = dbg_run().evidence(debug_files=transcript(*records), debug_format="claude-code")
        f = run_check("DBG-03", ev)
        assert f.outcome == "fail"
        return f.observed

    assert "no record for call 'c2'" in judged(use("c1"), result("c1"))
    assert "call 'c2' (mcp__conformance__write_file) has no result" in judged(
        use("c1"), use("c2"), result("c1")
    )
    assert "names 'mcp__conformance__read_file', not 'write_file'" in judged(
        use("c1"), use("c2", "mcp__conformance__read_file"), result("c1"), result("c2")
    )
    assert "no tool call recorded" in judged()
    ev = dbg_run().evidence(debug_files=transcript(use("c1")), debug_format="other")
    assert "no reader for debug file format 'other'" in run_check("DBG-03", ev).observed


def test_dbg_03_not_applicable_without_tool_calls() -> None:
    j = Journal()
    chat(j)
    assert outcome("DBG-03", j) == "not_applicable"


# CTL-02 -------------------------------------------------------------------------------------
BLOCK = json.dumps({"error": {"type": "blocked", "message": "tests fail"}})


def test_ctl_02_pass_block_not_retried() -> None:
    j = Journal()
    chat(j)
    tool(j, "stop_hook", "stop_hook", BLOCK)
    assert outcome("CTL-02", j, ended("completed")) == "pass"


def test_ctl_02_fail_hook_called_again() -> None:
    j = Journal()
    chat(j)
    tool(j, "stop_hook", "stop_hook", BLOCK)
    tool(j, "stop_hook", "stop_hook", BLOCK)
    f = run_check("CTL-02", j.evidence(ended("completed")))
    assert f.outcome == "fail" and "stop_hook call" in f.observed


def test_ctl_02_fail_turn_rerun() -> None:
    j = Journal()
    chat(j)
    tool(j, "stop_hook", "stop_hook", BLOCK)
    chat(j)
    assert outcome("CTL-02", j, ended("completed")) == "fail"


def test_ctl_02_not_applicable_without_block() -> None:
    j = Journal()
    chat(j)
    tool(j, "stop_hook", "stop_hook")
    assert outcome("CTL-02", j, ended("completed")) == "not_applicable"


# CTX-01 / CTX-02 ----------------------------------------------------------------------------
BIG = [U, {"role": "assistant", "content": "x" * 500}, U]
SMALL = [{"role": "user", "content": "Summary: short"}, U]
SUMMARIZE = {
    "model": P,
    "stream": False,
    "messages": [{"role": "system", "content": "Summarize the conversation."}],
}


def test_ctx_01_pass_one_compaction_then_retry() -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(j, body=SUMMARIZE, stream=False)
    chat(j, body=body(P, SMALL, tools=TOOLS))
    assert outcome("CTX-01", j, ended("completed")) == "pass"


def test_ctx_01_fail_verbatim_resend() -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    f = run_check("CTX-01", j.evidence(ended("error", "prompt_too_long")))
    assert f.outcome == "fail" and "verbatim" in f.observed


def test_ctx_01_fail_two_compactions() -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(j, body=SUMMARIZE, stream=False)
    chat(j, 400, PTL, body=body(P, SMALL, tools=TOOLS))
    chat(j, body=SUMMARIZE, stream=False)
    chat(j, body=body(P, [U], tools=TOOLS))
    assert outcome("CTX-01", j, ended("completed")) == "fail"


def test_ctx_01_fail_surfaced_without_compaction() -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    f = run_check("CTX-01", j.evidence(ended("error", "prompt_too_long")))
    assert f.outcome == "fail" and "no compaction" in f.observed


def test_ctx_01_not_applicable() -> None:
    j = Journal()
    chat(j, 400, body=body(tools=TOOLS))
    assert outcome("CTX-01", j, ended("error", "bad_request")) == "not_applicable"


def ctx02_run(extra: bool = False) -> Journal:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(j, body=SUMMARIZE, stream=False)
    chat(j, 400, PTL, body=body(P, SMALL, tools=TOOLS))
    if extra:
        chat(j, body=SUMMARIZE, stream=False)
    return j


def test_ctx_02_pass_original_error_surfaced() -> None:
    ev = ended("error", "prompt_too_long", "context_length_exceeded")
    assert outcome("CTX-02", ctx02_run(), ev) == "pass"


def test_ctx_02_fail_second_compaction() -> None:
    f = run_check("CTX-02", ctx02_run(extra=True).evidence(ended("error", "prompt_too_long")))
    assert f.outcome == "fail" and "compaction" in f.observed


def test_ctx_02_fail_other_error_shown() -> None:
    assert outcome("CTX-02", ctx02_run(), ended("error", "server", "compaction failed")) == "fail"
    assert outcome("CTX-02", ctx02_run(), ended("error")) == "fail"


def test_ctx_02_not_applicable_single_overflow() -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(j, body=SUMMARIZE, stream=False)
    chat(j, body=body(P, SMALL, tools=TOOLS))
    assert outcome("CTX-02", j, ended("completed")) == "not_applicable"


# CTX-03 / CTX-04 ----------------------------------------------------------------------------
CALLS = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
    ],
}
RES_A = {"role": "tool", "tool_call_id": "a", "content": "contents of a"}
RES_B = {"role": "tool", "tool_call_id": "b", "content": "[No result: interrupted]"}
HISTORY = [U, CALLS, RES_A]
SCEN = {"id": "x", "history": HISTORY}
TRAIN = {"id": "x", "history": HISTORY, "config": {"training_data_mode": True}}


def ctx_run(*messages: dict) -> Journal:
    j = Journal()
    chat(j, body=body(P, list(messages)))
    return j


def test_ctx_03_pass_placeholder_added() -> None:
    assert outcome("CTX-03", ctx_run(U, CALLS, RES_A, RES_B, U), scenario=SCEN) == "pass"


def test_ctx_03_fail_unpaired_sent() -> None:
    f = run_check("CTX-03", ctx_run(U, CALLS, RES_A, U).evidence(scenario=SCEN))
    assert f.outcome == "fail" and "'b'" in f.observed


def test_ctx_03_fail_result_not_adjacent_or_empty() -> None:
    late = ctx_run(U, CALLS, RES_A, U, RES_B)
    assert outcome("CTX-03", late, scenario=SCEN) == "fail"
    empty = ctx_run(U, CALLS, RES_A, {**RES_B, "content": ""}, U)
    assert outcome("CTX-03", empty, scenario=SCEN) == "fail"


def test_ctx_03_fail_unpaired_call_dropped_not_answered() -> None:
    # The call taken out of its assistant message: nothing unpaired is sent, nothing repaired.
    only_a = {**CALLS, "tool_calls": CALLS["tool_calls"][:1]}
    f = run_check("CTX-03", ctx_run(U, only_a, RES_A, U).evidence(scenario=SCEN))
    assert f.outcome == "fail" and "dropped" in f.observed and "'b'" in f.observed, f.observed


def test_ctx_03_an_auxiliary_request_before_the_conversation_is_not_it() -> None:
    # A title request first (no history in it), then the conversation with the placeholder.
    j = ctx_run({"role": "user", "content": "Write a short title for this conversation."})
    chat(j, body=body(P, [U, CALLS, RES_A, RES_B, U]))
    assert outcome("CTX-03", j, scenario=SCEN) == "pass"


def test_ctx_03_not_applicable() -> None:
    assert outcome("CTX-03", ctx_run(U), scenario={"id": "x"}) == "not_applicable"
    assert outcome("CTX-03", Journal(), ended("error", "bad_request"), scenario=TRAIN) == (
        "not_applicable"
    )


def test_ctx_04_pass_refused() -> None:
    ev = ended("error", "bad_request", "training-data mode refuses placeholder results")
    assert outcome("CTX-04", Journal(), ev, scenario=TRAIN) == "pass"


def test_ctx_04_fail_placeholder_fabricated() -> None:
    f = run_check("CTX-04", ctx_run(U, CALLS, RES_A, RES_B, U).evidence(scenario=TRAIN))
    assert f.outcome == "fail" and "'b'" in f.observed


def test_ctx_04_not_applicable_outside_training_mode() -> None:
    assert outcome("CTX-04", ctx_run(U, CALLS, RES_A, RES_B, U), scenario=SCEN) == (
        "not_applicable"
    )


# CTX-05 -------------------------------------------------------------------------------------
IMG = {
    "role": "user",
    "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ],
}
TOO_BIG = json.dumps({"error": {"message": "Image too large: exceeds 5 MB", "code": "x"}})


def test_ctx_05_pass_media_stripped() -> None:
    j = Journal()
    chat(j, 400, TOO_BIG, body=body(P, [IMG, U]))
    chat(j, body=body(P, [{"role": "user", "content": "What is this? [image removed]"}, U]))
    assert outcome("CTX-05", j, ended("completed")) == "pass"


def test_ctx_05_fail_media_kept() -> None:
    j = Journal()
    chat(j, 413, "too large", body=body(P, [IMG, U]))
    chat(j, body=body(P, [IMG, U]))
    f = run_check("CTX-05", j.evidence(ended("completed")))
    assert f.outcome == "fail" and "media part" in f.observed


def test_ctx_05_fail_no_retry() -> None:
    j = Journal()
    chat(j, 400, TOO_BIG, body=body(P, [IMG, U]))
    assert outcome("CTX-05", j, ended("error", "media_too_large")) == "fail"


def test_ctx_05_not_applicable() -> None:
    j = Journal()
    chat(j, 400, TOO_BIG, body=body(P, [U]))  # no media in the request
    assert outcome("CTX-05", j, ended("error", "bad_request")) == "not_applicable"


# A compaction request in another agent's words: Claude Code keeps its tools and asks for "your
# summary based on the conversation so far" last; opencode calls itself a summarization agent.
KEEPS_TOOLS = body(
    P,
    [U, {"role": "user", "content": "Please provide your summary based on the conversation."}],
    tools=TOOLS,
)
SUMMARIZATION = {
    "model": P,
    "stream": True,
    "messages": [
        {"role": "system", "content": "You are a context summarization agent."},
        {"role": "user", "content": "Create a new anchored summary of the history."},
    ],
}


@pytest.mark.parametrize("compaction", [KEEPS_TOOLS, SUMMARIZATION])
def test_ctx_01_compaction_in_the_agents_own_words(compaction: dict[str, Any]) -> None:
    j = Journal()
    chat(j, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(j, body=compaction)
    chat(j, body=compaction)
    chat(j, body=body(P, SMALL, tools=TOOLS))
    # Two of them in one user turn: before, neither was seen as a compaction, and the smaller
    # retry passed CTX-01 as "a reduced context".
    f = run_check("CTX-01", j.evidence(ended("completed")))
    assert f.outcome == "fail" and "2 compaction requests" in f.observed
    one = Journal()
    chat(one, 400, PTL, body=body(P, BIG, tools=TOOLS))
    chat(one, body=compaction)
    chat(one, body=body(P, SMALL, tools=TOOLS))
    f = run_check("CTX-01", one.evidence(ended("completed")))
    assert f.outcome == "pass" and "compaction seq 1, retry seq 2" in f.observed
