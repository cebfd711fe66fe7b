"""Restarting a session's scenario (``POST /_control/sessions/<sid>/restart``, ``restart()``):
the script, tool cursors, MCP sessions and faults and the journal start over; id and URLs stay."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import httpx
import pytest
from gw_wire import scenario
from mcp import Client, MCPError

from fakes import Scenario
from fakes.errors import FakesError
from fakes.pytest_plugin import sessions_on
from fakes.remote import GatewayProcess
from fakes.retention import Retention
from fakes.session import SessionState

SCENARIO = scenario(
    {"reply": {"text": "one"}},
    {"reply": {"text": "two"}},
    tools=[{"name": "w", "description": "the w tool"}],
    tool_host={"w": [{"output": "first"}, {"output": "second"}]},
    mcp_faults=[{"method": "tools/call", "after": 1, "fault": {"rpc_error": {"message": "down"}}}],
)
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def http_session(fake_gateway: Any) -> Any:
    """Sessions on the plain-HTTP gateway, where the SDK client needs no CA."""
    yield from sessions_on(fake_gateway)


def _texts(client: httpx.Client, base_url: str, n: int) -> list[Any]:
    out = []
    for _ in range(n):
        r = client.post(base_url + "/chat/completions", json=CHAT)
        out.append(r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else 500)
    return out


def _mcp_calls(url: str, n: int) -> list[str]:
    async def go() -> list[str]:
        async with Client(url) as c:
            out = []
            for _ in range(n):
                try:
                    r = await c.call_tool("w", {})
                except MCPError as e:  # the JSON-RPC error of an MCP fault
                    out.append(f"error: {e}")
                    continue
                out.append(str(r.content[0].text))  # type: ignore[union-attr]
            return out

    return asyncio.run(go())


def test_restart_over_the_control_api_starts_the_scenario_over(gateway_session, client, gw):
    s = gateway_session(SCENARIO)
    assert _texts(client, s.base_url, 3) == ["one", "two", 500]
    assert client.post(f"{s.tool_endpoint}/w", json={}).json()["output"] == "first"
    mcp_sid = client.post(
        s.mcp_endpoint,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
    ).headers["mcp-session-id"]
    used = len(s.journal()["entries"])

    r = client.post(f"{gw.base_url}/_control/sessions/{s.id}/restart")
    assert r.status_code == 200
    assert r.json() == {"session": s.id, "restarted": True, "dropped_entries": used}
    assert s.journal()["entries"] == []
    assert _texts(client, s.base_url, 3) == ["one", "two", 500]
    assert client.post(f"{s.tool_endpoint}/w", json={}).json()["output"] == "first"
    # An MCP session of the run before is gone: the client must initialize again.
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (
        client.post(s.mcp_endpoint, json=ping, headers={"Mcp-Session-Id": mcp_sid}).status_code
        == 404
    )
    assert [e["seq"] for e in s.journal()["entries"]] == [0, 1, 2, 3, 4]


def test_restart_replays_the_mcp_faults_and_tool_cursor(http_session):
    s = http_session(SCENARIO)
    assert _mcp_calls(s.mcp_endpoint, 3) == ["first", "error: down", "second"]
    assert s.restart() > 0
    # The tool cursor and the fault's window count from 0 again.
    assert _mcp_calls(s.mcp_endpoint, 3) == ["first", "error: down", "second"]


def test_an_unknown_session_and_a_refusing_one_are_not_restarted(gw, client, gateway_session):
    r = client.post(f"{gw.base_url}/_control/sessions/nosuch/restart")
    assert r.status_code == 404 and "unknown session 'nosuch'" in r.json()["error"]["message"]
    s = gateway_session({**SCENARIO, "refuse_connections": {"seconds": 30}})
    r = client.post(f"{gw.base_url}/_control/sessions/{s.id}/restart")
    assert r.status_code == 409
    assert "drop it and create a new session" in r.json()["error"]["message"]
    with pytest.raises(FakesError, match="refuses connections on a port of its own"):
        s.restart()


def test_a_gateway_process_session_restarts():
    with GatewayProcess.running() as gw, httpx.Client(timeout=5) as c:
        s = gw.create_session(SCENARIO)
        assert _texts(c, s.base_url, 2) == ["one", "two"]
        assert s.restart() == 2
        assert _texts(c, s.base_url, 1) == ["one"]
        assert [e["seq"] for e in s.journal()["entries"]] == [0]


def test_a_restarted_state_equals_a_fresh_one_in_every_field():
    """Every field a run changes is reset: a field added later without a reset fails here."""
    sc = Scenario.from_dict(SCENARIO)
    st = SessionState(scenario=sc, time_scale=0.5, retention=Retention(entries=5))
    st.used[0] = 1
    st.tool_cursor["w"] = 2
    st.mcp_sessions["m"] = "2025-11-25"
    st.mcp_counts["tools/call"] = 3
    st.mcp_tools = []
    st.agent_clock = (1.0, 2.0)
    st.add({"seq": 0})  # type: ignore[typeddict-item]
    assert st.restart() == 1
    fresh = SessionState(scenario=sc, time_scale=0.5, id=st.id, retention=st.retention)
    kept = {"_headers_out"}  # a wake-up event, not state of the run
    for f in dataclasses.fields(SessionState):
        if f.name not in kept:
            got, want = getattr(st, f.name), getattr(fresh, f.name)
            if f.name == "entries":
                got, want = (list(got), got.maxlen), (list(want), want.maxlen)
            assert got == want, f.name
