"""DBG checks: passing and failing synthetic runs."""

from __future__ import annotations

import json

from conformance.checks import FINAL_ON_PARTIAL, INVARIANTS, run_check
from tests.checks.synth import Journal

KEY = "sk-test-0123456789abcdef"
DUMP = {
    "messages": [{"role": "user", "content": "hi"}],
    "model": "m",
    "config": {},
    "error": {"status": 400},
}


def test_dbg01_pass() -> None:
    j = Journal()
    j.chat(400)
    ev = j.evidence(debug_files={"err-1.json": json.dumps(DUMP)})
    assert run_check("DBG-01", ev).outcome == "pass"


def test_dbg01_fail_no_dump_or_incomplete() -> None:
    j = Journal()
    j.chat(400)
    assert run_check("DBG-01", j.evidence()).outcome == "fail"
    partial = {k: v for k, v in DUMP.items() if k != "config"}
    f = run_check("DBG-01", j.evidence(debug_files={"e.json": json.dumps(partial)}))
    assert f.outcome == "fail" and "config" in f.observed


def test_dbg01_not_applicable_without_400() -> None:
    j = Journal()
    j.chat(200)
    assert run_check("DBG-01", j.evidence()).outcome == "not_applicable"


def test_dbg02_pass_redacted() -> None:
    j = Journal()
    j.chat(400)
    redacted = {**DUMP, "config": {"api_key": "[REDACTED]"}}
    ev = j.evidence(
        secrets=(KEY,),
        debug_files={"e.json": json.dumps(redacted)},
        agent_log="calling with key [REDACTED]",
    )
    assert run_check("DBG-02", ev).outcome == "pass"


def test_dbg02_fail_leaks() -> None:
    j = Journal()
    j.chat(400)
    leaky = {**DUMP, "config": {"api_key": KEY}}
    f = run_check("DBG-02", j.evidence(secrets=(KEY,), debug_files={"e.json": json.dumps(leaky)}))
    assert f.outcome == "fail" and "e.json" in f.observed and KEY not in f.observed
    f = run_check("DBG-02", j.evidence(secrets=(KEY,), agent_log=f"Bearer {KEY}"))
    assert f.outcome == "fail" and "agent log" in f.observed


# DBG-02 as an invariant: every run, from the agent's output before the runner redacts it -------
ECHO = f"HTTP 401: invalid api key {KEY} (key echoed by the gateway)"


def test_dbg02_is_judged_in_every_scenario() -> None:
    assert "DBG-02" in INVARIANTS and "DBG-02" in FINAL_ON_PARTIAL


def test_dbg02_fail_key_in_an_event_names_the_place_not_the_key() -> None:
    j = Journal()
    j.chat(401)
    events = [
        {"type": "hello", "version": "1"},
        {"type": "message", "id": "m1", "role": "assistant", "text": "Working on it."},
        {"type": "error", "kind": "auth", "message": ECHO},
        {"type": "turn_end", "reason": "error"},
    ]
    f = run_check("DBG-02", j.evidence(events, secrets=(KEY,)))
    assert f.outcome == "fail" and KEY not in f.observed and KEY not in f.expected
    start = ECHO.index(KEY)
    assert f"event 3 (type error), field message, chars {start}-{start + len(KEY)}" in f.observed


def test_dbg02_fail_key_on_stderr_and_in_a_dump() -> None:
    j = Journal()
    j.chat(429)
    log = f"starting\nretrying after 429: {ECHO}\n"
    f = run_check("DBG-02", j.evidence(secrets=(KEY,), agent_log=log))
    assert f.outcome == "fail" and "agent log, line 2, chars" in f.observed
    assert KEY not in f.observed
    dump = json.dumps({**DUMP, "error": {"status": 401, "body": ECHO}}, indent=1)
    f = run_check("DBG-02", j.evidence(secrets=(KEY,), debug_files={"dump/err.json": dump}))
    assert f.outcome == "fail" and "debug file dump/err.json, line" in f.observed


def test_dbg02_fail_key_pasted_into_a_request() -> None:
    j = Journal()
    j.chat(401)
    leaked = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ECHO}]
    j.chat(200, body={"model": "m", "stream": True, "messages": leaked})
    f = run_check("DBG-02", j.evidence(secrets=(KEY,)))
    assert (
        f.outcome == "fail" and "request seq 1 (chat), field body.messages[1].content" in f.observed
    )


def test_dbg02_the_credential_header_is_no_leak() -> None:
    # The key belongs in the authorization header (which the gateway hides anyway).
    j = Journal()
    j.chat(200)
    j.entries[0]["headers"] = {"authorization": f"Bearer {KEY}"}
    assert run_check("DBG-02", j.evidence(secrets=(KEY,))).outcome == "pass"


def test_dbg02_every_place_counted() -> None:
    j = Journal()
    j.chat(401)
    events = [{"type": "error", "kind": "auth", "message": f"{KEY} {KEY}"}] * 3
    f = run_check("DBG-02", j.evidence(events, secrets=(KEY,), agent_log=KEY))
    assert f.outcome == "fail" and "(and 4 more)" in f.observed


def test_dbg02_pass_a_masked_key_is_no_leak() -> None:
    j = Journal()
    j.chat(401)
    masked = KEY[:7] + "*" * 10 + KEY[-4:]  # as OpenAI echoes it
    events = [{"type": "error", "kind": "auth", "message": f"invalid key {masked}"}]
    f = run_check("DBG-02", j.evidence(events, secrets=(KEY,), agent_log=masked))
    assert f.outcome == "pass" and "1 event(s)" in f.observed


def test_dbg02_fails_on_a_run_cut_short() -> None:
    # The agent printed the key and then hung: the leak is final.
    j = Journal()
    j.chat(401)
    j.chat(None, wait=0.5)  # in flight, no turn_end
    events = [{"type": "message", "id": "m", "role": "assistant", "text": ECHO}]
    f = run_check("DBG-02", j.evidence(events, secrets=(KEY,)))
    assert f.outcome == "fail" and "event 1 (type message), field text" in f.observed


# --- an agent's own debug files, read through the reader of their format --------------------


def test_dbg01_read_in_its_format_pass_and_what_is_missing() -> None:
    from tests.test_debug_formats import FILES_197, FILES_332

    j = Journal()
    j.chat(400)
    f = run_check("DBG-01", j.evidence(debug_files=FILES_332, debug_format="claude-code"))
    assert f.outcome == "pass", f.observed
    assert "(format claude-code)" in f.expected
    assert "config: t/-tmp-w/5b30442c.jsonl:2: api-request params max_tokens" in f.observed
    f = run_check("DBG-01", j.evidence(debug_files=FILES_197, debug_format="claude-code"))
    assert f.outcome == "fail"
    assert "missing: the model config (the request's parameters" in f.observed
    assert "error: claude-debug.log:3: API error (attempt 1/11): 400" in f.observed
    # Without the format, the same files are judged as the harness's dumps: not JSON.
    f = run_check("DBG-01", j.evidence(debug_files=FILES_332))
    assert f.outcome == "fail" and "not JSON" in f.observed


def test_dbg01_read_in_an_unknown_format_fails_saying_so() -> None:
    from tests.test_debug_formats import FILES_332

    j = Journal()
    j.chat(400)
    f = run_check("DBG-01", j.evidence(debug_files=FILES_332, debug_format="nope"))
    assert f.outcome == "fail" and "no reader for debug file format 'nope'" in f.observed
    f = run_check("DBG-01", j.evidence(debug_files={}, debug_format="claude-code"))
    assert f.outcome == "fail" and f.observed == "debug_dir is empty"
