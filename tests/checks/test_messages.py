"""Verdict messages read as text: no Python value (None, a list or dict repr) in them."""

from __future__ import annotations

import re

from conformance.checks import run_check
from conformance.checks.finding import as_json, listed
from conformance.checks.wire import answer_of
from tests.checks.synth import Journal, turn_end

# What a message must never show: Python's own spelling of a value.
PYTHON_REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\[\]|\{\}|\['|\{'|\[\{")


def _reset(j: Journal, wait: float = 0.0) -> dict:
    """An attempt the gateway reset before any response, as it journals one."""
    e = j.chat(None, fault="reset_before_headers", wait=wait)
    e["response"] = {"status": None, "headers": {}, "end": "reset", "t_end_ns": j._ns(j.t)}
    return e


def test_a_late_retry_after_a_connection_failure_names_the_failure() -> None:
    # Old text: "retry 1 after status None waited 5.000s, outside [...]".
    j = Journal()
    _reset(j)
    j.chat(200, wait=5.0)
    f = run_check("RTY-06", j.evidence([turn_end()]))
    assert f.outcome == "fail", f.observed
    assert "retry 1 after a connection reset before any response waited" in f.observed
    assert not PYTHON_REPR.search(f.observed), f.observed


def test_giving_up_after_connection_failures_names_the_last_failure() -> None:
    # Old text: "stream: gave up after 2 attempts (last status None, seq 1): ...".
    j = Journal()
    _reset(j)
    _reset(j, wait=0.5)
    f = run_check("RTY-06", j.evidence([turn_end("error")]))
    assert f.outcome == "fail", f.observed
    assert "(last: a connection reset before any response, seq 1)" in f.observed, f.observed
    assert not PYTHON_REPR.search(f.observed), f.observed


def test_answer_of_says_how_an_attempt_without_status_ended() -> None:
    j = Journal()
    assert answer_of(j.chat(503)) == "status 503"
    assert answer_of(_reset(j)) == "a connection reset before any response"
    gone = j.chat(None)
    gone["response"] = {"status": None, "headers": {}, "end": "client_gone"}
    assert answer_of(gone) == "no response before the agent hung up"
    assert "None" not in answer_of(j.chat(None))


def test_an_untyped_error_kind_lists_the_vocabulary_as_words() -> None:
    # Old text: "kind 'agent' is not a typed error kind ['auth', 'bad_request', ...]".
    j = Journal()
    j.chat(429, headers={"retry-after": "0"})
    f = run_check(
        "ERR-01",
        j.evidence([{"type": "error", "kind": "agent", "message": "x"}, turn_end("error")]),
    )
    assert f.outcome == "fail"
    assert "kind 'agent' is not a typed error kind (auth, bad_request," in f.observed
    assert not PYTHON_REPR.search(f.observed), f.observed


def test_helpers_spell_values_for_people() -> None:
    assert listed([]) == "none"
    assert listed(["read_file", "write_file"], quoted=True) == "'read_file', 'write_file'"
    assert as_json({"path": "a.txt", "n": None}) == '{"path": "a.txt", "n": null}'


def test_an_error_shown_on_a_completed_turn_is_quoted_as_json() -> None:
    # Old text: "completed turn showed 1 error(s): {'type': 'error', 'kind': ..., 't_ns': ...}".
    j = Journal()
    j.chat(200)
    shown = {"type": "error", "kind": "server", "message": "gone"}
    f = run_check("ERR-02", j.evidence([shown, turn_end()]))
    assert f.outcome == "fail"
    assert f.observed == (
        'completed turn showed 1 error(s), the first {"kind": "server", "message": "gone"}'
    )


def test_a_wait_outside_its_band_says_by_how_much_in_both_units():
    from types import SimpleNamespace

    from conformance.checks.rty import off_band

    ev = SimpleNamespace(time_scale=0.02)
    assert off_band(ev, 3.339, 0.569, 2.056) == "1.283s late (25.7 ms real)"  # type: ignore[arg-type]
    assert off_band(ev, 0.4, 0.569, 2.056) == "0.169s early (3.4 ms real)"  # type: ignore[arg-type]


def test_a_retry_that_differs_names_the_keys_as_words() -> None:
    # Old text: "retry at seq 1 differs from seq 0 in ['messages']".
    j = Journal()
    j.chat(503)
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "other"}]}
    j.chat(200, wait=0.5, body=body)
    f = run_check("RTY-12", j.evidence([turn_end()]))
    assert f.outcome == "fail"
    assert f.observed == "retry at seq 1 differs from seq 0 in 'messages'"


def test_a_duration_is_given_in_scenario_seconds_with_the_real_time_beside():
    from conformance.judging.evidence import Evidence

    ev = Evidence(scenario={"id": "s"}, raw_journal={"entries": []}, time_scale=0.02)
    assert ev.both_units(9.04) == "9.040 s (180.8 ms real)"
