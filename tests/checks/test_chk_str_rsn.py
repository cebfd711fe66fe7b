"""STR-02/04/06/07/10/11/12/13/16 and RSN-01/02/03 on hand-built evidence."""

from __future__ import annotations

import json

from conformance.checks import FINAL_ON_PARTIAL, run_check
from conformance.checks.finding import Finding
from tests.checks.synth import Journal, turn_end

MSGS = [{"role": "user", "content": "hi"}]
STREAM = {"model": "m", "stream": True, "messages": MSGS}
PLAIN = {"model": "m", "stream": False, "messages": MSGS}


def sse(*deltas: dict, finish: str | None = None, usage: dict | None = None) -> str:
    """SSE bytes: a role chunk, one chunk per delta, optionally a finish chunk with usage."""
    chunks = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]}]
    chunks += [{"choices": [{"delta": d, "finish_reason": None}]} for d in deltas]
    if finish or usage:
        last: dict = {"choices": [{"delta": {}, "finish_reason": finish}]}
        if usage:
            last["usage"] = usage
        chunks.append(last)
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)


def plain_json(text: str = "ok", usage: dict | None = None) -> str:
    msg = {"role": "assistant", "content": text}
    body: dict = {"choices": [{"message": msg, "finish_reason": "stop"}]}
    if usage:
        body["usage"] = usage
    return json.dumps(body)


def attempt(j: Journal, body: dict, sent: str, fault: str | None = None, **kw: object) -> dict:
    e = j.chat(200, body=body, stream=body["stream"], fault=fault, **kw)
    e["response"]["sent"] = sent
    e["response"]["sent_bytes"] = len(sent)
    e["response"]["full_bytes"] = len(sent)
    return e


def broken(j: Journal, sent: str | None = None, fault: str = "in_band_error") -> dict:
    e = attempt(j, STREAM, sent if sent is not None else sse({"content": "Hel"}), fault)
    e["response"]["full_bytes"] += 100  # the rest of the rendering never went out
    return e


def ev_at(entry: dict, offset_ns: int, **event: object) -> dict:
    return {**event, "t_ns": int(entry["t_arrival_ns"]) + offset_ns}


# --- STR-02 --------------------------------------------------------------------------------


def _str02(removed_at: int | None, end_at: int = 10**9) -> str:
    j = Journal()
    b = broken(j)
    fb = attempt(j, PLAIN, plain_json("Hi"), wait=0.01)
    events = [ev_at(b, 1000, type="message", id="m1", role="assistant", text="Hel")]
    if removed_at is not None:
        events.append(ev_at(b, removed_at, type="removed", id="m1"))
    # A non-streaming reply is shown once its body has ended.
    shown_at = int(fb["response"]["t_end_ns"]) - int(fb["t_arrival_ns"]) + 1000
    events.append(ev_at(fb, shown_at, type="message", id="m2", role="assistant", text="Hi"))
    events.append(ev_at(b, end_at, type="turn_end", reason="completed"))
    return run_check("STR-02", j.evidence(events)).outcome


def test_str_02_pass_partial_removed_by_id() -> None:
    assert _str02(removed_at=2000) == "pass"


def test_str_02_fail_partial_never_removed() -> None:
    assert _str02(removed_at=None) == "fail"


def test_str_02_fail_removed_after_turn_end() -> None:
    assert _str02(removed_at=5000, end_at=4000) == "fail"


def test_str_02_not_applicable_without_broken_stream_or_shown_partial() -> None:
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hi"}, finish="stop"))
    assert run_check("STR-02", j.evidence()).outcome == "not_applicable"
    j = Journal()
    broken(j)
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-02", j.evidence()).outcome == "not_applicable"


# --- STR-04 --------------------------------------------------------------------------------

ABORT = {"id": "s", "abort": {"when_step": 0}}


def _aborted(j: Journal, whole: bool = False) -> dict:
    e = attempt(j, STREAM, sse({"content": "Hel"}), "slow_dribble")
    e["response"]["full_bytes"] = e["response"]["sent_bytes"] + (0 if whole else 500)
    return e


