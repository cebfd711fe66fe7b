"""Invariant and TRN checks: passing and failing synthetic runs."""

from __future__ import annotations

import json

from conformance.checks import FINAL_ON_PARTIAL, INVARIANTS, run_check
from conformance.checks.seed_strings import CONTINUATION_TEXT
from tests.checks.synth import Journal, turn_end

USER = {"role": "user", "content": "write a story"}


def body(*msgs: dict) -> dict:
    return {"model": "m", "stream": True, "messages": [USER, *msgs]}


def test_invariants_registered() -> None:
    assert set(INVARIANTS) == {"RSN-04", "TOL-06", "LOP-04", "ERR-05", "DBG-02"}


def test_continuation_text_has_em_dash() -> None:
    assert "\u2014" in CONTINUATION_TEXT and CONTINUATION_TEXT.startswith("Output token limit")


# RSN-04 -------------------------------------------------------------------------------------
def test_rsn04_pass() -> None:
    j = Journal()
    j.chat(body=body({"role": "assistant", "content": "partial"}))
    assert run_check("RSN-04", j.evidence()).outcome == "pass"


def test_rsn04_fail_empty_assistant() -> None:
    for bad in ({"role": "assistant", "content": ""}, {"role": "assistant", "content": None}):
        j = Journal()
        j.chat(body=body(bad))
        assert run_check("RSN-04", j.evidence()).outcome == "fail"


# TOL-06 -------------------------------------------------------------------------------------
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}


def test_tol06_pass_paired() -> None:
    j = Journal()
    j.chat(body=body(CALL, {"role": "tool", "tool_call_id": "c1", "content": "ok"}))
    assert run_check("TOL-06", j.evidence()).outcome == "pass"


def test_tol06_fail_missing_result() -> None:
    j = Journal()
    j.chat(body=body(CALL, {"role": "user", "content": "go on"}))
    f = run_check("TOL-06", j.evidence())
    assert f.outcome == "fail" and "0 result" in f.observed


def test_tol06_fail_duplicate_result() -> None:
    r = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    j = Journal()
    j.chat(body=body(CALL, r, r))
    assert run_check("TOL-06", j.evidence()).outcome == "fail"


def test_tol06_fail_orphan_result() -> None:
    j = Journal()
    j.chat(body=body({"role": "tool", "tool_call_id": "zz", "content": "ok"}))
    f = run_check("TOL-06", j.evidence())
    assert f.outcome == "fail" and "orphan" in f.observed


# LOP-04 / ERR-05 ----------------------------------------------------------------------------
def test_turn_end_pass() -> None:
    j = Journal()
    j.chat()
    ev = j.evidence(events=[{"type": "turn_end", "reason": "error"}])
    assert run_check("ERR-05", ev).outcome == "pass"
    assert run_check("LOP-04", ev).outcome == "pass"


def test_turn_end_fail_missing_or_double() -> None:
    j = Journal()
    j.chat()
    assert run_check("ERR-05", j.evidence()).outcome == "fail"
    two = [{"type": "turn_end", "reason": "completed"}] * 2
    assert run_check("LOP-04", j.evidence(events=two)).outcome == "fail"


# TRN-01 / TRN-02 ----------------------------------------------------------------------------
def truncated_then(next_last: dict, events: list[dict] | None = None):
    j = Journal()
    j.chat(fault="length")
    j.chat(body=body({"role": "assistant", "content": "Once upon"}, next_last), wait=0.01)
    return j.evidence(events=events)


CONT = {"role": "user", "content": CONTINUATION_TEXT}


def test_trn01_pass_exact_text() -> None:
    assert run_check("TRN-01", truncated_then(CONT)).outcome == "pass"


def test_trn01_fail_hyphen_instead_of_em_dash() -> None:
    wrong = {"role": "user", "content": CONTINUATION_TEXT.replace("\u2014", "-")}
    assert run_check("TRN-01", truncated_then(wrong)).outcome == "fail"


def test_trn01_fail_no_new_call() -> None:
    j = Journal()
    j.chat(fault="length")
    f = run_check("TRN-01", j.evidence())
    assert f.outcome == "fail" and "no request" in f.observed


def test_trn01_not_applicable_without_length() -> None:
    j = Journal()
    j.chat()
    assert run_check("TRN-01", j.evidence()).outcome == "not_applicable"


def test_trn02_pass_meta() -> None:
    ev = truncated_then(
        CONT,
        [{"type": "message", "id": "m2", "role": "user", "text": CONTINUATION_TEXT, "meta": True}],
    )
    assert run_check("TRN-02", ev).outcome == "pass"


def test_trn02_fail_visible() -> None:
    ev = truncated_then(
        CONT,
        [{"type": "message", "id": "m2", "role": "user", "text": CONTINUATION_TEXT, "meta": False}],
    )
    f = run_check("TRN-02", ev)
    assert f.outcome == "fail" and "m2" in f.observed


def test_trn02_fail_never_reported() -> None:
    assert run_check("TRN-02", truncated_then(CONT, [turn_end()])).outcome == "fail"
    # Before the turn ended the message may still be reported: no verdict yet.
    assert run_check("TRN-02", truncated_then(CONT, [])).outcome == "not_applicable"


