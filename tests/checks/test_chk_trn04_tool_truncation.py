"""TRN-04 versus TRN-06: a length finish with tool calls after 3 continuations is no 4th one."""

from __future__ import annotations

import json

from conformance.checks import run_check
from conformance.checks.seed_strings import CONTINUATION_TEXT
from tests.checks.synth import Journal, turn_end

USER = {"role": "user", "content": "write a story"}
CONT = {"role": "user", "content": CONTINUATION_TEXT}


def _sse(delta: dict) -> str:
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": "length"}]}
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"


def _three_continuations_then(last_delta: dict, *, error: bool) -> object:
    j = Journal()
    j.chat(fault="length")
    turns: list[dict] = []
    for i in range(3):
        turns += [{"role": "assistant", "content": f"part {i}"}, CONT]
        entry = j.chat(body={"model": "m", "stream": True, "messages": [USER, *turns]})
        entry["fault"] = "length"
        entry["response"]["sent"] = _sse(last_delta if i == 2 else {"content": f"part {i + 1}"})
    ev = [{"type": "error", "kind": "output_limit", "message": "limit exceeded 4 times"}]
    return j.evidence(events=(ev if error else []) + [turn_end("error")])


def test_trn04_a_truncated_tool_call_after_three_continuations_is_not_the_fourth() -> None:
    call = {"index": 0, "id": "c9", "function": {"name": "f", "arguments": "{"}}
    f = run_check("TRN-04", _three_continuations_then({"tool_calls": [call]}, error=False))
    assert f.outcome == "not_applicable", f.observed


def test_trn04_a_plain_fourth_truncation_still_needs_the_error() -> None:
    ev = _three_continuations_then({"content": "part 3"}, error=False)
    assert run_check("TRN-04", ev).outcome == "fail"
    ev = _three_continuations_then({"content": "part 3"}, error=True)
    assert run_check("TRN-04", ev).outcome == "pass"


def _tool_truncation_then(
    continuations: int, *, last_truncated: bool, error: bool, note: dict | None = None
) -> object:
    """A tool call cut at `length` (its tool ran, then the continuation), then text truncations,
    each continued: the requests' transcripts, in the order an agent sends them (TRN-03)."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{"}}
    turns: list[dict] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: invalid arguments"},
        *([note] if note else []),
        CONT,
    ]
    j = Journal()
    j.chat(fault="length")
    for i in range(continuations + 1):
        entry = j.chat(body={"model": "m", "stream": True, "messages": [USER, *turns]})
        if i < continuations or last_truncated:
            entry["fault"] = "length"
            entry["response"]["sent"] = _sse({"content": f"part {i}"})
        turns += [{"role": "assistant", "content": f"part {i}"}, CONT]
    ev = [{"type": "error", "kind": "output_limit", "message": "limit exceeded 4 times"}]
    ends = (ev if error else []) + [turn_end("error" if error else "completed")]
    return j.evidence(events=ends, scenario={"id": "t", "prompt": USER["content"]})


def test_trn04_the_continuation_after_a_truncated_tool_call_is_not_counted() -> None:
    # Three text continuations after the tool call's own: within the limit (TRN-06).
    ev = _tool_truncation_then(3, last_truncated=False, error=False)
    f = run_check("TRN-04", ev)
    assert f.outcome == "not_applicable", f.observed
    # The fourth text truncation after them ends the turn with the error.
    ev = _tool_truncation_then(3, last_truncated=True, error=True)
    f = run_check("TRN-04", ev)
    assert f.outcome == "pass", f.observed


def test_trn04_counting_the_tool_call_continuation_stops_one_early() -> None:
    # An agent that counts the tool call's continuation gives up after two text continuations.
    ev = _tool_truncation_then(2, last_truncated=True, error=True)
    f = run_check("TRN-04", ev)
    assert f.outcome == "fail" and "only 2 continuation" in f.observed, f.observed


def test_trn04_the_agents_own_note_between_the_results_and_the_continuation() -> None:
    # A loop reminder, sent as a user turn or a system message, still leaves the continuation
    # the tool call's own (found by the fuzzer: a reminder after three failing calls).
    for role in ("user", "system"):
        note = {
            "role": role,
            "content": "<system-reminder>You have called f 3 times</system-reminder>",
        }
        ev = _tool_truncation_then(3, last_truncated=False, error=False, note=note)
        f = run_check("TRN-04", ev)
        assert f.outcome == "not_applicable", (role, f.observed)
