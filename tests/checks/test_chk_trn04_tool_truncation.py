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
