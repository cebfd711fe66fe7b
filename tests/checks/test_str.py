"""STR checks: passing and failing synthetic runs."""

from __future__ import annotations

import pytest

from conformance.checks import FINAL_ON_PARTIAL, run_check
from tests.checks.synth import Journal, turn_end

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
    assert run_check("STR-01", j.evidence([turn_end("error")])).outcome == "fail"
    assert run_check("STR-01", j.evidence()).outcome == "not_applicable"  # may still come


def test_str01_fail_streaming_resend_on_a_run_cut_short() -> None:
    # The stream is resent (streaming again) instead of falling back; the turn never ended.
    j = Journal()
    broken(j, "cut")
    j.chat(None, body=STREAM, wait=0.5)
    f = run_check("STR-01", j.evidence())
    assert "STR-01" in FINAL_ON_PARTIAL
    assert f.outcome == "fail" and "is streaming" in f.observed


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
        assert run_check(cid, bad.evidence([turn_end("error")])).outcome == "fail", cid


def test_str09_pass_and_fail() -> None:
    good = Journal()
    good.chat(200, body=STREAM)
    assert run_check("STR-09", good.evidence()).outcome == "pass"
    bad = Journal()
    bad.chat(200, body=STREAM)
    bad.chat(200, body=PLAIN)
    assert run_check("STR-09", bad.evidence()).outcome == "fail"


def _rechunked(j: Journal, text: str = "hello world", end: str = "complete") -> dict:
    sse = (
        f'data: {{"choices":[{{"delta":{{"content":"{text[:5]}"}}}}]}}\n\n'
        f'data: {{"choices":[{{"delta":{{"content":"{text[5:]}"}},"finish_reason":"stop"}}]}}\n\n'
        "data: [DONE]\n\n"
    )
    e = j.chat(200, body=STREAM, fault="rechunk", end=end)
    e["fault_params"] = {"split_events": True}
    e["response"].update(sent=sse, sent_bytes=len(sse), full_bytes=len(sse))
    return e


def test_str09_a_rechunked_stream_shows_the_text_it_carried() -> None:
    good = Journal()
    _rechunked(good)
    shown = good.event("message", id="m1", role="assistant", text="hello world")
    f = run_check("STR-09", good.evidence([shown, good.event("turn_end", reason="completed")]))
    assert f.outcome == "pass" and "1 re-chunked or paced, shown as carried" in f.observed


def test_str09_fails_when_the_agent_shows_another_text_than_the_wire_carried() -> None:
    bad = Journal()
    _rechunked(bad)
    broken = bad.event("message", id="m1", role="assistant", text="hello")  # a piece was lost
    end = bad.event("turn_end", reason="completed")
    f = run_check("STR-09", bad.evidence([broken, end]))
    assert f.outcome == "fail" and "'hello world'" in f.observed and "'hello'" in f.observed
    nothing = Journal()
    _rechunked(nothing)
    f = run_check("STR-09", nothing.evidence([nothing.event("turn_end", reason="completed")]))
    assert f.outcome == "fail" and "no assistant message" in f.observed


def test_str09_judges_the_text_only_once_the_turn_is_over_and_the_reply_whole() -> None:
    j = Journal()
    _rechunked(j)
    # The turn goes on: the message may still come (STR-09 is final on a partial run).
    assert run_check("STR-09", j.evidence()).outcome == "pass"
    left = Journal()
    _rechunked(left, end="client_gone")
    left.entries[0]["response"]["sent_bytes"] = 10  # the client left (an abort) mid-stream
    end = left.event("turn_end", reason="aborted")
    f = run_check("STR-09", left.evidence([end]))
    assert f.outcome == "pass" and "re-chunked" not in f.observed


def test_str09_fails_an_agent_that_hangs_up_on_a_rechunked_stream_before_its_finish() -> None:
    def hung_up(reason: str, scenario: dict | None = None) -> str:
        j = Journal()
        e = _rechunked(j, end="client_gone")
        sent = e["response"]["sent"][:40]  # the wire carried the first event only
        e["response"].update(sent=sent, sent_bytes=len(sent))
        end = j.event("turn_end", reason=reason)
        ev = j.evidence([end], scenario=scenario or {"id": "synthetic"})
        f = run_check("STR-09", ev)
        return f"{f.outcome}: {f.observed}"

    # A client that choked on a cut line and left, with no abort: it escapes nothing.
    assert hung_up("error").startswith("fail: the agent left seq 0 (rechunk) after 40 of")
    assert hung_up("completed").startswith("fail")
    # A user abort may be what ended it.
    assert hung_up("aborted").startswith("pass")
    assert hung_up("error", {"id": "s", "abort": {"when_step": 0}}).startswith("pass")


