"""The MCP tool host (``/s/<sid>/mcp``), judged by the official MCP client and by raw HTTP.

The SDK's ``Client`` is the oracle: what it accepts and how it reads each result is what an
agent built on it meets. Raw requests cover what the SDK never sends (no session id, a bad body,
a batch) and the exact status codes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from gw_wire import scenario
from mcp import Client, MCPError

from fakes.errors import ScenarioError
from fakes.mcp import PROTOCOL_VERSIONS, SESSION_HEADER
from fakes.pytest_plugin import sessions_on

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def tool_scenario(**tool_host: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"name": n, "description": f"the {n} tool", "parameters": PARAMS} for n in tool_host]
    tools.append({"name": "bare"})  # offered, no parameters, no behaviour
    return scenario({"reply": {"text": "x"}}, tools=tools, tool_host=tool_host)


@pytest.fixture
def http_session(fake_gateway: Any) -> Any:
    """Sessions on the plain-HTTP gateway, where the SDK client needs no CA."""
    yield from sessions_on(fake_gateway)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def mcp_entries(s: Any) -> list[dict[str, Any]]:
    entries = s.journal()["entries"]
    assert all(e["kind"] == "mcp" for e in entries)
    return entries


def test_sdk_client_lists_and_calls_tools_and_pings(http_session):
    s = http_session(
        tool_scenario(
            write_file=[
                {"output": "wrote 2 bytes"},
                {"error": {"message": "disk full"}},
                {"permission_denied": {"reason": "read-only checkout"}},
                {"large_output": {"bytes": 5000}},
            ]
        )
    )

    async def session() -> tuple[Any, ...]:
        async with Client(s.mcp_endpoint) as c:
            tools = (await c.list_tools()).tools
            calls = [await c.call_tool("write_file", {"path": "a.txt"}) for _ in range(4)]
            return c.session.protocol_version, tools, calls

    version, tools, calls = run(session())
    assert version == PROTOCOL_VERSIONS[-1]
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        ("write_file", "the write_file tool", PARAMS),
        ("bare", None, {"type": "object"}),
    ]
    texts = [(r.is_error, r.content[0].text) for r in calls]
    assert texts[:3] == [
        (False, "wrote 2 bytes"),
        (True, "disk full"),
        (True, "Permission denied: read-only checkout"),
    ]
    assert texts[3][0] is False and len(texts[3][1]) == 5000

    entries = mcp_entries(s)
    methods = [(e["method"], e["rpc_method"], e["response"]["status"]) for e in entries]
    # The SDK probes the stateless revision first, is refused, and falls back to `initialize`.
    assert methods[0] == ("POST", "server/discover", 400)
    assert ("POST", "initialize", 200) in methods
    assert ("POST", "notifications/initialized", 202) in methods
    assert ("GET", None, 405) in methods  # no server-initiated stream
    assert methods[-1] == ("DELETE", None, 200)  # the client ended the session
    init = next(e for e in entries if e["rpc_method"] == "initialize")
    sid = init["response"]["headers"]["mcp-session-id"]
    assert init["mcp_session"] == sid and init["result"]["protocolVersion"] == version
    assert init["result"]["capabilities"] == {"tools": {"listChanged": True}}
    calls_j = [e for e in entries if e["rpc_method"] == "tools/call"]
    assert [e["behaviour"] for e in calls_j] == [
        "output",
        "error",
        "permission_denied",
        "large_output",
    ]
    assert all(e["tool"] == "write_file" and e["arguments"] == {"path": "a.txt"} for e in calls_j)
    assert all(e["mcp_session"] == sid for e in entries[entries.index(init) :])
    assert calls_j[1]["result"]["isError"] is True and calls_j[1]["error"] is None


@pytest.mark.filterwarnings("ignore:ping is removed")
def test_ping_and_transient_hang_and_unknown_tool_as_json_rpc_errors(http_session):
    s = http_session(tool_scenario(flaky=[{"transient": {"message": "try again"}}, {"hang": 5}]))

    async def session() -> list[MCPError]:
        errors = []
        async with Client(s.mcp_endpoint, mode="legacy") as c:
            await c.send_ping()  # a handshake-era method (the SDK warns whatever the mode)
            for name in ("flaky", "flaky", "nope", "bare"):
                with pytest.raises(MCPError) as got:
                    await c.call_tool(name, {"path": "p"})
                errors.append(got.value)
        return errors

    errors = run(session())
    assert [(e.code, e.message) for e in errors[:3]] == [
        (-32000, "try again"),
        (-32001, "tool timed out"),
        (-32602, "Unknown tool: 'nope'"),
    ]
    assert errors[3].code == -32603 and "no scripted behaviour" in errors[3].message
    entries = mcp_entries(s)
    assert any(e["rpc_method"] == "ping" and e["result"] == {} for e in entries)
    bare = [e for e in entries if e["tool"] == "bare"]
    assert bare[0]["harness_error"] == "tool 'bare' has no scripted behaviour"


def test_a_client_hanging_up_on_a_hung_tools_call_is_journaled_when_it_left(http_session):
    s = http_session(tool_scenario(slow=[{"hang": 600}]))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    init["params"] = {"protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {}}
    init["params"]["clientInfo"] = {"name": "t", "version": "0"}
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=0.2) as h:
        sid = h.post(s.mcp_endpoint, json=init, headers=accept).headers[SESSION_HEADER]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "slow", "arguments": {"path": "p"}}
        with pytest.raises(httpx.ReadTimeout):
            h.post(s.mcp_endpoint, json=call, headers={**accept, SESSION_HEADER: sid})
    j = s.wait_for(lambda j: j["entries"][-1]["response"] is not None, timeout=5)
    e = j["entries"][-1]
    assert (e["rpc_method"], e["behaviour"]) == ("tools/call", "hang")
    assert (e["response"]["status"], e["response"]["end"]) == (None, "client_gone")
    assert 0.15 < (e["response"]["t_end_ns"] - e["t_arrival_ns"]) / 1e9 < 5


def test_the_mcp_host_and_the_http_tool_host_share_a_tools_cursor(http_session):
    s = http_session(tool_scenario(w=[{"output": "first"}, {"output": "second"}]))
    assert httpx.post(s.tool_endpoint + "/w", json={"arguments": {}}).json() == {"output": "first"}

    async def call() -> str:
        async with Client(s.mcp_endpoint, mode="legacy") as c:
            return str((await c.call_tool("w", {"path": "p"})).content[0].text)

    assert run(call()) == "second"


def test_a_deleted_session_is_404_and_the_sdk_surfaces_it(http_session):
    s = http_session(tool_scenario(w=[{"output": "ok"}]))

    async def session() -> MCPError:
        async with Client(s.mcp_endpoint, mode="legacy") as c:
            await c.call_tool("w", {"path": "p"})
            sid = next(e["mcp_session"] for e in s.journal()["entries"])
            async with httpx.AsyncClient() as h:
                r = await h.delete(s.mcp_endpoint, headers={SESSION_HEADER: sid})
                assert r.status_code == 200
            with pytest.raises(MCPError) as got:
                await c.call_tool("w", {"path": "p"})
            return got.value

    err = run(session())
    assert "Session not found" in err.message
    last_call = [e for e in s.journal()["entries"] if e["rpc_method"] == "tools/call"][-1]
    assert last_call["response"]["status"] == 404 and last_call["behaviour"] is None


def rpc(method: str, id_: int | None = 1, **params: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        msg["id"] = id_
    return msg


def initialize(client: httpx.Client, url: str, version: str) -> httpx.Response:
    return client.post(
        url, json=rpc("initialize", protocolVersion=version, capabilities={}, clientInfo={})
    )


@pytest.mark.parametrize(
    ("asked", "served"),
    [(v, v) for v in PROTOCOL_VERSIONS] + [("1999-01-01", PROTOCOL_VERSIONS[-1])],
)
def test_initialize_negotiates_the_protocol_version(gateway_session, client, asked, served):
    s = gateway_session(tool_scenario())
    r = initialize(client, s.mcp_endpoint, asked)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["result"]["protocolVersion"] == served
    assert r.json()["result"]["serverInfo"]["name"]
    assert len(r.headers[SESSION_HEADER]) >= 16


def test_raw_requests_get_the_transports_statuses(gateway_session, client):
    s = gateway_session(tool_scenario())
    url = s.mcp_endpoint
    sid = initialize(client, url, "2025-06-18").headers[SESSION_HEADER]
    with_sid = {SESSION_HEADER: sid}

    missing = client.post(url, json=rpc("tools/list"))
    assert missing.status_code == 400 and missing.json()["error"]["code"] == -32600
    unknown = client.post(url, json=rpc("tools/list"), headers={SESSION_HEADER: "nope"})
    assert unknown.status_code == 404 and unknown.json()["id"] == 1
    bad_version = client.post(
        url, json=rpc("ping"), headers={**with_sid, "MCP-Protocol-Version": "2000-01-01"}
    )
    assert bad_version.status_code == 400
    note = client.post(url, json=rpc("notifications/cancelled", None), headers=with_sid)
    assert note.status_code == 202 and note.content == b""
    method = client.post(url, json=rpc("resources/list", 7), headers=with_sid)
    assert method.status_code == 200
    assert method.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "Method not found: resources/list"},
    }
    parse = client.post(url, content=b"{not json", headers=with_sid)
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
    batch = client.post(url, json=[rpc("ping")], headers=with_sid)
    assert batch.status_code == 400 and "batch" in batch.json()["error"]["message"]
    assert client.get(url, headers=with_sid).status_code == 405
    assert client.delete(url, headers=with_sid).status_code == 200
    assert client.delete(url, headers=with_sid).status_code == 404
    assert client.post(url, json=rpc("ping"), headers=with_sid).status_code == 404

    entries = mcp_entries(s)
    assert entries[0]["mcp_session"] == sid
    assert entries[2]["mcp_session"] == "nope" and entries[2]["response"]["status"] == 404
    assert entries[6]["body_error"].startswith("invalid JSON")


def test_an_unknown_gateway_session_is_the_gateways_404(gw, client):
    r = client.post(gw.base_url + "/s/nosuch/mcp", json=rpc("initialize"))
    assert r.status_code == 404 and "unknown session 'nosuch'" in r.text


# --- MCP faults (scenario `mcp_faults`, fakes/mcp_faults.py) ---------------------------------


def faulty(*faults: dict[str, Any]) -> dict[str, Any]:
    return {**tool_scenario(w=[{"output": "one"}, {"output": "two"}]), "mcp_faults": list(faults)}


def test_session_expired_after_n_calls_is_404_until_initialize_again(http_session):
    s = http_session(faulty({"after": 1, "fault": {"session_expired": {}}}))

    async def session() -> tuple[str, MCPError, str]:
        async with Client(s.mcp_endpoint, mode="legacy") as c:
            first = str((await c.call_tool("w", {"path": "p"})).content[0].text)
            with pytest.raises(MCPError) as got:
                await c.call_tool("w", {"path": "p"})
        async with Client(s.mcp_endpoint, mode="legacy") as c:  # a new session serves again
            again = str((await c.call_tool("w", {"path": "p"})).content[0].text)
        return first, got.value, again

    first, err, again = run(session())
    assert first == "one" and "Session not found" in err.message
    assert again == "two"  # the expired call never ran: the tool's cursor did not move
    calls = [e for e in s.journal()["entries"] if e["rpc_method"] == "tools/call"]
    assert [(e["fault"], e["response"]["status"]) for e in calls] == [
        (None, 200),
        ("session_expired", 404),
        (None, 200),
    ]
    assert calls[0]["mcp_session"] == calls[1]["mcp_session"] != calls[2]["mcp_session"]


def test_rpc_error_http_error_and_malformed_json_reach_the_client_as_errors(http_session):
    s = http_session(
        faulty(
            {"fault": {"rpc_error": {"code": -32099, "message": "backend down"}}},
            {"after": 1, "fault": {"http_error": {"status": 502, "body": "bad gateway"}}},
            {"after": 2, "fault": {"malformed": {"kind": "bad_json"}}},
        )
    )

    async def session() -> list[MCPError]:
        errors = []
        async with Client(s.mcp_endpoint, mode="legacy") as c:
            for _ in range(3):
                with pytest.raises(MCPError) as got:
                    await c.call_tool("w", {"path": "p"})
                errors.append(got.value)
        return errors

    errors = run(session())
    assert (errors[0].code, errors[0].message) == (-32099, "backend down")
    assert errors[1].code == -32603  # the SDK's stand-in for an HTTP error without JSON-RPC
    assert errors[2].code == -32700  # parse error
    calls = [e for e in s.journal()["entries"] if e["rpc_method"] == "tools/call"]
    assert [e["fault"] for e in calls] == ["rpc_error", "http_error", "malformed"]
    assert calls[1]["response"]["status"] == 502 and calls[1]["response"]["sent"] == "bad gateway"
    sent = calls[2]["response"]["sent"]
    assert sent.startswith('{"jsonrpc":"2.0","id":') and calls[2]["result"] is None
    with pytest.raises(ValueError):
        json.loads(sent)
    assert calls[2]["behaviour"] == "output"  # the tool ran; only its answer was broken


def test_a_slow_initialize_is_held_its_scaled_seconds(http_session):
    s = http_session(faulty({"method": "initialize", "fault": {"delay": {"seconds": 20}}}), 0.01)
    r = httpx.post(s.mcp_endpoint, json=rpc("initialize", protocolVersion="2025-06-18"))
    assert r.status_code == 200 and r.json()["result"]["protocolVersion"] == "2025-06-18"
    init = s.journal()["entries"][0]
    held = (init["response"]["t_headers_ns"] - init["t_arrival_ns"]) / 1e9
    assert init["fault"] == "delay" and init["fault_params"] == {"seconds": 20}
    assert 0.2 <= held < 2.0


def test_a_wrong_id_answer_is_not_taken_for_the_call(http_session):
    s = http_session(faulty({"fault": {"malformed": {"kind": "wrong_id"}}}))
    r = httpx.post(s.mcp_endpoint, json=rpc("initialize", protocolVersion="2025-06-18"))
    sid = r.headers[SESSION_HEADER]
    got = httpx.post(
        s.mcp_endpoint,
        json=rpc("tools/call", 5, name="w", arguments={}),
        headers={SESSION_HEADER: sid},
    )
    assert got.json()["id"] == "5-other" and got.json()["result"]["content"][0]["text"] == "one"


def test_mcp_faults_are_validated_with_the_scenario(http_session):
    with pytest.raises(ScenarioError, match="mcp_faults"):
        http_session(faulty({"fault": {"explode": {}}}))
    with pytest.raises(ScenarioError, match="mcp_faults"):
        http_session(faulty({"fault": {"http_error": {"status": 200}}}))


def test_a_cut_answer_is_reset_after_its_byte_with_the_full_length_announced(http_session):
    s = http_session(faulty({"fault": {"cut": {"at_byte": 30}}}))
    r = httpx.post(s.mcp_endpoint, json=rpc("initialize", protocolVersion="2025-06-18"))
    with_sid = {SESSION_HEADER: r.headers[SESSION_HEADER]}
    got = bytearray()
    with httpx.Client() as c:
        msg = rpc("tools/call", 2, name="w", arguments={})
        with c.stream("POST", s.mcp_endpoint, json=msg, headers=with_sid) as resp:
            assert resp.status_code == 200
            full = int(resp.headers["content-length"])
            with pytest.raises(httpx.HTTPError):
                for chunk in resp.iter_raw():
                    got += chunk
    assert len(got) == 30 < full
    call = s.journal()["entries"][-1]
    assert call["fault"] == "cut" and call["behaviour"] == "output"
    sent = call["response"]
    assert (sent["end"], sent["cut_at_byte"], sent["sent_bytes"]) == ("reset", 30, 30)
    assert sent["full_bytes"] == full and sent["sent"] == got.decode()


def test_sse_answers_and_a_tools_list_change_reach_the_sdk(http_session):
    new_tools = [{"name": "w", "description": "now with a size", "parameters": PARAMS}]
    s = http_session(
        faulty(
            {"method": "tools/list", "fault": {"sse": {}}},
            {"after": 1, "fault": {"list_changed": {"tools": new_tools}}},
        )
    )
    notes: list[Any] = []

    async def on_message(m: Any) -> None:
        notes.append(m)

    async def session() -> tuple[list[Any], list[Any], list[str]]:
        async with Client(s.mcp_endpoint, mode="legacy", message_handler=on_message) as c:
            before = (await c.list_tools()).tools
            texts = [str((await c.call_tool("w", {"path": "p"})).content[0].text) for _ in "ab"]
            after = (await c.list_tools()).tools
            return before, after, texts

    before, after, texts = run(session())
    assert [t.name for t in before] == ["w", "bare"] and texts == ["one", "two"]
    assert [(t.name, t.description) for t in after] == [("w", "now with a size")]
    assert [getattr(n, "method", None) for n in notes] == ["notifications/tools/list_changed"]
    entries = s.journal()["entries"]
    listed = next(e for e in entries if e["rpc_method"] == "tools/list")
    assert listed["response"]["headers"]["content-type"] == "text/event-stream"
    assert listed["response"]["stream"] is True and listed["response"]["events_sent"] == 1
    changed = [e for e in entries if e["fault"] == "list_changed"]
    assert len(changed) == 1 and changed[0]["response"]["events_sent"] == 2
    first, second = changed[0]["response"]["sent"].split("\n\n")[:2]
    assert '"method":"notifications/tools/list_changed"' in first and '"result"' in second
