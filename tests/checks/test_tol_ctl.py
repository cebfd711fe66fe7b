"""TOL-01, LOP-01, CTL-01, ERR-02: passing and failing synthetic runs."""

from __future__ import annotations

import pytest

from conformance.checks import run_check
from tests.checks.synth import Journal, turn_end

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


@pytest.mark.parametrize(
    "text",
    [
        "Unknown tool 'read_flie'; did you mean 'read_file'? Other tools: write_file.",
        "未知工具 read_flie。可用工具：write_file, read_file。你是不是想用 read_file？",
    ],
)
def test_tol01_pass_suggestion_worded_otherwise(text: str) -> None:
    j = Journal()
    j.chat(body=body(call("read_flie"), result(text)))
    assert run_check("TOL-01", j.evidence(scenario=SCEN)).outcome == "pass"


def test_tol01_fail_list_without_suggestion() -> None:
    # Listing every tool names the closest one too; that alone suggests nothing.
    j = Journal()
    j.chat(
        body=body(
            call("read_flie"),
            result(
                "Error: tool 'read_flie' does not exist. Available tools: read_file, write_file."
            ),
        )
    )
    f = run_check("TOL-01", j.evidence(scenario=SCEN))
    assert f.outcome == "fail" and "does not suggest 'read_file'" in f.observed


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


# The seed's own example (seed 004 §7.6.3), for the tool of this run.
SEED_EXAMPLE = (
    "<system-reminder>\nYou have called write_file 4 times in a row, all failing with "
    '"disk full".\nPlease:\n1. Use Read to see the actual file content\n2. Analyze why your '
    "old_string doesn't match\n3. Try a different approach OR ask the user for help\n\nDo NOT "
    "retry the same write_file again.\n</system-reminder>"
)
# The reference agent's wording (conformance/reference/loops.py).
REFERENCE = (
    "<system-reminder>\nYou have called write_file 3 times with the same arguments, and it "
    "failed each time. Do NOT call it again with the same arguments. Read the error, check your "
    "inputs, try a different approach or tool, or ask the user for help.\n</system-reminder>"
)


@pytest.mark.parametrize(
    "reminder",
    [
        SEED_EXAMPLE,
        REFERENCE,
        "write_file has failed repeatedly. Stop and think.",  # failed repeatedly, no directive
        "write_file failed 3 times.",
        "Do not retry write_file with the same input.",  # a directive, no count
        "Don't call write_file again like that.",
        "write_file keeps failing: try another approach.",
        "连续 3 次调用 write_file，参数几乎未变。建议换方法。",  # the seed detector's wording
        "write_file 已连续失败 3 次，不要再用相同参数调用。",
    ],
)
def test_lop01_pass_a_reminder_by_meaning(reminder: str) -> None:
    f = run_check("LOP-01", lop_run(reminder).evidence())
    assert f.outcome == "pass", (reminder, f.observed)


@pytest.mark.parametrize(
    "note",
    [
        "An error occurred.",
        "An error occurred in write_file.",  # names the tool, but says neither
        "write_file failed: disk full.",  # one failure, no repetition, no directive
        "You have called the tool 4 times in a row, all failing. Do NOT retry it.",  # which tool?
        "You have called write 4 times in a row, all failing.",  # another tool's name
        "Please continue with the task.",
    ],
)
def test_lop01_fail_a_note_that_is_no_reminder(note: str) -> None:
    f = run_check("LOP-01", lop_run(note).evidence())
    assert f.outcome == "fail", (note, f.observed)
    assert "no reminder about 'write_file'" in f.observed


def test_lop01_waits_for_the_next_request() -> None:
    j = lop_run(None)
    j.entries = j.entries[:3]  # the three failures, no request after them yet
    assert run_check("LOP-01", j.evidence()).outcome == "not_applicable"
    f = run_check("LOP-01", j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "no request after" in f.observed


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


def test_lop01_quotes_the_notes_it_found_as_text() -> None:
    # Old text: "...; notes after the tool results: ['Please continue with the task.']".
    f = run_check("LOP-01", lop_run("Please continue with the task.").evidence())
    assert f.observed.endswith("notes after the tool results: 'Please continue with the task.'")
