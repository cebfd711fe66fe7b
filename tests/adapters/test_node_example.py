"""The Node example agent, run through the cmd: adapter against the fake gateway."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from conformance.adapters import RunRequest
from conformance.adapters.command import CommandAdapter

fakes = pytest.importorskip("fakes", reason="fake gateway not available")
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")

AGENT = Path(__file__).resolve().parents[2] / "examples" / "node-agent" / "agent.mjs"
KEY = "sk-node-SECRET-7"

SCENARIO = {
    "id": "node-tools",
    "title": "tool then text",
    "criteria": [],
    "prompt": "Write a.txt",
    "deadline": 30,
    "tools": [{"name": "write_file", "description": "Write", "parameters": {"type": "object"}}],
    "tool_host": {"write_file": [{"output": "wrote 2 bytes"}]},
    "script": [
        {
            "reply": {
                "tool_calls": [{"id": "call_1", "name": "write_file", "arguments": "{}"}],
                "finish_reason": "tool_calls",
            }
        },
        {"reply": {"text": "Done."}},
    ],
}


@pytest.mark.parametrize("stream", ["1", "0"])
def test_node_agent_runs_tools(tmp_path, stream):
    adapter = CommandAdapter(f"node {AGENT}", exit_grace_s=2)
    adapter_env = adapter._env

    def env_with_stream(*a):
        return {**adapter_env(*a), "STREAM": stream}

    adapter._env = env_with_stream  # the example's own switch; not part of the protocol
    with fakes.Gateway.running() as gw:
        s = gw.create_session(SCENARIO, time_scale=0.02)
        start = {
            "type": "start",
            "protocol": 1,
            "scenario": "node-tools",
            "model": "m",
            "prompt": "Write a.txt",
            "tools": SCENARIO["tools"],
            "tool_endpoint": s.tool_endpoint,
            "time_scale": 0.02,
        }
        out = adapter.run(
            RunRequest(start, s.base_url, KEY, None, tmp_path, 10.0, threading.Event())
        )
    assert out.status == "ran", (out.error, out.log)
    assert [e["type"] for e in out.events] == ["hello", "message", "tool", "message", "turn_end"]
    assert out.events[2]["output"] == "wrote 2 bytes"
    assert out.events[3]["text"] == "Done."
