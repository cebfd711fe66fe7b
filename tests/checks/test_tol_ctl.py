"""TJS-01, TOL-01, LOP-01, CTL-01, ERR-02: passing and failing synthetic runs."""

from __future__ import annotations

from conformance.checks import run_check
from conformance.checks.seed_strings import TRUNCATION_HINT
from tests.checks.synth import Journal

U = {"role": "user", "content": "do it"}


def call(name: str, cid: str = "c1", args: str = "{}") -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def result(text: str, cid: str = "c1") -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def body(*m: dict) -> dict:
    return {"model": "m", "stream": True, "messages": [U, *m]}


# TJS-01 -------------------------------------------------------------------------------------
def tjs_run(tool_text: str) -> Journal:
    j = Journal()
    e = j.chat(fault="length")
    e["response"]["sent"] = 'data: {"tool_calls": [], "finish_reason": "length"}'
    j.chat(body=body(call("write_file", args='{"path": "a'), result(tool_text)))
    return j


def test_tjs01_pass_exact_hint() -> None:
    j = tjs_run(f"Error: invalid JSON arguments {TRUNCATION_HINT}")
    assert run_check("TJS-01", j.evidence()).outcome == "pass"


def test_tjs01_fail_paraphrased_hint() -> None:
    j = tjs_run("Error: invalid JSON (output was truncated, reduce output)")
    assert run_check("TJS-01", j.evidence()).outcome == "fail"


# TOL-01 -------------------------------------------------------------------------------------
SCEN = {"id": "x", "tools": [{"name": "read_file"}, {"name": "write_file"}]}


def test_tol01_pass() -> None:
    j = Journal()
    j.chat(
        body=body(
            call("read_flie"),
            result(
                "Unknown tool 'read_flie'. Available tools: read_file, write_file. "
                "Did you mean 'read_file'?"
            ),
        )
    )
    assert run_check("TOL-01", j.evidence(scenario=SCEN)).outcome == "pass"


def test_tol01_fail_no_list() -> None:
    j = Journal()
    j.chat(
        body=body(call("read_flie"), result("Unknown tool 'read_flie'. Did you mean read_file?"))
    )
    f = run_check("TOL-01", j.evidence(scenario=SCEN))
    assert f.outcome == "fail" and "write_file" in f.observed


def test_tol01_fail_does_not_name_it() -> None:
    j = Journal()
    j.chat(body=body(call("read_flie"), result("error: read_file, write_file")))
    assert run_check("TOL-01", j.evidence(scenario=SCEN)).outcome == "fail"


# LOP-01 -------------------------------------------------------------------------------------
def lop_run(reminder: str | None) -> Journal:
    j = Journal()
    for k in range(3):
        j.entries.append(
            {
                "seq": len(j.entries),
                "kind": "tool",
                "tool": "write_file",
                "call_id": f"c{k}",
                "arguments": {"path": "a"},
                "behaviour": "error",
                "t_arrival_ns": 1000 + k,
                "response": {"status": 200},
            }
        )
    extra = [{"role": "user", "content": reminder}] if reminder else []
    j.chat(body=body(call("write_file", "c2"), result("disk full", "c2"), *extra))
    return j


def test_lop01_pass() -> None:
    j = lop_run("You called write_file 3 times with the same arguments and it failed.")
    assert run_check("LOP-01", j.evidence()).outcome == "pass"


def test_lop01_fail_no_reminder() -> None:
    assert run_check("LOP-01", lop_run(None).evidence()).outcome == "fail"


# CTL-01 -------------------------------------------------------------------------------------
def test_ctl01_pass_and_fail() -> None:
    scen = {"id": "a", "abort": {"when_step": 0}}
    good = Journal()
    good.chat(200)
    assert run_check("CTL-01", good.evidence(scenario=scen)).outcome == "pass"
    bad = Journal()
    bad.chat(200)
    bad.chat(200, stream=False, wait=0.1)
    f = run_check("CTL-01", bad.evidence(scenario=scen))
    assert f.outcome == "fail" and "seq 1" in f.observed


# ERR-02 -------------------------------------------------------------------------------------
def test_err02_pass_and_fail() -> None:
    j = Journal()
    j.chat(429)
    j.chat(200, wait=0.5)
    ok = [{"type": "turn_end", "reason": "completed"}]
    assert run_check("ERR-02", j.evidence(events=ok)).outcome == "pass"
    leaked = [{"type": "error", "kind": "rate_limit", "message": "429"}, *ok]
    assert run_check("ERR-02", j.evidence(events=leaked)).outcome == "fail"
