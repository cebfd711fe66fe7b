"""The LiteLLM adapter (`--agent litellm`) through real scenarios, at the SDK's defaults.

Skipped when the `sdk-litellm` extra is not installed (`pip install '.[sdk-litellm]'`, or `tox -e sdk-litellm`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conformance.adapters.litellm import OFFLINE_ENV  # imports no litellm itself

os.environ.update(OFFLINE_ENV)  # LiteLLM reads these at import: no cost map download
pytest.importorskip("litellm", reason="the sdk-litellm extra is not installed")

from conformance.adapters import RunRequest, make_adapter  # noqa: E402
from conformance.runner import run_scenario  # noqa: E402
from fakes import Gateway, load_scenario  # noqa: E402

CRITERIA = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"
AGENT = "litellm"


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def _run(gateway, path: str) -> tuple[dict, dict[str, dict]]:
    entry, verdicts = run_scenario(gateway, make_adapter(AGENT), load_scenario(CRITERIA / path))
    bad = {c: v for c, v in verdicts.items() if v["verdict"] in ("ERROR", "TIMEOUT")}
    assert not bad, (path, bad, entry.get("error"), entry.get("agent_log"))
    assert entry["status"] == "ran", (entry.get("error"), entry.get("agent_log"))
    assert "sk-conformance-" not in repr(entry["events"]) + repr(entry["agent_log"])
    return entry, verdicts


def _chat(entry: dict) -> list[dict]:
    return [e for e in entry["journal"]["entries"] if e["kind"] == "chat"]


def test_a_healthy_stream_is_one_streamed_request(gateway) -> None:
    entry, v = _run(gateway, "str/str-09-healthy-stream.yaml")
    assert [e["body"].get("stream") for e in _chat(entry)] == [True]
    assert v["STR-09"]["verdict"] == "PASS"
    assert entry["events"][0]["type"] == "hello" and entry["events"][0]["agent"] == AGENT
    assert [e["text"] for e in entry["events"] if e["type"] == "message"] != []
    assert entry["events"][-1]["type"] == "turn_end"
    assert entry["events"][-1]["reason"] == "completed"


def test_a_hosted_tool_runs_through_the_sdk_tool_machinery(gateway) -> None:
    entry, v = _run(gateway, "tol/tol-03-tool-raises.yaml")
    tools = [e for e in entry["journal"]["entries"] if e["kind"] == "tool"]
    assert len(tools) == 1
    assert v["TOL-03"]["verdict"] == "PASS"  # the tool's error reached the model
    assert v["TOL-06"]["verdict"] == "PASS"  # every call answered


def test_the_openai_client_default_two_retries(gateway) -> None:
    entry, v = _run(gateway, "rty/rty-04-burst-of-10.yaml")
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


def test_the_deadline_stops_a_turn_stuck_on_the_gateway(gateway, tmp_path) -> None:
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
