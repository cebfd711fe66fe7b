"""The thin driver: it carries out the core's cancel and timer actions and survives its own bugs."""

from __future__ import annotations

import asyncio
import json
import random

from agent_server import Script, chunk, json_reply, start_server
from aiohttp import web

from conformance.reference import Behaviours, run_protocol
from conformance.reference.toolbox import ToolBox

KEY = "sk-driver-secret"


async def run(script: Script, behaviours: Behaviours = Behaviours(), **start):  # noqa: B008
    runner, base = await start_server(script)
    events: list[dict] = []
    msg = {
        "model": "m",
        "prompt": "go",
        "tools": [],
        "tool_endpoint": f"{base}/tools",
        "time_scale": 0.001,
        "config": {},
        **start,
    }
    try:
        reason = await asyncio.wait_for(
            run_protocol(
                msg,
                events.append,
                asyncio.Event(),
                base_url=f"{base}/v1",
                api_key=KEY,
                behaviours=behaviours,
                rng=random.Random(3),
            ),
            10,
        )
    finally:
        for release in RELEASE:
            release.set()
        RELEASE.clear()
        await runner.cleanup()
    assert [e["type"] for e in events].count("turn_end") == 1
    assert events[-1] == {"type": "turn_end", "reason": reason}
    return reason, events


RELEASE: list[asyncio.Event] = []


def _then_hang(first: bytes):
    """A stream that sends ``first`` and then nothing until the test is over."""
    release = asyncio.Event()
    RELEASE.append(release)

    async def handler(request: web.Request, body: dict) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(first)
        await release.wait()  # so that the server can shut down once the agent is done
        return resp

    return handler


async def test_STR_14_a_stream_the_core_gives_up_on_is_closed_at_once():
    # No idle watchdog: only the core's CancelRequest can end this stream.
    script = Script(
        [_then_hang(b"data: {not json\n\n"), json_reply({"content": "whole"})],
    )
    reason, events = await run(script, Behaviours(idle_watchdog=False))
    assert reason == "completed"
    assert [r["stream"] for r in script.requests] == [True, False]


async def test_STR_10_idle_timer_runs_scaled_and_recovers():
    script = Script(
        [_then_hang(chunk({"content": "half"})), json_reply({"content": "whole"})],
    )
    reason, events = await run(script)  # 60 s idle limit x 0.001 = 60 ms
    assert reason == "completed"
    assert [r["stream"] for r in script.requests] == [True, False]
    assert any(e["type"] == "removed" for e in events)


async def test_ERR_05_a_bug_in_a_driver_task_ends_the_turn_cleanly(monkeypatch):
    async def broken(self, *args, **kwargs):
        raise RuntimeError("tool box exploded")

    monkeypatch.setattr(ToolBox, "attempt", broken)
    calls = [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]
    script = Script([json_reply({"content": None, "tool_calls": calls}, "tool_calls")])
    reason, events = await run(
        script, tools=[{"name": "read", "parameters": {"type": "object"}}], stream=False
    )
    assert reason == "error"
    errors = [e for e in events if e["type"] == "error"]
    assert errors and "tool box exploded" in errors[-1]["message"]
    assert KEY not in json.dumps(events)
