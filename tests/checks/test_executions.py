"""An MCP ``tools/call`` is a tool execution: the evidence gives it the tool host's shape.

The same scripted run is driven twice on a real gateway, its tools called once over the tool
host's HTTP endpoint and once over MCP (raw JSON-RPC, one session); the evidence must read both
the same way: tool, model call id, arguments, behaviour, what the host answered.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conformance.checks.tjs import host_output
from conformance.judging.evidence import Evidence
from conformance.judging.executions import mcp_messages
from fakes.mcp import SESSION_HEADER
from fakes.pytest_plugin import fake_gateway, sessions_on  # noqa: F401 (fixture)

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}
CALLS = [
    {"id": "call_a", "name": "write_file", "arguments": json.dumps({"path": "a.txt"})},
    {"id": "call_b", "name": "write_file", "arguments": json.dumps({"path": "b.txt"})},
]
BEHAVIOURS = [
    {"transient": {"message": "busy"}},  # call_a, first attempt: did not run
    {"output": "wrote a"},  # call_a, its retry
    {"permission_denied": {"reason": "read-only"}},  # call_b
]


def _scenario() -> dict[str, Any]:
    return {
        "id": "t",
        "criteria": ["TOL-01"],
        "prompt": "p",
        "tools": [{"name": "write_file", "parameters": PARAMS}],
        "tool_host": {"write_file": BEHAVIOURS},
        "script": [
            {"reply": {"tool_calls": CALLS, "finish_reason": "tool_calls"}},
            {"reply": {"text": "done"}},
        ],
    }


@pytest.fixture
def session(fake_gateway: Any) -> Any:  # noqa: F811
    yield from sessions_on(fake_gateway)


def _chat(c: httpx.Client, s: Any) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "p"}]}
    c.post(s.base_url + "/chat/completions", json=body).raise_for_status()


def _over_http(c: httpx.Client, s: Any) -> None:
    for cid, path in (("call_a", "a.txt"), ("call_a", "a.txt"), ("call_b", "b.txt")):
        body = {"call_id": cid, "arguments": {"path": path}}
        c.post(s.tool_endpoint.rstrip("/") + "/write_file", json=body)


def _over_mcp(c: httpx.Client, s: Any) -> None:
    def rpc(n: int, method: str, params: dict[str, Any], sid: str | None = None) -> httpx.Response:
        msg = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        headers = {"Accept": "application/json, text/event-stream"}
        if sid:
            headers[SESSION_HEADER] = sid
        return c.post(s.mcp_endpoint, json=msg, headers=headers)

    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    sid = rpc(0, "initialize", init).headers[SESSION_HEADER]
    for n, path in enumerate(("a.txt", "a.txt", "b.txt"), 1):
        rpc(n, "tools/call", {"name": "write_file", "arguments": {"path": path}}, sid)


def _status(t: Any) -> Any:
    return (t["response"] or {}).get("status")


def _executions(s: Any) -> list[tuple[Any, ...]]:
    ev = Evidence(scenario=_scenario(), raw_journal=s.journal())
    return [
        (t["tool"], t["call_id"], t["arguments"], t["behaviour"], host_output(t), _status(t))
        for t in ev.tool_entries()
    ]


def test_mcp_calls_read_as_the_same_executions_as_http(session: Any) -> None:
    runs = []
    with httpx.Client(timeout=5.0) as c:
        for call in (_over_http, _over_mcp):
            s = session(_scenario())
            _chat(c, s)
            call(c, s)
            runs.append(_executions(s))
    over_http, over_mcp = runs
    # MCP has no denial of its own: the gateway says it in the text, which is read as sent.
    denied = over_mcp[2][4][1]
    assert denied == {"type": "permission_denied", "message": "Permission denied: read-only"}
    over_mcp[2] = (*over_mcp[2][:4], over_http[2][4], over_mcp[2][5])
    assert over_mcp == over_http
    assert [(t[1], t[3]) for t in over_mcp] == [
        ("call_a", "transient"),
        ("call_a", "output"),
        ("call_b", "permission_denied"),
    ]
    assert over_mcp[1][4] == ("wrote a", None)


def test_a_call_the_tool_never_ran_keeps_its_name_and_the_answer_as_sent(session: Any) -> None:
    sc = _scenario()
    sc["mcp_faults"] = [{"fault": {"http_error": {"status": 502, "body": "bad gateway"}}}]
    s = session(sc)
    with httpx.Client(timeout=5.0) as c:
        _chat(c, s)
        _over_mcp(c, s)
    ev = Evidence(scenario=sc, raw_journal=s.journal())
    first = ev.tool_entries()[0]
    assert (first["tool"], first["behaviour"], first["call_id"]) == ("write_file", None, "call_a")
    assert (first["response"] or {}).get("status") == 502
    assert (first["response"] or {}).get("sent") == "bad gateway"
    # The retry of the same call is matched to the same model call; the next one to the next.
    assert [t["call_id"] for t in ev.tool_entries()] == ["call_a", "call_a", "call_b"]


def test_mcp_messages_reads_only_complete_sse_events() -> None:
    sent = 'event: message\ndata: {"a": 1}\n\nevent: message\ndata: {"b": 2}\n\nevent: mess'
    assert mcp_messages({"stream": True, "sent": sent}) == [{"a": 1}, {"b": 2}]
    assert mcp_messages({"stream": False, "sent": '{"jsonrpc": "2.0", "id": 1, "res'}) == []
