"""A scripted tool call is named as the agent offers the tool (``fakes.toolnames``)."""

from __future__ import annotations

import pytest
from gw_wire import last_json, post, scenario

from fakes.toolnames import agent_name, offered_names

CALL = {"id": "call_1", "name": "write_file", "arguments": '{"path": "a"}'}


def fn(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    ("offered", "named"),
    [
        (["write_file", "mcp__x__write_file"], "write_file"),  # offered as scripted: kept
        (["mcp__conformance__write_file", "read_file"], "mcp__conformance__write_file"),
        (["conformance__write_file"], "conformance__write_file"),
        (["a__write_file", "b__write_file"], "write_file"),  # ambiguous: kept
        (["rewrite_file"], "write_file"),  # no `__` join: kept
        ([], "write_file"),
    ],
)
def test_agent_name(offered, named):
    assert agent_name("write_file", offered) == named


def test_offered_names_in_every_dialects_shape():
    body = {
        "tools": [fn("a"), {"name": "b", "input_schema": {}}, {"type": "function", "name": "c"}]
    }
    assert offered_names(body) == ["a", "b", "c"]
    assert offered_names({"tools": "x"}) == [] and offered_names(None) == []


def test_the_wire_carries_the_name_the_agent_offered(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": {"tool_calls": [CALL], "finish_reason": "tool_calls"}},
            otherwise={"reply": {"tool_calls": [CALL], "finish_reason": "tool_calls"}},
        )
    )
    got = post(client, s.base_url, tools=[fn("mcp__conformance__write_file")])
    names = [
        tc["function"]["name"]
        for chunk in last_json(got.body)
        for tc in chunk["choices"][0]["delta"].get("tool_calls") or []
        if "name" in tc.get("function", {})
    ]
    assert names == ["mcp__conformance__write_file"]
    plain = post(client, s.base_url, stream=False, tools=[fn("write_file")])
    assert plain.body.count(b'"name":"write_file"') + plain.body.count(b'"name": "write_file"') == 1


def test_a_tool_offered_in_a_responses_namespace_is_called_with_it():
    # Codex offers MCP tools inside a `namespace` tool and routes a call by its namespace.
    from fakes.dialects.openai_responses import json_body, stream_events
    from fakes.scenario import Step
    from fakes.toolnames import namespaces, with_agent_names

    ns = {"type": "namespace", "name": "mcp__conformance", "tools": [fn("write_file")["function"]]}
    ns["tools"][0]["type"] = "function"
    body = {"tools": [{"type": "function", "name": "exec_command"}, ns]}
    assert namespaces(body) == {"write_file": "mcp__conformance"}
    step = Step(0, {"tool_calls": [CALL], "finish_reason": "tool_calls"}, None)
    (call,) = with_agent_names(step, body).reply["tool_calls"]
    assert call == {**CALL, "namespace": "mcp__conformance"}
    (item,) = json_body(with_agent_names(step, body).reply, "m")["output"]
    assert (item["name"], item["namespace"]) == ("write_file", "mcp__conformance")
    added = [
        p["item"]
        for e, p in stream_events(with_agent_names(step, body).reply, "m")
        if e == "response.output_item.added"
    ]
    assert added[0]["namespace"] == "mcp__conformance"
    # Offered at the top level as well: that name wins, no namespace.
    top = {"tools": [{"type": "function", "name": "write_file"}, ns]}
    assert with_agent_names(step, top).reply["tool_calls"] == [CALL]
    # Elsewhere the call is untouched.
    assert "namespace" not in json_body(step.reply, "m")["output"][0]
