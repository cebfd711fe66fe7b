"""The in-process reference adapter against the fake gateway: events, abort, redaction."""

from __future__ import annotations

import threading
import time

import pytest

from conformance.adapters import RunRequest, make_adapter
from conformance.adapters.validation import validate_event

fakes = pytest.importorskip("fakes", reason="fake gateway not available")

KEY = "sk-ref-SECRET-42"


def _start(s, scenario: dict, tmp_path) -> dict:
    return {
        "type": "start",
        "protocol": 1,
        "scenario": scenario["id"],
        "model": "conformance-model",
        "prompt": scenario["prompt"],
        "tools": [],
        "tool_endpoint": s.tool_endpoint,
        "time_scale": 0.02,
        "debug_dir": str(tmp_path / "debug"),
        "config": {"fallback_model": None, "max_output_tokens": None},
    }


def _request(s, scenario, tmp_path, deadline_s=5.0) -> RunRequest:
    return RunRequest(
        start=_start(s, scenario, tmp_path),
        base_url=s.base_url,
        api_key=KEY,
        ca_file=None,
        workdir=tmp_path,
        deadline_s=deadline_s,
        abort=threading.Event(),
    )


SIMPLE = {
    "id": "adapter-simple",
    "title": "plain reply",
    "criteria": [],
    "prompt": "Say hello.",
    "deadline": 30,
    "script": [{"reply": {"text": "Hello from the gateway"}}],
}


def test_reference_runs_against_gateway(tmp_path):
    adapter = make_adapter("reference")
    assert {"abort", "tools"} <= adapter.capabilities()
    with fakes.Gateway.running() as gw:
        s = gw.create_session(SIMPLE, time_scale=0.02)
        out = adapter.run(_request(s, SIMPLE, tmp_path))
        journal = s.journal()
    assert out.status == "ran", (out.error, out.log)
    assert out.hello and out.hello["type"] == "hello"
    assert out.events[-1]["type"] == "turn_end"
    assert out.events[-1]["reason"] == "completed"
    texts = [e.get("text") or "" for e in out.events if e["type"] == "message"]
    assert any("Hello from the gateway" in t for t in texts)
    for ev in out.events:
        assert validate_event({k: v for k, v in ev.items() if k != "t_ns"}) is None, ev
    assert KEY not in repr(out.events) + out.log
    assert journal, "the gateway saw no request"


HANG = dict(SIMPLE, id="adapter-hang", script=[{"fault": {"delay_headers": {"seconds": 1.0}}}] * 3)


def test_reference_timeout_is_bounded(tmp_path):
    adapter = make_adapter("reference")
    with fakes.Gateway.running() as gw:
        s = gw.create_session(HANG, time_scale=1.0)
        t0 = time.monotonic()
        out = adapter.run(_request(s, HANG, tmp_path, deadline_s=0.3))
        elapsed = time.monotonic() - t0
    assert out.status == "timeout", out.error
    assert out.error == "no turn_end within 0.3 s"
    assert elapsed < 3


def test_reference_abort_is_forwarded(tmp_path):
    adapter = make_adapter("reference")
    with fakes.Gateway.running() as gw:
        s = gw.create_session(HANG, time_scale=1.0)
        req = _request(s, HANG, tmp_path, deadline_s=5)
        timer = threading.Timer(0.2, req.abort.set)
        timer.start()
        out = adapter.run(req)
        timer.join()
    assert out.status == "ran", out.error
    assert out.events[-1] == {**out.events[-1], "type": "turn_end", "reason": "aborted"}


def test_openai_sdk_adapter_runs_against_gateway(tmp_path):
    adapter = make_adapter("openai-sdk")
    assert adapter.capabilities() == {"tools", "should_retry_header"}
    with fakes.Gateway.running() as gw:
        s = gw.create_session(SIMPLE, time_scale=0.02)
        out = adapter.run(_request(s, SIMPLE, tmp_path))
        journal = s.journal()
    assert out.status == "ran", (out.error, out.log)
    assert [e["type"] for e in out.events][0] == "hello"
    assert out.events[-1]["type"] == "turn_end" and out.events[-1]["reason"] == "completed"
    texts = [e["text"] for e in out.events if e["type"] == "message"]
    assert texts == ["Hello from the gateway"]
    for ev in out.events:
        assert validate_event({k: v for k, v in ev.items() if k != "t_ns"}) is None, ev
    assert journal


TOOLS = dict(
    SIMPLE,
    id="adapter-tools",
    tools=[{"name": "write_file", "description": "Write a file", "parameters": {"type": "object"}}],
    tool_host={"write_file": [{"output": "wrote 2 bytes"}]},
    script=[
        {
            "reply": {
                "tool_calls": [
                    {"id": "call_1", "name": "write_file", "arguments": '{"path": "a.txt"}'}
                ],
                "finish_reason": "tool_calls",
            }
        },
        {"reply": {"text": "Done."}},
    ],
)


def test_openai_sdk_adapter_runs_hosted_tools(tmp_path):
    adapter = make_adapter("openai-sdk")
    with fakes.Gateway.running() as gw:
        s = gw.create_session(TOOLS, time_scale=0.02)
        req = _request(s, TOOLS, tmp_path)
        req.start["tools"] = TOOLS["tools"]
        out = adapter.run(req)
    assert out.status == "ran", (out.error, out.log)
    tool_events = [e for e in out.events if e["type"] == "tool"]
    assert [(e["call_id"], e["name"], e["output"]) for e in tool_events] == [
        ("call_1", "write_file", "wrote 2 bytes")
    ]
    assert out.events[-2]["text"] == "Done."
