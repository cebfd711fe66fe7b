"""FINAL_ON_PARTIAL: which criteria a run cut short (no turn_end) may still FAIL.

A criterion in the set must FAIL on a prefix of the evidence only when the full evidence FAILs
too; these tests cut correct runs at every moment and check that no criterion of the set FAILs
on any cut, and show criteria left out of the set doing exactly that.
"""

from __future__ import annotations

import json

import pytest

from conformance.checks import CHECKS, FINAL_ON_PARTIAL, registry, run_check
from conformance.checks.declare import declared
from conformance.checks.seed_strings import CONTINUATION_TEXT
from conformance.judging.evidence import Evidence, nominal_backoff
from tests.checks.synth import Journal, cut, cut_points

USER = {"role": "user", "content": "Say hello."}


def _body(stream: bool = True, *more: dict) -> dict:
    return {"model": "m", "stream": stream, "messages": [USER, *more]}


def _ok_stream(text: str = "Hello!", finish: str = "stop") -> str:
    delta = json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})
    end = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return f"data: {delta}\n\ndata: {end}\n\ndata: [DONE]\n\n"


# Truncation runs set the user's output limit, as the TRN scenarios do, so no raise is due.
TRUNCATING = {"id": "synthetic", "prompt": USER["content"], "config": {"max_output_tokens": 4096}}


def _answered(entry: dict, sent: str) -> None:
    entry["response"]["sent"] = sent


# --- correct runs (the full evidence) ---------------------------------------------------------
def burst_then_success(failures: int = 10, status: int = 429) -> Evidence:
    """A request failing ``failures`` times without Retry-After, retried with correct waits."""
    j = Journal()
    j.chat(status, body=_body())
    factors = [0.8, 1.2, 0.95, 1.1, 0.9, 1.0, 0.85, 1.15, 0.9, 1.05]
    for n in range(1, failures):
        j.chat(status, wait=nominal_backoff(n) * factors[n - 1], body=_body())
    ok = j.chat(200, wait=nominal_backoff(failures) * 0.9, body=_body())
    _answered(ok, _ok_stream())
    events = [j.event("message", id="m1", role="assistant", text="Hello!")]
    events.append(j.event("turn_end", reason="completed"))
    return j.evidence(events)


def streaming_exhausted_then_fallback() -> Evidence:
    """11 streaming 429s, then the one non-streaming fallback, which succeeds."""
    j = Journal()
    j.chat(429, body=_body())
    for n in range(1, 11):
        j.chat(429, wait=nominal_backoff(n), body=_body())
    ok = j.chat(200, wait=0.01, stream=False, body=_body(False))
    _answered(
        ok,
        '{"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, '
        '"finish_reason": "stop"}]}',
    )
    events = [j.event("message", id="m1", role="assistant", text="Hello!")]
    events.append(j.event("turn_end", reason="completed"))
    return j.evidence(events)


def non_retryable_surfaced() -> Evidence:
    """A 400 shown as an error; the request is not sent again."""
    j = Journal()
    j.chat(400, body=_body())
    events = [j.event("error", kind="bad_request", message="HTTP 400: bad request")]
    events.append(j.event("turn_end", reason="error"))
    return j.evidence(events)


def three_continuations_then_error() -> Evidence:
    """Four truncations: three continuations, the fourth ends the turn with the error."""
    j = Journal()
    msgs: list[dict] = []
    events = []
    for k in range(4):
        e = j.chat(200, wait=0.01, body=_body(True, *msgs), fault="length")
        _answered(e, _ok_stream(f"part {k}", "length"))
        events.append(j.event("message", id=f"a{k}", role="assistant", text=f"part {k}"))
        if k < 3:
            msgs += [
                {"role": "assistant", "content": f"part {k}"},
                {"role": "user", "content": CONTINUATION_TEXT},
            ]
            events.append(
                j.event("message", id=f"c{k}", role="user", text=CONTINUATION_TEXT, meta=True)
            )
    shown = "the output token limit was exceeded 4 times in a row"
    events.append(j.event("error", kind="output_limit", message=shown))
    events.append(j.event("turn_end", reason="error"))
    return j.evidence(events, scenario=TRUNCATING)


def one_continuation() -> Evidence:
    """A truncated reply continued once; the continuation finishes."""
    j = Journal()
    e = j.chat(200, body=_body(), fault="length")
    _answered(e, _ok_stream("Hel", "length"))
    events = [j.event("message", id="a0", role="assistant", text="Hel")]
    events.append(j.event("message", id="c0", role="user", text=CONTINUATION_TEXT, meta=True))
    more = [{"role": "assistant", "content": "Hel"}, {"role": "user", "content": CONTINUATION_TEXT}]
    ok = j.chat(200, wait=0.01, body=_body(True, *more))
    _answered(ok, _ok_stream("lo!"))
    events.append(j.event("message", id="a1", role="assistant", text="lo!"))
    events.append(j.event("turn_end", reason="completed"))
    return j.evidence(events, scenario=TRUNCATING)


def retry_after_honoured() -> Evidence:
    """A 429 asking 2 s, retried after 2.1 s."""
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"}, body=_body())
    ok = j.chat(200, wait=2.1, body=_body())
    _answered(ok, _ok_stream())
    return j.evidence([j.event("turn_end", reason="completed")])


