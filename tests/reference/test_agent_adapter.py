"""Smoke run of ``python -m conformance.reference adapter`` as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from agent_server import Script, sse_reply, start_server

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-adapter-secret"


async def test_adapter_smoke_run_to_turn_end() -> None:
    script = Script([sse_reply([{"content": "hello"}], "stop")])
    runner, base = await start_server(script)
    env = {**os.environ, "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": KEY}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "conformance.reference",
        "adapter",
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
        assert await asyncio.wait_for(proc.wait(), 5) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
        await runner.cleanup()
    assert events[0]["type"] == "hello"
    assert events[-1] == {"type": "turn_end", "reason": "completed"}
    assert [e["text"] for e in events if e["type"] == "message"][-1] == "hello"
    assert script.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}
    assert KEY not in json.dumps(events)
