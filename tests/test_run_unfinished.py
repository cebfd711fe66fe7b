"""The runner's verdicts when a turn does not end cleanly: what the wire decides still counts.

Each agent here is a few lines of scripted HTTP against the fake gateway, so that the wire holds
exactly the attempts the test needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from conformance.adapters.base import RunOutcome
from conformance.adapters.interface import AdapterBase
from conformance.runner import run_scenario
from fakes import Gateway, Scenario, load_scenario

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


class _Scripted(AdapterBase):
    """Sends ``requests`` (bodies) one after another, then reports ``status``."""

    name = "scripted"

    def __init__(self, requests: list[dict], status: str = "ran", events=None, log="") -> None:
        self.requests, self.status, self.events, self.log = requests, status, events, log

    def capabilities(self) -> set[str]:
        return {"time_scale"}

    def run(self, req):
        with httpx.Client(timeout=10) as client:
            for body in self.requests:
                client.post(
                    f"{req.base_url}/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "Hi"}], **body},
                    headers={"Authorization": f"Bearer {req.api_key}"},
                ).read()
        events = self.events(req) if callable(self.events) else self.events
        if events is None:
            events = [{"type": "turn_end", "reason": "error", "t_ns": 0}]
        error = {"timeout": "no turn_end within 1 s", "unsupported": "exit 89"}.get(self.status)
        log = self.log(req) if callable(self.log) else self.log
        return RunOutcome(self.status, events, None, log, error)


def test_a_timeout_still_fails_what_the_wire_already_shows(gateway):
    # Twelve streaming attempts into eleven scripted 429s: the twelfth is one too many, and
    # the agent never ended its turn.
    sc = load_scenario(CRITERIA / "rty" / "rty-04-eleven-failures.yaml")
    agent = _Scripted([{"stream": True}] * 12, status="timeout", events=[])
    entry, verdicts = run_scenario(gateway, agent, sc, time_scale=0.001)
    assert entry["status"] == "timeout"
    assert verdicts["RTY-04"]["verdict"] == "FAIL", verdicts["RTY-04"]
    assert verdicts["RTY-04"]["partial"] is True
    assert "judged on the wire before TIMEOUT" in verdicts["RTY-04"]["observed"]


def test_a_timeout_with_nothing_wrong_on_the_wire_stays_timeout(gateway):
    sc = load_scenario(CRITERIA / "rty" / "rty-04-eleven-failures.yaml")
    agent = _Scripted([{"stream": True}] * 3, status="timeout", events=[])
    _, verdicts = run_scenario(gateway, agent, sc, time_scale=0.001)
    assert verdicts["RTY-04"]["verdict"] == "TIMEOUT"
    assert {v["verdict"] for v in verdicts.values()} <= {"TIMEOUT", "UNSUPPORTED"}


def test_exit_89_after_a_model_request_is_an_error(gateway):
    sc = load_scenario(CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml")
    agent = _Scripted([{"stream": True}], status="unsupported", events=[])
    entry, verdicts = run_scenario(gateway, agent, sc, time_scale=0.001)
    assert entry["status"] == "error"
    assert "exit 89 is honoured only before the first model request" in entry["error"]
    assert verdicts["RTY-01"]["verdict"] == "ERROR"


def test_exit_89_before_any_model_request_is_unsupported(gateway):
    sc = load_scenario(CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml")
    entry, verdicts = run_scenario(gateway, _Scripted([], status="unsupported"), sc)
    assert entry["status"] == "unsupported"
    assert verdicts["RTY-01"]["verdict"] == "UNSUPPORTED"


def test_a_request_the_script_cannot_serve_is_a_visible_error(gateway):
    # No fault step to repeat and no `otherwise`: a broken script, never a silent drop.
    sc = Scenario.from_dict(
        {
            "id": "one-reply",
            "criteria": ["STR-09"],
            "prompt": "Hi",
            "script": [{"reply": {"text": "Hello!", "finish_reason": "stop"}}],
        }
    )
    agent = _Scripted([{"stream": False}, {"stream": False}])
    entry, verdicts = run_scenario(gateway, agent, sc, time_scale=0.001)
    assert entry["status"] == "error"
    assert "could not serve request #" in entry["error"] and "otherwise" in entry["error"]
    assert verdicts["STR-09"]["verdict"] == "ERROR"
    # The unserved request is in the journal, as every request is.
    assert len([e for e in entry["journal"]["entries"] if e["kind"] == "chat"]) == 2


def test_the_key_an_agent_wrote_is_judged_then_redacted(gateway):
    sc = load_scenario(CRITERIA / "str" / "str-09-healthy-stream.yaml")

    def events(req):
        return [
            {"type": "message", "id": "m1", "role": "assistant", "text": f"key {req.api_key}"},
            {"type": "turn_end", "reason": "completed", "t_ns": 0},
        ]

    agent = _Scripted([{"stream": True}], events=events, log=lambda req: f"using {req.api_key}")
    entry, verdicts = run_scenario(gateway, agent, sc, time_scale=0.001)
    assert verdicts["DBG-02"]["verdict"] == "FAIL", verdicts["DBG-02"]
    blob = json.dumps([entry, verdicts])
    assert "sk-conformance-" not in blob
    # The key's places, marked as the run's key (conformance.adapters.interface.key_marker).
    assert "[REDACTED:" in entry["agent_log"] and "[REDACTED:" in json.dumps(entry["events"])


def test_a_turn_end_written_while_being_stopped_is_not_a_decision(gateway):
    # Cancelled at its deadline, an agent may still write turn_end on its way down; read as
    # its own, six attempts would be "gave up early" (RTY-04 FAIL) instead of a TIMEOUT.
    sc = load_scenario(CRITERIA / "rty" / "rty-04-burst-of-10.yaml")
    agent = _Scripted(
        [{"stream": True}] * 6,
        status="timeout",
        events=[{"type": "turn_end", "reason": "error", "t_ns": 0}],
    )
    _, verdicts = run_scenario(gateway, agent, sc, time_scale=0.001)
    assert verdicts["RTY-04"]["verdict"] == "TIMEOUT", verdicts["RTY-04"]


def test_the_report_says_a_verdict_was_judged_before_the_turn_ended(gateway, tmp_path):
    import time

    from conformance.runner import agent_results, results_document
    from reports import render

    sc = load_scenario(CRITERIA / "rty" / "rty-04-eleven-failures.yaml")
    agent = _Scripted([{"stream": True}] * 12, status="timeout", events=[])
    run = run_scenario(gateway, agent, sc, time_scale=0.001)
    doc = results_document(
        [agent_results("scripted", "scripted", set(), [run])],
        started=time.time(),
        time_scale=0.001,
        interrupted=False,
        command="test",
    )
    render([doc], tmp_path)
    page = (tmp_path / "criteria" / "RTY-04.html").read_text(encoding="utf-8")
    assert "judged on partial evidence: the turn never ended (timeout)" in page