def _said(entry: dict, text: str, finish: str = "length") -> None:
    """The response carried ``text`` and finished with ``finish``."""
    delta = {"choices": [{"index": 0, "delta": {"content": text}}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    entry["response"]["sent"] = f"data: {json.dumps(delta)}\n\ndata: {json.dumps(end)}\n\n"


def _truncations(
    n: int, *, escalate: bool = False, again: bool = False, error: bool = True, ended: bool = True
):
    """n length finishes, each answered by one more continuation on the growing transcript."""
    j = Journal()
    _said(j.chat(fault="length"), "part 0")
    if escalate:  # TRN-07: the same transcript with a raised limit, no continuation appended
        _said(j.chat(fault="length"), "part 0")
    turns: list[dict] = []
    for i in range(n - 1 + (1 if again else 0)):
        turns += [{"role": "assistant", "content": f"part {i}"}, CONT]
        last = i == n - 2 and not again
        e = j.chat(fault="length" if (i < n - 2 or last) else None, body=body(*turns))
        _said(e, f"part {i + 1}", "length" if e["fault"] else "stop")
    ev = [{"type": "error", "kind": "output_limit", "message": "limit exceeded 4 times"}]
    return j.evidence(events=(ev if error else []) + ([turn_end("error")] if ended else []))


def test_trn04_pass_and_fail() -> None:
    assert run_check("TRN-04", _truncations(4)).outcome == "pass"
    assert run_check("TRN-04", _truncations(4, again=True)).outcome == "fail"
    assert run_check("TRN-04", _truncations(4, error=False)).outcome == "fail"
    # Before the turn ended, the error may still be shown.
    assert (
        run_check("TRN-04", _truncations(4, error=False, ended=False)).outcome == "not_applicable"
    )


def test_trn04_fail_gives_up_before_the_limit() -> None:
    """Stopping with fewer than 3 recoveries is a limit of the agent's own, not the seed's."""
    for n in (1, 2, 3):  # the turn ends on truncation n, after n - 1 continuations
        f = run_check("TRN-04", _truncations(n))
        assert f.outcome == "fail", (n, f.observed)
        assert f"only {n - 1} continuation(s)" in f.observed
        # A run cut short there proves nothing yet: the continuation may still come.
        assert run_check("TRN-04", _truncations(n, ended=False)).outcome == "not_applicable"


def test_trn04_a_user_abort_is_no_giving_up() -> None:
    j = Journal()
    _said(j.chat(fault="length"), "part 0")
    ev = j.evidence(events=[turn_end("aborted")])
    assert run_check("TRN-04", ev).outcome == "not_applicable"


def test_trn04_an_empty_length_reply_is_no_truncation_to_continue() -> None:
    # Nothing produced: an empty reply (STR-16), which the agent may retry and give up on.
    j = Journal()
    for _ in range(4):
        _said(j.chat(fault="length"), "")
    ev = j.evidence(events=[turn_end("error")])
    assert run_check("TRN-04", ev).outcome == "not_applicable"


def test_trn04_stopping_on_a_repetition_loop_is_allowed() -> None:
    # The same text 3 times in a row (LOP-06): stopping there is the loop's intervention.
    j = Journal()
    turns: list[dict] = []
    for _ in range(3):
        _said(j.chat(fault="length", body=body(*turns)), "I will now plan.")
        turns += [{"role": "assistant", "content": "I will now plan."}, CONT]
    ev = j.evidence(events=[turn_end("error")])
    assert run_check("TRN-04", ev).outcome == "not_applicable"


def test_trn04_fourth_continuation_fails_on_a_run_cut_short() -> None:
    assert "TRN-04" in FINAL_ON_PARTIAL
    f = run_check("TRN-04", _truncations(4, again=True, error=False, ended=False))
    assert f.outcome == "fail" and "continuation number 4" in f.observed


def test_trn04_raised_limit_is_not_a_recovery() -> None:
    """Raising the output limit once appends no continuation, so it does not count."""
    assert run_check("TRN-04", _truncations(4, escalate=True)).outcome == "pass"


def test_trn04_retries_of_one_continuation_count_once() -> None:
    j = Journal()
    j.chat(fault="length")
    turns = [{"role": "assistant", "content": "p"}, CONT]
    for _ in range(5):  # a 429 burst on the first continuation: the same transcript, resent
        j.chat(status=429, body=body(*turns))
    j.chat(body=body(*turns))
    assert run_check("TRN-04", j.evidence(events=[])).outcome == "not_applicable"


def test_trn04_a_note_sent_as_a_user_turn_is_not_progress() -> None:
    """Where the API has no system role mid-conversation, an agent's note is a user turn."""
    j = Journal()
    j.chat(fault="length")
    note = {"role": "user", "content": "<system-reminder>same text three times</system-reminder>"}
    turns: list[dict] = []
    for i in range(4):
        turns += [{"role": "assistant", "content": f"part {i}"}, CONT]
        if i == 1:
            turns.append(note)
        j.chat(fault="length", body=body(*turns))
    ev = j.evidence(events=[], scenario={"id": "s", "prompt": USER["content"]})
    assert run_check("TRN-04", ev).outcome == "fail"  # a 4th continuation, note or not
