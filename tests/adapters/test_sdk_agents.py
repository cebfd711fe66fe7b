"""The Python agent SDK adapters through real scenarios, at each SDK's defaults.

One set of tests, run for the openai SDK and every SDK agent the registry knows
(`conformance.adapters.sdk_agents`) whose optional extra is installed (`pip install
'.[sdk-NAME]'`, or `tox -e sdk`); an SDK that is missing is skipped with the extra to install.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conformance.adapters import MissingExtra, RunRequest, make_adapter, sdk_agents
from conformance.adapters.litellm import OFFLINE_ENV  # imports no litellm itself
from conformance.runner import run_scenario
from fakes import Gateway, load_scenario

os.environ.update(OFFLINE_ENV)  # LiteLLM reads these at import: no cost map download

CRITERIA = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"


@pytest.fixture(params=["openai-sdk", *sdk_agents()])
def AGENT(request) -> str:  # noqa: N802 - reads like the constant it replaces
    try:
        make_adapter(request.param)
    except MissingExtra as exc:
        pytest.skip(str(exc))
    return request.param


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def _run(gateway, agent: str, path: str) -> tuple[dict, dict[str, dict]]:
    entry, verdicts = run_scenario(gateway, make_adapter(agent), load_scenario(CRITERIA / path))
    bad = {c: v for c, v in verdicts.items() if v["verdict"] in ("ERROR", "TIMEOUT")}
    assert not bad, (path, bad, entry.get("error"), entry.get("agent_log"))
    assert entry["status"] == "ran", (entry.get("error"), entry.get("agent_log"))
    assert "sk-conformance-" not in repr(entry["events"]) + repr(entry["agent_log"])
    return entry, verdicts


def _chat(entry: dict) -> list[dict]:
    return [e for e in entry["journal"]["entries"] if e["kind"] == "chat"]


def test_a_healthy_stream_is_one_streamed_request(gateway, AGENT) -> None:
    entry, v = _run(gateway, AGENT, "str/str-09-healthy-stream.yaml")
    assert [e["body"].get("stream") for e in _chat(entry)] == [True]
    assert v["STR-09"]["verdict"] == "PASS"
    assert entry["events"][0]["type"] == "hello" and entry["events"][0]["agent"] == AGENT
    assert [e["text"] for e in entry["events"] if e["type"] == "message"] != []
    assert entry["events"][-1]["type"] == "turn_end"
    assert entry["events"][-1]["reason"] == "completed"


def test_a_hosted_tool_runs_through_the_sdk_tool_machinery(gateway, AGENT) -> None:
    entry, v = _run(gateway, AGENT, "tol/tol-03-tool-raises.yaml")
    tools = [e for e in entry["journal"]["entries"] if e["kind"] == "tool"]
    assert len(tools) == 1
    assert v["TOL-03"]["verdict"] == "PASS"  # the tool's error reached the model
    assert v["TOL-06"]["verdict"] == "PASS"  # every call answered


def test_the_openai_client_default_two_retries(gateway, AGENT) -> None:
    entry, v = _run(gateway, AGENT, "rty/rty-04-burst-of-10.yaml")
    assert len(_chat(entry)) == 3
    assert v["RTY-04"]["verdict"] == "FAIL"
    errors = [e for e in entry["events"] if e["type"] == "error"]
    assert [e["kind"] for e in errors] == ["rate_limit"]


SLOW = {
    "id": "adapter-slow-headers",
    "title": "headers that never come in time",
    "criteria": [],
    "prompt": "Say hello.",
    "deadline": 30,
    "script": [{"fault": {"delay_headers": {"seconds": 30}}, "reply": {"text": "late"}}],
}


def test_the_deadline_stops_a_turn_stuck_on_the_gateway(gateway, tmp_path, AGENT) -> None:
    s = gateway.create_session(SLOW, time_scale=1.0)
    req = RunRequest(
        start={
            "type": "start",
            "protocol": 1,
            "scenario": SLOW["id"],
            "model": "conformance-model",
            "prompt": SLOW["prompt"],
            "tools": [],
            "tool_endpoint": s.tool_endpoint,
            "time_scale": 1.0,
            "debug_dir": str(tmp_path),
            "config": {},
        },
        base_url=s.base_url,
        api_key="sk-conformance-deadline",
        ca_file=None,
        workdir=tmp_path,
        deadline_s=1.0,
    )
    began = time.monotonic()
    out = make_adapter(AGENT).run(req)
    assert out.status == "timeout", (out.error, out.log)
    assert time.monotonic() - began < 5.0  # the deadline, the unwind slack, a loaded machine
    assert [e["type"] for e in out.events] == ["hello"]
