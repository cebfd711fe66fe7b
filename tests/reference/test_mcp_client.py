"""The reference agent's MCP client against the gateway's MCP tool host and its faults.

Each outcome is read as the tool executor reports it, ``(kind, text, error_type)``; what went
over the wire is read back from the gateway's journal.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from conformance.reference.mcp_client import McpClient, McpSwitches
from fakes import Gateway

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}


def _scenario(mcp_faults: list[dict[str, Any]], *behaviours: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "t",
        "criteria": ["TOL-01"],
        "prompt": "p",
        "script": [{"reply": {"text": "x"}}],
        "tools": [{"name": "write_file", "parameters": PARAMS}, {"name": "delete_file"}],
        "tool_host": {
            "write_file": list(behaviours) or [{"output": "wrote"}],
            "delete_file": [{"output": "deleted"}],
        },
        "mcp_faults": mcp_faults,
    }


async def _calls(
    mcp_faults: list[dict[str, Any]],
    *behaviours: dict[str, Any],
    calls: tuple[str, ...] = ("write_file",),
    switches: McpSwitches = McpSwitches(),  # noqa: B008
) -> tuple[list[tuple[str, str, str]], list[dict[str, Any]]]:
    async with Gateway() as gw:
        s = gw.create_session(_scenario(mcp_faults, *behaviours), time_scale=0.01)
        async with aiohttp.ClientSession() as http:
            client = McpClient(s.mcp_endpoint, http, timeout_s=5.0, switches=switches)
            tools = await client.connect()
            assert [t.name for t in tools] == ["write_file", "delete_file"]
            assert tools[0].parameters == PARAMS
            out = [await client.attempt(name, {"path": "a"}) for name in calls]
            await client.close()
        return out, s.journal()["entries"]


def _methods(entries: list[dict[str, Any]]) -> list[Any]:
    return [e.get("rpc_method") or e["method"] for e in entries]


async def test_handshake_call_and_close_on_the_wire() -> None:
    out, entries = await _calls([])
    assert out == [("ok", "wrote", "")]
    assert _methods(entries) == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "DELETE",
    ]
    sid = entries[0]["mcp_session"]
    for e in entries[1:]:
        assert e["headers"]["mcp-session-id"] == sid
        assert e["headers"]["mcp-protocol-version"] == "2025-06-18"
    assert entries[-1]["response"]["status"] == 200  # the session ended


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        ({"error": {"message": "disk full"}}, ("error", "disk full", "execution_error")),
        (
            {"permission_denied": {"reason": "read-only"}},
            ("denied", "Permission denied: read-only", ""),
        ),
        ({"transient": {"message": "busy"}}, ("transient", "busy", "")),
    ],
)
async def test_tool_outcomes(behaviour: dict[str, Any], expected: tuple[str, str, str]) -> None:
    out, _ = await _calls([], behaviour)
    assert out == [expected]


@pytest.mark.parametrize(
    ("fault", "kind", "words"),
    [
        ({"sse": {}}, "ok", "wrote"),
        ({"rpc_error": {"code": -32099, "message": "backend down"}}, "error", "backend down"),
        ({"http_error": {"status": 503}}, "transient", "HTTP 503"),
        ({"http_error": {"status": 500, "body": "boom"}}, "error", "HTTP 500 boom"),
        ({"cut": {}}, "error", "cut while reading"),
        ({"malformed": {"kind": "bad_json"}}, "error", "not valid JSON"),
        ({"malformed": {"kind": "wrong_id"}}, "error", "not the response to the call"),
    ],
)
async def test_faulted_answers(fault: dict[str, Any], kind: str, words: str) -> None:
    out, _ = await _calls([{"fault": fault}])
    assert out[0][0] == kind and words in out[0][1], out


async def test_an_expired_session_is_initialized_anew_once_and_the_call_retried() -> None:
    out, entries = await _calls([{"fault": {"session_expired": {}}}])
    assert out == [("ok", "wrote", "")]
    methods = _methods(entries)
    assert methods[3:7] == ["tools/call", "initialize", "notifications/initialized", "tools/call"]
    assert entries[3]["response"]["status"] == 404
    assert "mcp-session-id" not in entries[4]["headers"]  # a new session, without the old id
    assert entries[6]["mcp_session"] == entries[4]["mcp_session"] != entries[3]["mcp_session"]


async def test_expired_again_is_an_error_without_a_second_initialize() -> None:
    out, entries = await _calls([{"times": 2, "fault": {"session_expired": {}}}])
    assert out[0][0] == "error" and "expired again" in out[0][1]
    assert _methods(entries).count("initialize") == 2  # the first and the one re-initialize
    assert "DELETE" not in _methods(entries)  # no session left to end


async def test_an_expired_session_is_not_initialized_again_when_switched_off() -> None:
    out, entries = await _calls(
        [{"fault": {"session_expired": {}}}], switches=McpSwitches(reinitialize=False)
    )
    assert out[0][0] == "error"
    assert _methods(entries).count("initialize") == 1


async def test_a_tool_no_longer_listed_is_answered_without_a_call() -> None:
    changed = {"list_changed": {"tools": [{"name": "write_file", "parameters": PARAMS}]}}
    out, entries = await _calls([{"fault": changed}], calls=("write_file", "delete_file"))
    assert out[0] == ("ok", "wrote", "")
    assert out[1][0] == "error" and "no longer offers" in out[1][1]
    methods = _methods(entries)
    assert methods[3:5] == ["tools/call", "tools/list"]  # listed anew after the notification
    assert methods.count("tools/call") == 1


async def test_the_list_change_is_ignored_when_switched_off() -> None:
    changed = {"list_changed": {"tools": [{"name": "write_file", "parameters": PARAMS}]}}
    out, entries = await _calls(
        [{"fault": changed}],
        calls=("write_file", "delete_file"),
        switches=McpSwitches(follow_list_changes=False),
    )
    assert out[1][0] == "error" and "-32602" in out[1][1]  # the server refused the call
    assert _methods(entries).count("tools/call") == 2


@pytest.mark.parametrize(
    ("switches", "fault"),
    [
        (McpSwitches(error_results=False), {"rpc_error": {}}),
        (McpSwitches(cut_results=False), {"cut": {}}),
    ],
)
async def test_broken_switches_raise(switches: McpSwitches, fault: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError):
        await _calls([{"fault": fault}], switches=switches)


@pytest.mark.parametrize("aborted", [False, True])
async def test_a_call_given_up_on_is_cancelled_unless_the_user_aborted(aborted: bool) -> None:
    async with Gateway() as gw:
        s = gw.create_session(_scenario([], {"hang": 100}), time_scale=0.01)
        async with aiohttp.ClientSession() as http:
            client = McpClient(s.mcp_endpoint, http, timeout_s=5.0)
            await client.connect()
            call = asyncio.ensure_future(client.attempt("write_file", {"path": "a"}))
            while not any(e.get("rpc_method") == "tools/call" for e in s.journal()["entries"]):
                await asyncio.sleep(0.005)  # until the call has arrived
            if aborted:
                client.hush()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await client.close()
        entries = s.journal()["entries"]
    methods = _methods(entries)
    if aborted:
        assert methods[3:] == ["tools/call"]  # nothing sent after the abort
        return
    assert methods[3:] == ["tools/call", "notifications/cancelled", "DELETE"]
    assert entries[4]["body"]["params"]["requestId"] == entries[3]["rpc_id"]
