"""The journal's types (``fakes.journal``) name exactly the fields the gateway writes.

The types are read by mypy only; this test holds them to the JSON of the running gateway, so
that neither can drift: every kind of entry, its ``response`` record, the journal itself and
its ``refused`` record, each compared key for key with its TypedDict.
"""

from __future__ import annotations

from typing import Any

from gw_wire import post, scenario

from fakes.journal import (
    ChatEntry,
    CountTokensEntry,
    Journal,
    McpEntry,
    ModelsEntry,
    Refused,
    Response,
    ToolEntry,
    UnknownEntry,
)

BY_KIND: dict[str, Any] = {
    "chat": ChatEntry,
    "count_tokens": CountTokensEntry,
    "models": ModelsEntry,
    "tool": ToolEntry,
    "mcp": McpEntry,
    "unknown": UnknownEntry,
}


def keys(typed_dict: Any) -> set[str]:
    return set(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def test_every_entry_kind_and_response_has_exactly_its_typed_fields(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": {"text": "hello"}, "fault": {"cut": {"after_events": 1, "mode": "reset"}}},
            {"fault": {"reset_before_headers": {}}},
            {"reply": {"text": "hello"}},
            tools=[{"name": "w"}],
            tool_host={"w": [{"output": "ok"}]},
        )
    )
    post(client, s.base_url)  # cut mid-stream
    post(client, s.base_url)  # reset before the headers: no status
    post(client, s.base_url, stream=False)
    post(client, s.base_url)  # beyond the script: served by the last fault step as `otherwise`
    client.get(s.base_url + "/models")
    client.post(s.base_url + "/messages/count_tokens", json={"model": "m", "messages": []})
    client.post(s.tool_endpoint + "/w", json={"call_id": "c1", "arguments": {"a": 1}})
    client.post(s.tool_endpoint + "/nope", json={})  # no scripted behaviour
    client.post(s.base_url + "/nowhere", json={})
    client.post(s.mcp_endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"})

    journal = s.journal()
    assert set(journal) == keys(Journal) - {"refused"}
    entries = journal["entries"]
    kinds = [e["kind"] for e in entries]
    assert kinds == ["chat"] * 4 + ["models", "count_tokens", "tool", "tool", "unknown", "mcp"]
    for e in entries:
        assert set(e) == keys(BY_KIND[e["kind"]]), e["kind"]
        assert e["response"] is not None
        # t_agent_wall_headers only for an agent on a fast clock (test_warp.py has one).
        assert set(e["response"]) == keys(Response) - {"t_agent_wall_headers"}, e["kind"]
    cut, reset = entries[0]["response"], entries[1]["response"]
    assert cut["end"] == "reset" and cut["cut_at_byte"] is not None
    assert reset["status"] is None and reset["end"] == "reset"
    assert entries[3]["otherwise"] is True and entries[3]["step"] is None
    assert entries[7]["harness_error"] and entries[-2]["harness_error"]


def test_refused_record_has_exactly_its_typed_fields(gateway_session):
    s = gateway_session(scenario({"reply": {"text": "hello"}}, refuse_connections={"seconds": 5}))
    journal = s.journal()
    assert set(journal) == keys(Journal)
    assert set(journal["refused"]) == keys(Refused)