def cut_stream_then_fallback() -> Evidence:
    """A stream cut after some text; the partial message is removed; the fallback answers."""
    j = Journal()
    broken = j.chat(200, body=_body(), fault="cut", end="reset")
    _answered(broken, _ok_stream("Hel").split('data: {"choices": [{"index": 0, "delta": {}')[0])
    events = [j.event("message", id="p1", role="assistant", text="Hel")]
    events.append(j.event("removed", id="p1"))
    ok = j.chat(200, wait=0.01, stream=False, body=_body(False))
    _answered(
        ok,
        '{"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, '
        '"finish_reason": "stop"}]}',
    )
    events.append(j.event("message", id="m1", role="assistant", text="Hello!"))
    events.append(j.event("turn_end", reason="completed"))
    return j.evidence(events)


TOOL = {
    "name": "write_file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def tool_error_fed_back() -> Evidence:
    """A tool call whose tool fails; the error goes back to the model, which then answers."""
    j = Journal()
    call = {
        "index": 0,
        "id": "c1",
        "function": {"name": "write_file", "arguments": '{"path": "a"}'},
    }
    first = j.chat(200, body=_body())
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    _answered(first, f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n")
    j.t += 0.01
    j.entries.append(
        {
            "seq": len(j.entries),
            "kind": "tool",
            "tool": "write_file",
            "call_id": "c1",
            "arguments": {"path": "a"},
            "behaviour": "error",
            "t_arrival_ns": j._ns(j.t),
            "response": {
                "status": 200,
                "sent": json.dumps({"error": {"type": "execution_error", "message": "disk full"}}),
                "t_headers_ns": j._ns(j.t + 0.01),
                "t_end_ns": j._ns(j.t + 0.01),
                "end": "complete",
            },
            "harness_error": None,
        }
    )
    j.t += 0.02
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "write_file", "arguments": '{"path": "a"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "Error: disk full"}
    ok = j.chat(200, wait=0.01, body=_body(True, assistant, result))
    _answered(ok, _ok_stream("Could not write the file."))
    events = [j.event("turn_end", reason="completed")]
    return j.evidence(events, scenario={"id": "synthetic", "tools": [TOOL]})


CORRECT_RUNS = {
    "retry-after": retry_after_honoured,
    "cut-then-fallback": cut_stream_then_fallback,
    "tool-error": tool_error_fed_back,
    "one-continuation": one_continuation,
    "burst-of-10": burst_then_success,
    "burst-of-10-503": lambda: burst_then_success(10, 503),
    "eleven-then-fallback": streaming_exhausted_then_fallback,
    "non-retryable": non_retryable_surfaced,
    "four-truncations": three_continuations_then_error,
}


# --- the set itself ---------------------------------------------------------------------------
def test_set_is_gathered_from_the_area_modules() -> None:
    # Declared with final=True on the @check line of each check, next to its code.
    marked = {cid for cid, d in declared().items() if d.final}
    assert marked == FINAL_ON_PARTIAL
    assert set(CHECKS) >= FINAL_ON_PARTIAL
    areas = {m.__name__ for m in registry._AREAS}
    assert all(declared()[cid].fn.__module__ in areas for cid in FINAL_ON_PARTIAL)


def test_eventual_criteria_are_left_out() -> None:
    # Each needs the end of the turn: a turn_end, an error shown, a removal, a continuation.
    for cid in ("LOP-04", "ERR-05", "ERR-01", "ERR-02", "STR-02", "TRN-01", "DBG-01", "RTY-08"):
        assert cid not in FINAL_ON_PARTIAL, cid


@pytest.mark.parametrize("name", sorted(CORRECT_RUNS))
def test_correct_runs_pass_in_full(name: str) -> None:
    ev = CORRECT_RUNS[name]()
    fails = {cid: run_check(cid, ev).observed for cid in FINAL_ON_PARTIAL}
    fails = {cid: why for cid, why in fails.items() if run_check(cid, ev).outcome == "fail"}
    assert not fails, fails


@pytest.mark.parametrize("in_flight", ["none", "open"])
@pytest.mark.parametrize("name", sorted(CORRECT_RUNS))
def test_no_final_criterion_fails_on_any_cut_of_a_correct_run(name: str, in_flight: str) -> None:
    ev = CORRECT_RUNS[name]()
    for at in cut_points(ev):
        part = cut(ev, at, in_flight=in_flight)
        for cid in sorted(FINAL_ON_PARTIAL):
            f = run_check(cid, part)
            assert f.outcome != "fail", f"{cid} cut at {at}: {f.observed}"


# --- examples ---------------------------------------------------------------------------------
def test_a_final_criterion_fails_on_a_run_cut_short() -> None:
    # A 400 resent verbatim; the resend is still in flight and the turn never ended.
    j = Journal()
    j.chat(400, body=_body())
    j.chat(400, wait=0.5, body=_body())
    ev = j.evidence([])
    part = cut(ev, ev.raw_journal["entries"][-1]["t_arrival_ns"] + 1)
    assert part.journal["entries"][-1]["response"] is None and not part.turn_ends()
    assert "RTY-07" in FINAL_ON_PARTIAL
    f = run_check("RTY-07", part)
    assert f.outcome == "fail" and "resent verbatim" in f.observed


def test_criteria_outside_the_set_would_fail_a_correct_run_cut_short() -> None:
    # Why they are not run on partial evidence: the cut alone makes them fail.
    ev = one_continuation()
    first = ev.raw_journal["entries"][0]
    part = cut(ev, first["response"]["t_end_ns"] + 1)
    assert run_check("TRN-01", ev).outcome == "pass"
    assert run_check("TRN-01", part).outcome == "fail"
    assert run_check("LOP-04", ev).outcome == "pass"
    assert run_check("LOP-04", part).outcome == "fail"
    assert not {"TRN-01", "LOP-04"} & FINAL_ON_PARTIAL
