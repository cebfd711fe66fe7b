"""DBG checks: passing and failing synthetic runs."""

from __future__ import annotations

import json

from conformance.checks import run_check
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
    j.entries[0]["headers"] = {"authorization": f"Bearer {KEY}"}
    assert run_check("DBG-02", j.evidence(secrets=(KEY,))).outcome == "fail"