def test_str_04_pass_no_resend_after_abort() -> None:
    j = Journal()
    _aborted(j)
    assert run_check("STR-04", j.evidence(scenario=ABORT)).outcome == "pass"


def test_str_04_fail_fallback_after_abort() -> None:
    j = Journal()
    _aborted(j)
    attempt(j, PLAIN, plain_json(), wait=0.01)
    f = run_check("STR-04", j.evidence(scenario=ABORT))
    assert f.outcome == "fail" and "non-streaming fallback" in f.observed


def test_str_04_not_applicable() -> None:
    j = Journal()
    _aborted(j)
    assert run_check("STR-04", j.evidence()).outcome == "not_applicable"
    j = Journal()
    _aborted(j, whole=True)
    assert run_check("STR-04", j.evidence(scenario=ABORT)).outcome == "not_applicable"


# --- STR-06 --------------------------------------------------------------------------------


def _failed_fallback(j: Journal, n: int = 1) -> dict:
    broken(j)
    last = {}
    for _ in range(n):
        last = j.chat(400, body=PLAIN, stream=False, wait=0.01)
    return last


def test_str_06_pass_error_shown_no_loop() -> None:
    j = Journal()
    last = _failed_fallback(j)
    events = [
        ev_at(last, 10**6, type="error", kind="bad_request", message="HTTP 400"),
        ev_at(last, 2 * 10**6, type="turn_end", reason="error"),
    ]
    assert run_check("STR-06", j.evidence(events)).outcome == "pass"


def test_str_06_fail_second_stream_after_failed_fallback() -> None:
    j = Journal()
    last = _failed_fallback(j)
    attempt(j, STREAM, sse({"content": "x"}, finish="stop"), wait=0.01)
    events = [ev_at(last, 10**6, type="error", kind="x", message="x")]
    f = run_check("STR-06", j.evidence(events))
    assert f.outcome == "fail" and "sent again" in f.observed


def test_str_06_fail_no_error_shown() -> None:
    j = Journal()
    last = _failed_fallback(j)
    events = [ev_at(last, 10**6, type="turn_end", reason="completed")]
    assert run_check("STR-06", j.evidence(events)).outcome == "fail"


def test_str_06_fail_unbounded_fallback() -> None:
    j = Journal()
    last = _failed_fallback(j, n=12)
    events = [ev_at(last, 10**6, type="error", kind="x", message="x")]
    f = run_check("STR-06", j.evidence(events))
    assert f.outcome == "fail" and "12" in f.observed


def test_str_06_fail_one_fallback_attempt_too_many_even_if_it_succeeds() -> None:
    # 11 failed fallback attempts, then a 12th: past the budget, whatever it got.
    j = Journal()
    _failed_fallback(j, n=11)
    attempt(j, PLAIN, plain_json(), wait=0.01)
    f = run_check("STR-06", j.evidence([turn_end()]))
    assert f.outcome == "fail" and "12 non-streaming" in f.observed


def test_str_06_on_a_run_cut_short() -> None:
    j = Journal()
    _failed_fallback(j, n=12)
    assert "STR-06" in FINAL_ON_PARTIAL
    assert run_check("STR-06", j.evidence()).outcome == "fail"  # the loop is on the wire
    j = Journal()
    _failed_fallback(j)
    # One failed fallback, the turn still going: the error may still be shown.
    assert run_check("STR-06", j.evidence()).outcome == "not_applicable"


def test_str_06_not_applicable_when_fallback_succeeds() -> None:
    j = Journal()
    broken(j)
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-06", j.evidence()).outcome == "not_applicable"


# --- STR-07 --------------------------------------------------------------------------------


def _str07(removal: bool, next_body: dict = PLAIN, sent: str | None = None) -> str:
    j = Journal()
    b = broken(j, sse() if sent is None else sent, fault="cut")
    b["response"]["end"] = "reset"
    attempt(j, next_body, plain_json() if not next_body["stream"] else sse(finish="stop"))
    events = [ev_at(b, 1000, type="removed", id="m1")] if removal else []
    return run_check("STR-07", j.evidence(events)).outcome