def test_str09_leaves_out_a_stream_reshaped_into_a_stall() -> None:
    # One byte every 0.5 s: 40 bytes without a whole event are 20 s, past any idle watchdog's
    # floor; abandoning that stream and falling back is recovery, not a resent healthy stream.
    def fallback(params: dict) -> str:
        j = Journal()
        e = _rechunked(j, end="client_gone")
        sent = e["response"]["sent"][:40]
        e["response"].update(sent=sent, sent_bytes=len(sent))
        e["fault_params"] = params
        j.chat(200, body=PLAIN)
        f = run_check("STR-09", j.evidence([j.event("turn_end", reason="completed")]))
        return f"{f.outcome}: {f.observed}"

    assert fallback({"bytes": 1, "interval": 0.5}).startswith("not_applicable")
    assert fallback({"bytes": 1, "interval": 0.02}).startswith("fail: healthy seq 0 resent")


def test_str09_leaves_out_a_stream_silent_past_the_watchdog_floor() -> None:
    # A 61 s stall the gateway ended just before a 60 s watchdog's scaled timer fired on a busy
    # machine: the wire shows a whole stream, the agent rightly gave up on it.
    def after_stall(seconds: float) -> str:
        j = Journal()
        e = j.chat(200, body=STREAM, fault="stall")
        e["fault_params"] = {"after_events": 1, "seconds": seconds}
        j.chat(200, body=PLAIN)
        f = run_check("STR-09", j.evidence([j.event("turn_end", reason="completed")]))
        return f"{f.outcome}: {f.observed}"

    assert after_stall(61).startswith("not_applicable")
    assert after_stall(5).startswith("fail: healthy seq 0 resent")


def test_str09_does_not_call_healthy_a_stream_still_being_written() -> None:
    # The agent hung up and ended its turn before the gateway's next write found it gone: the
    # record still reads as it began (no end stamp, nothing kept yet).
    j = Journal()
    e = _rechunked(j)
    e["response"].update(sent="", sent_bytes=0, t_end_ns=None)
    j.chat(200, body=PLAIN)
    f = run_check("STR-09", j.evidence([j.event("turn_end", reason="completed")]))
    assert f.outcome == "not_applicable", f.observed


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
    fb = j.chat(200, stream=False, body=PLAIN)
    fb["response"]["sent"] = (
        '{"choices":[{"index":0,"message":{"role":"assistant","content":"",'
        '"tool_calls":[{"id":"call_1","type":"function",'
        '"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}'
    )
    _tool(j, "call_1", fb["response"]["t_end_ns"] + 10)
    assert run_check("STR-03", j.evidence()).outcome == "pass"


def test_str03_fail_tool_from_broken_stream_runs() -> None:
    j = Journal()
    e = broken(j, "cut", TOOL_SSE)
    _tool(j, "call_1", e["response"]["t_end_ns"] + 10)
    j.chat(200, body=PLAIN, wait=1.0)
    f = run_check("STR-03", j.evidence())
    assert f.outcome == "fail" and "call_1" in f.observed


FINISHED_TOOL_SSE = (
    'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1",'
    '"function":{"name":"f","arguments":"{}"}}]}}]}\n\n'
    'data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}\n\n'
)


@pytest.mark.parametrize("fault", ["cut", "stall"])
def test_str03_a_break_after_the_finish_marker_is_a_finished_turn(fault: str) -> None:
    # The reset (or a watchdog giving up in a stall) after the finish chunk, before [DONE]:
    # complete by its finish marker (STR-13), so running its tool call is no STR-03 failure
    # and no fallback is owed (STR-01).
    j = Journal()
    e = broken(j, fault, FINISHED_TOOL_SSE)
    if fault == "stall":
        sent = len(FINISHED_TOOL_SSE)
        e["response"].update(sent_bytes=sent, full_bytes=sent + 14)  # [DONE] never went out
    _tool(j, "call_1", e["response"]["t_end_ns"] + 10)
    j.chat(200, body=STREAM, wait=1.0)
    ev = j.evidence([turn_end("completed")])
    assert run_check("STR-03", ev).outcome == "not_applicable"
    assert run_check("STR-01", ev).outcome == "not_applicable"


