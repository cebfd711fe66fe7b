"""STR checks: passing and failing synthetic runs."""

from __future__ import annotations

from conformance.checks import run_check
from tests.checks.synth import Journal

MSGS = [{"role": "user", "content": "hi"}]
STREAM = {"model": "m", "stream": True, "messages": MSGS}
PLAIN = {"model": "m", "stream": False, "messages": MSGS}
TOOL_SSE = 'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1"}]}}]}\n\n'


def broken(j: Journal, fault: str, sent: str = "data: {}\n\n") -> dict:
    e = j.chat(200, body=STREAM, fault=fault, end="reset" if fault == "cut" else "complete")
    e["response"]["sent"] = sent
    return e


def test_str01_pass_fallback() -> None:
    j = Journal()
    broken(j, "cut")
    j.chat(200, stream=False, body=PLAIN, wait=0.01)
    assert run_check("STR-01", j.evidence()).outcome == "pass"


def test_str01_fail_streaming_again() -> None:
    j = Journal()
    broken(j, "cut")
    j.chat(200, body=STREAM, wait=0.5)
    f = run_check("STR-01", j.evidence())
    assert f.outcome == "fail" and "streaming" in f.observed


def test_str01_fail_no_resend() -> None:
    j = Journal()
    broken(j, "cut")
    assert run_check("STR-01", j.evidence()).outcome == "fail"


def test_str01_fail_changed_messages() -> None:
    j = Journal()
    broken(j, "cut")
    j.chat(200, body={**PLAIN, "messages": [*MSGS, {"role": "assistant", "content": "par"}]})
    f = run_check("STR-01", j.evidence())
    assert f.outcome == "fail" and "messages" in f.observed


def test_str08_and_14_pass_and_fail() -> None:
    for cid, fault in (("STR-08", "end_without_finish"), ("STR-14", "malformed_event")):
        good = Journal()
        broken(good, fault)
        good.chat(200, body=PLAIN)
        assert run_check(cid, good.evidence()).outcome == "pass", cid
        bad = Journal()
        broken(bad, fault)
        assert run_check(cid, bad.evidence()).outcome == "fail", cid


def test_str09_pass_and_fail() -> None:
    good = Journal()
    good.chat(200, body=STREAM)
    assert run_check("STR-09", good.evidence()).outcome == "pass"
    bad = Journal()
    bad.chat(200, body=STREAM)
    bad.chat(200, body=PLAIN)
    assert run_check("STR-09", bad.evidence()).outcome == "fail"


def test_str15_pass_and_fail() -> None:
    good = Journal()
    broken(good, "in_band_error")
    good.chat(200, body=PLAIN)
    assert run_check("STR-15", good.evidence()).outcome == "pass"
    bad = Journal()
    broken(bad, "in_band_error")
    assert run_check("STR-15", bad.evidence()).outcome == "fail"


def _tool(j: Journal, call_id: str, t_ns: int) -> None:
    j.entries.append(
        {
            "seq": len(j.entries),
            "kind": "tool",
            "tool": "f",
            "call_id": call_id,
            "arguments": {},
            "t_arrival_ns": t_ns,
            "response": {"status": 200},
        }
    )


def test_str03_pass_tool_runs_only_from_fallback() -> None:
    j = Journal()
    broken(j, "cut", TOOL_SSE)
    fb = j.chat(200, body=PLAIN)
    fb["response"]["sent"] = '{"tool_calls":[{"id":"call_1"}]}'
    _tool(j, "call_1", fb["response"]["t_end_ns"] + 10)
    assert run_check("STR-03", j.evidence()).outcome == "pass"


def test_str03_fail_tool_from_broken_stream_runs() -> None:
    j = Journal()
    e = broken(j, "cut", TOOL_SSE)
    _tool(j, "call_1", e["response"]["t_end_ns"] + 10)
    j.chat(200, body=PLAIN, wait=1.0)
    f = run_check("STR-03", j.evidence())
    assert f.outcome == "fail" and "call_1" in f.observed


def test_str05_pass_and_fail() -> None:
    good = Journal()
    for _ in range(11):
        good.chat(429, body=STREAM, wait=0.1)
    good.chat(200, body=PLAIN, wait=0.1)
    assert run_check("STR-05", good.evidence()).outcome == "pass"
    early = Journal()
    for _ in range(3):
        early.chat(429, body=STREAM, wait=0.1)
    early.chat(200, body=PLAIN, wait=0.1)
    f = run_check("STR-05", early.evidence())
    assert f.outcome == "fail" and "3 streaming" in f.observed
    none = Journal()
    for _ in range(11):
        none.chat(429, body=STREAM, wait=0.1)
    assert run_check("STR-05", none.evidence()).outcome == "fail"