def test_str_07_pass_direct_fallback_without_removal() -> None:
    assert _str07(removal=False) == "pass"


def test_str_07_fail_removal_announced() -> None:
    assert _str07(removal=True) == "fail"


def test_str_07_fail_streaming_retry_instead_of_fallback() -> None:
    assert _str07(removal=False, next_body=STREAM) == "fail"


def test_str_07_not_applicable_when_content_was_streamed() -> None:
    assert _str07(removal=False, sent=sse({"content": "Hel"})) == "not_applicable"


# --- STR-10 --------------------------------------------------------------------------------

STALL = {"id": "s", "script": [{"reply": {"text": "x"}, "fault": {"stall": {"seconds": 300}}}]}


def _str10(wait: float | None, *, ended: bool = True) -> str:
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hel"}), "stall", duration=0.0)
    if wait is not None:
        attempt(j, PLAIN, plain_json(), wait=wait)
    events = [turn_end()] if ended else []
    return run_check("STR-10", j.evidence(events, scenario=STALL)).outcome


def test_str_10_pass_recovered_before_silence_ends() -> None:
    assert _str10(60.0) == "pass"


def test_str_10_fail_waited_out_the_silence() -> None:
    assert _str10(301.0) == "fail"


def test_str_10_fail_never_recovered() -> None:
    assert _str10(None) == "fail"
    assert _str10(None, ended=False) == "not_applicable"  # the recovery may still come


LIMITED = {
    "id": "s",
    "script": [{"reply": {"text": "x"}, "fault": {"stall": {"seconds": 360, "idle_limit": 300}}}],
}


def _limited(wait: float | None, scale: float = 0.02) -> Finding:
    j = Journal(scale)
    attempt(j, STREAM, sse({"content": "Hel"}), "stall", duration=0.0)
    if wait is not None:
        attempt(j, PLAIN, plain_json(), wait=wait)
    return run_check("STR-10", j.evidence([turn_end()], scenario=LIMITED))


def test_str_10_within_the_idle_limit_passes_and_past_it_fails_to_be_confirmed() -> None:
    assert _limited(299.0).outcome == "pass"
    late = _limited(320.0)  # abandoned during the silence, but 20 s past the limit
    assert (late.outcome, late.beyond_load) == ("fail", False)
    assert "past the 300 s idle limit" in late.observed


def test_str_10_a_silence_waited_out_past_the_limit_is_beyond_load() -> None:
    # 60 s of margin at scale 0.02 are 1.2 s real: more than load makes a watchdog late.
    for wait in (361.0, None):
        found = _limited(wait)
        assert (found.outcome, found.beyond_load) == ("fail", True), wait
        assert "60 s past the 300 s idle limit" in found.observed
    # At scale 0.01 the same margin is 0.6 s real: a confirmation must settle it.
    assert _limited(361.0, scale=0.01).beyond_load is False


def test_str_10_another_request_in_time_is_no_resend_whatever_the_clock() -> None:
    # Abandoned at 241 s, then the partial reply continued instead of the request sent again.
    j = Journal()
    stalled = attempt(j, STREAM, sse({"content": "Hel"}), "stall", duration=0.0)
    stalled["response"]["full_bytes"] += 100  # the rest never went out
    partial = [*MSGS, {"role": "assistant", "content": "Hel"}, {"role": "user", "content": "go"}]
    attempt(j, {**STREAM, "messages": partial}, sse({"content": "lo"}, finish="stop"), wait=241.0)
    found = run_check("STR-10", j.evidence([turn_end()], scenario=LIMITED))
    assert (found.outcome, found.beyond_load) == ("fail", True)
    assert "is not the same request (it differs in messages)" in found.observed
    assert "241.000 s" in found.observed


def test_str_10_without_an_idle_limit_is_never_beyond_load() -> None:
    assert _str10(301.0) == "fail"
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hel"}), "stall", duration=0.0)
    attempt(j, PLAIN, plain_json(), wait=301.0)
    assert run_check("STR-10", j.evidence([turn_end()], scenario=STALL)).beyond_load is False


