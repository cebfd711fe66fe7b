"""The agent's two adapter front ends: ``python -m conformance.reference adapter`` as a
subprocess, and ``ReferenceAdapter`` in-process, each with its exit-89 broken copy."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from agent_server import Script, sse_reply, start_server

from conformance.adapters.base import RunRequest
from conformance.adapters.reference import ReferenceAdapter
from conformance.reference import Behaviours
from fakes import Gateway

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-adapter-secret"


async def run_front_end(*args: str) -> tuple[int, list[dict], Script]:
    script = Script([sse_reply([{"content": "hello"}], "stop")])
    runner, base = await start_server(script)
    env = {**os.environ, "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": KEY}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "conformance.reference",
        "adapter",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        start = {
            "type": "start",
            "protocol": 1,
            "model": "m",
            "prompt": "hi",
            "tools": [],
            "tool_endpoint": f"{base}/tools",
            "time_scale": 0.01,
            "config": {},
        }
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(start) + "\n").encode())
        await proc.stdin.drain()
        events = []
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 10)
            assert line, f"adapter exited before turn_end: {events}"
            events.append(json.loads(line))
            if events[-1]["type"] == "turn_end":
                break
        proc.stdin.close()
        code = await asyncio.wait_for(proc.wait(), 5)
    finally:
        if proc.returncode is None:
            proc.kill()
        await runner.cleanup()
    return code, events, script


async def test_adapter_smoke_run_to_turn_end() -> None:
    code, events, script = await run_front_end()
    assert code == 0
    assert events[0]["type"] == "hello"
    assert events[-1] == {"type": "turn_end", "reason": "completed"}
    assert [e["text"] for e in events if e["type"] == "message"][-1] == "hello"
    assert script.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}
    assert KEY not in json.dumps(events)


async def test_broken_copy_honest_exit_off_exits_89_after_turn_end() -> None:
    code, events, script = await run_front_end("--off", "honest_exit")
    assert events[-1] == {"type": "turn_end", "reason": "completed"} and script.requests
    assert code == 89


async def test_an_unknown_switch_is_a_usage_error() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "conformance.reference",
        "adapter",
        "--off",
        "no_such_switch",
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 2 and b"no_such_switch" in err


# ---- in-process --------------------------------------------------------------------------
SCENARIO = {
    "id": "adapter-echo",
    "criteria": ["DBG-02"],
    "prompt": "hi",
    "script": [{"fault": {"http_error": {"status": 401, "echo_api_key": "full"}}}],
}


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def run_in_process(gateway, behaviours: Behaviours, tmp_path: Path):
    session = gateway.create_session(SCENARIO, time_scale=0.001)
    start = {
        "type": "start",
        "protocol": 1,
        "model": "m",
        "prompt": "hi",
        "tools": [],
        "tool_endpoint": session.tool_endpoint,
        "time_scale": 0.001,
        "config": {},
    }
    req = RunRequest(start, session.base_url, KEY, None, tmp_path, deadline_s=10)
    return ReferenceAdapter(behaviours).run(req)


def test_in_process_run_is_ran_and_the_agent_kept_its_key_out(gateway, tmp_path):
    out = run_in_process(gateway, Behaviours(), tmp_path)
    assert out.status == "ran" and out.error is None
    assert out.events[-1] == {"type": "turn_end", "reason": "error", "t_ns": out.events[-1]["t_ns"]}
    [shown] = [e["message"] for e in out.events if e["type"] == "error"]
    assert "[REDACTED]" in shown  # the echo, redacted by the agent itself
    assert KEY not in json.dumps(out.events)


def test_in_process_outcome_is_not_redacted_by_the_adapter(gateway, tmp_path):
    # With the agent's own redaction off, what it wrote reaches the runner as it is.
    out = run_in_process(gateway, Behaviours(redact_own_key=False), tmp_path)
    assert KEY in json.dumps(out.events)


def test_in_process_honest_exit_off_reports_unsupported_after_the_turn(gateway, tmp_path):
    out = run_in_process(gateway, Behaviours(honest_exit=False), tmp_path)
    assert out.events[-1]["type"] == "turn_end"
    assert out.status == "unsupported"
    assert "exit 89" in out.error and "after the turn" in out.error