def test_str03_the_same_call_without_its_finish_marker_still_fails() -> None:
    j = Journal()
    e = broken(j, "cut", FINISHED_TOOL_SSE.split("\n\n")[0] + "\n\n")
    _tool(j, "call_1", e["response"]["t_end_ns"] + 10)
    j.chat(200, body=PLAIN, wait=1.0)
    f = run_check("STR-03", j.evidence())
    assert f.outcome == "fail" and "call_1" in f.observed


# Tool-call ids of every dialect's form, read from what the gateway renders (not a pattern):
# Anthropic ``toolu_...``, Responses ``call_id`` on an ``fc_...`` item, and any scripted id.
_CALLS = {"tool_calls": [{"name": "f", "arguments": '{"a": 1}'}], "chunk_chars": 3}


def _dialect_run(dialect: str, call_id: str | None, tool_after_fallback: bool) -> Journal:
    """A stream cut after the tool call's first argument piece, a JSON fallback carrying the
    same call, and the tool run before or after that fallback ended."""
    import json

    from fakes.dialects import anthropic_messages as am
    from fakes.dialects import openai_responses as orr

    reply = {**_CALLS, "tool_calls": [{**_CALLS["tool_calls"][0], "id": call_id}]}
    if call_id is None:
        reply["tool_calls"][0].pop("id")
    d = am if dialect == "anthropic_messages" else orr
    events = d.stream_events(reply, "m")
    kinds = [e[0] for e in events]
    upto = 1 + max(
        i for i, k in enumerate(kinds) if k in ("content_block_start", "response.output_item.added")
    )
    sent = b"".join(d.frame(*e) for e in events[: upto + 1]).decode()
    if dialect == "anthropic_messages":
        body = {"model": "m", "max_tokens": 9, "messages": MSGS}
    else:
        body = {"model": "m", "input": MSGS}
    j = Journal()
    e = broken(j, "cut", sent)
    e["body"], e["dialect"] = {**body, "stream": True}, dialect
    fb = j.chat(200, stream=False, body={**body, "stream": False}, wait=0.01)
    fb["dialect"] = dialect
    fb["response"]["sent"] = json.dumps(d.json_body(reply, "m"))
    run_id = call_id or ("toolu_0" if dialect == "anthropic_messages" else "call_0")
    at = fb["response"]["t_end_ns"] + 10 if tool_after_fallback else e["response"]["t_end_ns"] + 10
    _tool(j, run_id, at)
    return j


@pytest.mark.parametrize("dialect", ["anthropic_messages", "openai_responses"])
@pytest.mark.parametrize("call_id", [None, "toolu_01Ab", "fc_x", "weird-id"])
def test_str03_reads_ids_of_every_dialect(dialect: str, call_id: str | None) -> None:
    good = run_check("STR-03", _dialect_run(dialect, call_id, True).evidence())
    assert good.outcome == "pass", good.observed
    bad = run_check("STR-03", _dialect_run(dialect, call_id, False).evidence())
    assert bad.outcome == "fail", bad.observed


def test_str03_chat_id_of_any_form() -> None:
    sse = TOOL_SSE.replace("call_1", "tool-7")
    j = Journal()
    e = broken(j, "cut", sse)
    _tool(j, "tool-7", e["response"]["t_end_ns"] + 10)
    j.chat(200, body=PLAIN, wait=1.0)
    f = run_check("STR-03", j.evidence())
    assert f.outcome == "fail" and "tool-7" in f.observed


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
    assert run_check("STR-05", none.evidence([turn_end("error")])).outcome == "fail"
    assert run_check("STR-05", none.evidence()).outcome == "not_applicable"  # may still come
    # A 12th streaming attempt fails at once, even with the turn still going.
    none.chat(None, body=STREAM, wait=0.1)
    f = run_check("STR-05", none.evidence())
    assert f.outcome == "fail" and "12 streaming" in f.observed


def test_str05_not_applicable_on_a_non_retryable_status() -> None:
    j = Journal()
    j.chat(400, body=STREAM)
    f = run_check("STR-05", j.evidence([turn_end("error")]))
    assert f.outcome == "not_applicable" and "400" in f.observed