def test_str_10_not_applicable_without_stall() -> None:
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hi"}, finish="stop"))
    assert run_check("STR-10", j.evidence(scenario=STALL)).outcome == "not_applicable"


# --- STR-11 --------------------------------------------------------------------------------

BIG = {"prompt_tokens": 1000, "completion_tokens": 500}
SMALL = {"prompt_tokens": 100, "completion_tokens": 20}


def _str11(reported: list[dict], failed_usage: dict | None = BIG) -> str:
    j = Journal()
    broken(j, sse({"content": "Hel"}, usage=failed_usage), fault="end_without_finish")
    attempt(j, PLAIN, plain_json(usage=SMALL))
    events = [{"type": "usage", **u} for u in reported]
    return run_check("STR-11", j.evidence(events)).outcome


def test_str_11_pass_only_successful_usage() -> None:
    assert _str11([SMALL]) == "pass"


def test_str_11_fail_failed_attempt_counted() -> None:
    assert _str11([{"prompt_tokens": 1100, "completion_tokens": 520}]) == "fail"
    assert _str11([BIG, SMALL]) == "fail"


def test_str_11_not_applicable() -> None:
    assert _str11([SMALL], failed_usage=None) == "not_applicable"
    assert _str11([]) == "not_applicable"


# --- STR-12 --------------------------------------------------------------------------------

OFF = {"id": "s", "config": {"stream_fallback": False}}


def test_str_12_pass_no_fallback_error_shown() -> None:
    j = Journal()
    b = broken(j)
    events = [ev_at(b, 1000, type="error", kind="stream", message="stream failed")]
    assert run_check("STR-12", j.evidence(events, scenario=OFF)).outcome == "pass"


def test_str_12_fail_fallback_despite_config() -> None:
    j = Journal()
    b = broken(j)
    attempt(j, PLAIN, plain_json())
    events = [ev_at(b, 1000, type="error", kind="stream", message="x")]
    assert run_check("STR-12", j.evidence(events, scenario=OFF)).outcome == "fail"


def test_str_12_fail_no_error_shown() -> None:
    j = Journal()
    broken(j)
    assert run_check("STR-12", j.evidence([turn_end("error")], scenario=OFF)).outcome == "fail"
    assert run_check("STR-12", j.evidence(scenario=OFF)).outcome == "not_applicable"


def test_str_12_not_applicable_when_fallback_on() -> None:
    j = Journal()
    broken(j)
    assert run_check("STR-12", j.evidence()).outcome == "not_applicable"


# --- STR-13 --------------------------------------------------------------------------------


def _no_done(j: Journal) -> dict:
    return attempt(j, STREAM, sse({"content": "Hi"}, finish="stop"), "finish_without_done")


def test_str_13_pass_taken_as_complete() -> None:
    j = Journal()
    e = _no_done(j)
    events = [ev_at(e, 1000, type="turn_end", reason="completed")]
    assert run_check("STR-13", j.evidence(events)).outcome == "pass"


def test_str_13_fail_resent() -> None:
    j = Journal()
    _no_done(j)
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-13", j.evidence()).outcome == "fail"


def test_str_13_an_empty_reply_asked_for_again_is_str_16s() -> None:
    # Finished, no [DONE], and nothing in it: asking again is what STR-16 wants.
    j = Journal()
    attempt(j, STREAM, sse({"content": ""}, finish="stop"), "finish_without_done")
    attempt(j, STREAM, sse({"content": "Hi"}, finish="stop") + "data: [DONE]\n\n")
    assert run_check("STR-13", j.evidence()).outcome == "not_applicable"


def _reset_after_finish(j: Journal) -> dict:
    e = attempt(j, STREAM, sse({"content": "Hi"}, finish="stop"), "cut")
    e["response"]["end"] = "reset"
    e["response"]["full_bytes"] += len("data: [DONE]\n\n")  # the marker never went out
    return e


