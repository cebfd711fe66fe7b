"""DBG-02: a key a server echoes (whole or masked) never reaches what the agent writes.

Over loopback: a scripted server that echoes the key in its error bodies, and the project's
gateway with ``http_error`` ``echo_api_key`` in every dialect. What the agent writes: its events
(error texts, messages), its debug dumps and its tool-call log.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from agent_server import Script, json_reply, start_server
from aiohttp import web

from conformance.reference import Behaviours, run_protocol
from conformance.reference.redaction import PLACEHOLDER, Redactor
from fakes import Gateway

KEY = "sk-echo-0123456789abcdef"
NEW_KEY = "sk-fresh-fedcba9876543210"
MASKED = "sk-echo...cdef"  # what OpenAI shows: first 7, last 4


def echo(status: int, message: str) -> object:
    """A handler answering ``status`` with ``message``; ``{key}`` becomes the request's key."""

    async def handler(request: web.Request, body: dict) -> web.Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        text = message.replace("{key}", key)
        return web.json_response({"error": {"message": text, "type": "x"}}, status=status)

    return handler


async def run(
    script: Script,
    behaviours: Behaviours = Behaviours(),  # noqa: B008 - frozen
    refresh_key=None,
    **start,
) -> tuple[str, list[dict]]:
    runner, base = await start_server(script)
    events: list[dict] = []
    msg = {
        "model": "m",
        "prompt": "go",
        "tools": [],
        "tool_endpoint": f"{base}/tools",
        "time_scale": 0.001,
        "config": {},
        "stream": False,
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
                refresh_key=refresh_key,
            ),
            10,
        )
    finally:
        await runner.cleanup()
    return reason, events


def errors(events: list[dict]) -> list[str]:
    return [e["message"] for e in events if e["type"] == "error"]


async def test_DBG_02_a_key_echoed_in_full_is_replaced_in_the_error_event():
    reason, events = await run(Script([echo(401, "Incorrect API key provided: {key}.")]))
    assert reason == "error"
    [message] = errors(events)
    assert KEY not in json.dumps(events)
    assert f"Incorrect API key provided: {PLACEHOLDER}." in message


async def test_DBG_02_a_masked_echo_is_replaced_too():
    _, events = await run(Script([echo(401, f"Incorrect API key provided: {MASKED}.")]))
    [message] = errors(events)
    assert MASKED not in message and f"provided: {PLACEHOLDER}." in message


async def test_DBG_02_the_debug_dump_of_a_400_holds_no_echoed_key(tmp_path: Path):
    _, events = await run(
        Script([echo(400, "bad request from key {key}")]), debug_dir=str(tmp_path)
    )
    [dump] = sorted(tmp_path.glob("http-400-*.json"))
    text = dump.read_text()
    assert KEY not in text and PLACEHOLDER in json.loads(text)["error"]
    assert KEY not in json.dumps(events)


async def test_DBG_02_a_refreshed_key_is_kept_out_as_well():
    # RTY-10 refreshes the credentials; the next error echoes the new key.
    script = Script([echo(401, "token expired"), echo(401, "Incorrect API key provided: {key}")])
    _, events = await run(script, refresh_key=lambda: NEW_KEY)
    text = json.dumps(events)
    assert NEW_KEY not in text and KEY not in text and PLACEHOLDER in errors(events)[-1]


async def test_DBG_02_the_error_of_an_agent_bug_is_redacted_at_the_same_boundary(monkeypatch):
    from conformance.reference.toolbox import ToolBox

    async def broken(self, *args, **kwargs):
        raise RuntimeError(f"exploded while holding {KEY}")

    monkeypatch.setattr(ToolBox, "attempt", broken)
    calls = [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]
    script = Script([json_reply({"content": None, "tool_calls": calls}, "tool_calls")])
    reason, events = await run(script, tools=[{"name": "read", "parameters": {"type": "object"}}])
    assert reason == "error" and KEY not in json.dumps(events)
    assert f"exploded while holding {PLACEHOLDER}" in errors(events)[-1]


async def test_DBG_02_switch_off_shows_the_echoed_key(tmp_path: Path):
    script = Script([echo(400, "bad request from key {key}")])
    _, events = await run(script, Behaviours(redact_own_key=False), debug_dir=str(tmp_path))
    assert KEY in errors(events)[-1]
    assert KEY in next(tmp_path.glob("http-400-*.json")).read_text()


@pytest.mark.parametrize("dialect", ["openai_chat", "anthropic_messages", "openai_responses"])
@pytest.mark.parametrize("how", ["full", "masked"])
async def test_DBG_02_the_gateways_echo_in_every_dialect(dialect: str, how: str):
    scenario = {
        "id": "echoed-key",
        "criteria": ["DBG-02"],
        "prompt": "hi",
        "script": [{"fault": {"http_error": {"status": 401, "echo_api_key": how}}}],
    }
    async with Gateway() as gw:
        session = gw.create_session(scenario, time_scale=0.001)
        events: list[dict] = []
        start = {
            "model": "conformance-model",
            "prompt": "hi",
            "tools": [],
            "tool_endpoint": session.tool_endpoint,
            "time_scale": 0.001,
            "config": {},
            "dialect": dialect,
        }
        reason = await asyncio.wait_for(
            run_protocol(
                start, events.append, asyncio.Event(), base_url=session.base_url, api_key=KEY
            ),
            10,
        )
    assert reason == "error"
    text = json.dumps(events)
    assert KEY not in text and "..." + KEY[-4:] not in text  # masked: head...tail
    assert PLACEHOLDER in errors(events)[-1]


def test_redactor_leaves_other_text_and_short_prefixes_alone():
    r = Redactor(KEY)
    assert r.text("sk-echo is a prefix, sk-... too") == "sk-echo is a prefix, sk-... too"
    assert r.obj({"k": [KEY, 1, None], KEY: "x"}) == {"k": [PLACEHOLDER, 1, None], PLACEHOLDER: "x"}
    assert Redactor(KEY, enabled=False).text(KEY) == KEY
    assert Redactor("").text("anything") == "anything"