def test_str_13_a_reset_after_the_finish_chunk_is_judged_too() -> None:
    j = Journal()
    e = _reset_after_finish(j)
    events = [ev_at(e, 1000, type="turn_end", reason="completed")]
    assert run_check("STR-13", j.evidence(events)).outcome == "pass"
    j = Journal()
    _reset_after_finish(j)
    attempt(j, PLAIN, plain_json())  # resent: taken for a failed stream
    assert run_check("STR-13", j.evidence()).outcome == "fail"


def test_str_13_a_cut_before_the_finish_chunk_is_not_its_business() -> None:
    j = Journal()
    e = attempt(j, STREAM, sse({"content": "Hi"}), "cut")
    e["response"]["end"] = "reset"
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-13", j.evidence()).outcome == "not_applicable"


def test_str_13_fail_turn_ends_in_error() -> None:
    j = Journal()
    e = _no_done(j)
    events = [ev_at(e, 1000, type="turn_end", reason="error")]
    assert run_check("STR-13", j.evidence(events)).outcome == "fail"


def test_str_13_not_applicable() -> None:
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hi"}, finish="stop") + "data: [DONE]\n\n")
    assert run_check("STR-13", j.evidence()).outcome == "not_applicable"


# --- STR-16 --------------------------------------------------------------------------------

NO_CHOICES = json.dumps({"choices": []})


def _empties(j: Journal, n: int) -> dict:
    last = {}
    for _ in range(n):
        last = attempt(j, PLAIN, NO_CHOICES, "empty_reply")
    return last


def test_str_16_pass_retried_once() -> None:
    j = Journal()
    _empties(j, 1)
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-16", j.evidence()).outcome == "pass"


def test_str_16_pass_gave_up_with_error() -> None:
    j = Journal()
    last = _empties(j, 4)
    events = [ev_at(last, 1000, type="error", kind="server", message="empty replies")]
    assert run_check("STR-16", j.evidence(events)).outcome == "pass"


def test_str_16_fail_not_retried() -> None:
    j = Journal()
    _empties(j, 1)
    f = run_check("STR-16", j.evidence([turn_end()]))
    assert f.outcome == "fail" and "not retried" in f.observed
    assert run_check("STR-16", j.evidence()).outcome != "fail"  # the retry may still come


def test_str_16_fail_unbounded() -> None:
    j = Journal()
    _empties(j, 23)
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-16", j.evidence()).outcome == "fail"


def test_str_16_fail_gave_up_silently() -> None:
    j = Journal()
    _empties(j, 3)
    assert run_check("STR-16", j.evidence([turn_end("error")])).outcome == "fail"


def test_str_16_not_applicable() -> None:
    j = Journal()
    attempt(j, PLAIN, plain_json())
    assert run_check("STR-16", j.evidence()).outcome == "not_applicable"


# --- RSN-01 / RSN-02 -----------------------------------------------------------------------

REASONING = "The user wants a story; a fox"
NOTE = "[Reasoning was cut off by the output limit and kept by the system.]"


def _truncated(j: Journal, text: str = "", reasoning: str = REASONING) -> None:
    deltas = [{"reasoning_content": reasoning[:10]}, {"reasoning_content": reasoning[10:]}]
    if text:
        deltas.append({"content": text})
    attempt(j, STREAM, sse(*deltas, finish="length"))


def _continued(j: Journal, assistant: dict | None) -> None:
    added = [assistant] if assistant else []
    cont = [*MSGS, *added, {"role": "user", "content": "Output token limit hit. Resume."}]
    attempt(j, {**STREAM, "messages": cont}, sse({"content": "fox."}, finish="stop"))


def _rsn(cid: str, assistant: dict | None, text: str = "") -> str:
    j = Journal()
    _truncated(j, text)
    _continued(j, assistant)
    return run_check(cid, j.evidence()).outcome


def test_rsn_01_pass_reasoning_and_note() -> None:
    a = {"role": "assistant", "content": NOTE, "reasoning_content": REASONING}
    assert _rsn("RSN-01", a) == "pass"


def test_rsn_01_fail_reasoning_only_message_dropped() -> None:
    assert _rsn("RSN-01", None) == "fail"


def test_rsn_01_fail_empty_content_or_copied_reasoning() -> None:
    assert _rsn("RSN-01", {"role": "assistant", "content": "", "reasoning_content": REASONING}) == (
        "fail"
    )
    copy = {"role": "assistant", "content": REASONING, "reasoning_content": REASONING}
    assert _rsn("RSN-01", copy) == "fail"


def test_rsn_01_fail_reasoning_content_missing() -> None:
    assert _rsn("RSN-01", {"role": "assistant", "content": NOTE}) == "fail"


def test_rsn_01_not_applicable_without_reasoning_only_truncation() -> None:
    a = {"role": "assistant", "content": "Once", "reasoning_content": REASONING}
    assert _rsn("RSN-01", a, text="Once") == "not_applicable"
    j = Journal()
    _truncated(j)
    assert run_check("RSN-01", j.evidence()).outcome == "not_applicable"


def test_rsn_02_pass_reasoning_alongside_text() -> None:
    a = {"role": "assistant", "content": "Once", "reasoning_content": REASONING}
    assert _rsn("RSN-02", a, text="Once") == "pass"


def test_rsn_02_fail_reasoning_dropped_or_text_changed() -> None:
    assert _rsn("RSN-02", {"role": "assistant", "content": "Once"}, text="Once") == "fail"
    a = {"role": "assistant", "content": "Once upon", "reasoning_content": REASONING}
    assert _rsn("RSN-02", a, text="Once") == "fail"


def test_rsn_02_not_applicable_for_reasoning_only() -> None:
    a = {"role": "assistant", "content": NOTE, "reasoning_content": REASONING}
    assert _rsn("RSN-02", a) == "not_applicable"


# --- RSN-03 --------------------------------------------------------------------------------

HISTORY = {
    "id": "s",
    "history": [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": ""},
    ],
}


def test_rsn_03_pass_empty_history_turn_filtered() -> None:
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hi"}, finish="stop"))
    assert run_check("RSN-03", j.evidence(scenario=HISTORY)).outcome == "pass"


def test_rsn_03_pass_after_empty_reply() -> None:
    j = Journal()
    attempt(j, STREAM, sse(finish="length"))
    _continued(j, None)
    assert run_check("RSN-03", j.evidence()).outcome == "pass"


def test_rsn_03_fail_empty_assistant_sent() -> None:
    j = Journal()
    body = {**STREAM, "messages": [*MSGS, {"role": "assistant", "content": None}]}
    attempt(j, body, sse({"content": "Hi"}, finish="stop"))
    f = run_check("RSN-03", j.evidence(scenario=HISTORY))
    assert f.outcome == "fail" and "message 1" in f.observed


def test_rsn_03_reasoning_alone_is_not_an_empty_turn() -> None:
    j = Journal()
    a = {"role": "assistant", "content": "", "reasoning_content": "thinking"}
    attempt(j, {**STREAM, "messages": [*MSGS, a]}, sse({"content": "Hi"}, finish="stop"))
    assert run_check("RSN-03", j.evidence(scenario=HISTORY)).outcome == "pass"


def test_rsn_03_not_applicable_without_empty_turn() -> None:
    j = Journal()
    attempt(j, STREAM, sse({"content": "Hi"}, finish="stop"))
    assert run_check("RSN-03", j.evidence()).outcome == "not_applicable"


def test_str_10_reads_stall_seconds_from_the_journal() -> None:
    j = Journal()
    e = attempt(j, STREAM, sse({"content": "Hel"}), "stall", duration=0.0)
    e["fault_params"] = {"after_events": 2, "seconds": 30}
    attempt(j, PLAIN, plain_json(), wait=60.0)
    assert run_check("STR-10", j.evidence()).outcome == "fail"


def test_str_15_an_error_after_the_streams_own_end_is_not_judged() -> None:
    """Where the finish and end markers are one event (Responses), a late error never arrives."""
    j = Journal()
    sent = sse({"content": "Hi"}, finish="stop") + "data: [DONE]\n\n"
    sent += 'data: {"error": {"message": "late"}}\n\n'
    e = attempt(j, STREAM, sent, "in_band_error")
    e["fault_params"] = {"after_events": 4}
    assert run_check("STR-15", j.evidence([])).outcome == "not_applicable"
    e["fault_params"] = {"after_events": 2}  # the same error before the finish: judged
    assert run_check("STR-15", j.evidence([])).outcome == "fail"


def test_str_02_a_partial_read_late_still_belongs_to_the_broken_stream() -> None:
    """An outside command's line can be read after its fallback request already arrived."""
    j = Journal()
    b = broken(j)
    fb = attempt(j, PLAIN, plain_json("Hi"), wait=0.01, duration=0.5)
    late = int(fb["t_arrival_ns"]) - int(b["t_arrival_ns"]) + 1000  # after fb arrived
    after = int(fb["response"]["t_end_ns"]) - int(fb["t_arrival_ns"]) + 1000
    events = [
        ev_at(b, late, type="message", id="m1", role="assistant", text="Hel"),
        ev_at(fb, after, type="message", id="m2", role="assistant", text="Hi"),
        ev_at(fb, after + 10, type="turn_end", reason="completed"),
    ]
    assert run_check("STR-02", j.evidence(events)).outcome == "fail"  # shown, never removed
    events.insert(1, ev_at(fb, after - 500, type="removed", id="m1"))
    assert run_check("STR-02", j.evidence(events)).outcome == "pass"


def test_str_02_the_fallbacks_own_reply_is_not_the_partial() -> None:
    """A fallback message stamped before the gateway recorded the body's end is still its own."""
    j = Journal()
    b = broken(j)
    fb = attempt(j, PLAIN, plain_json("Hi"), wait=0.01, duration=0.5)
    events = [
        ev_at(b, 1000, type="message", id="m1", role="assistant", text="Hel"),
        ev_at(b, 2000, type="removed", id="m1"),
        ev_at(fb, 1000, type="message", id="m2", role="assistant", text="Hi"),
        ev_at(fb, 10**9, type="turn_end", reason="completed"),
    ]
    assert run_check("STR-02", j.evidence(events)).outcome == "pass"


def test_str_02_a_partial_read_after_the_fallback_ended_is_judged_by_order() -> None:
    """On a loaded machine an outside command's lines can all be read after the fallback's
    response ended: their order, not their stamps, places the partial before the reply."""
    j = Journal()
    broken(j)
    fb = attempt(j, PLAIN, plain_json("Hi"), wait=0.01, duration=0.5)
    after = int(fb["response"]["t_end_ns"]) - int(fb["t_arrival_ns"]) + 1000
    events = [
        ev_at(fb, after, type="message", id="m1", role="assistant", text="Hel"),
        ev_at(fb, after + 10, type="message", id="m2", role="assistant", text="Hi"),
        ev_at(fb, after + 20, type="turn_end", reason="completed"),
    ]
    assert run_check("STR-02", j.evidence(events)).outcome == "fail"  # shown, never removed
    events.insert(1, ev_at(fb, after + 5, type="removed", id="m1"))
    assert run_check("STR-02", j.evidence(events)).outcome == "pass"


def test_str_11_message_counts_tokens_in_words() -> None:
    # Old text: "recorded {'prompt_tokens': 1100, ...}, successful requests carried {...}".
    j = Journal()
    broken(j, sse({"content": "Hel"}, usage=BIG), fault="end_without_finish")
    attempt(j, PLAIN, plain_json(usage=SMALL))
    f = run_check("STR-11", j.evidence([{"type": "usage", **BIG}, {"type": "usage", **SMALL}]))
    assert f.observed == (
        "recorded 1100 prompt and 520 completion tokens, successful requests carried 100 prompt "
        "and 20 completion tokens (failed attempts carried 1000 prompt and 500 completion tokens)"
    )
