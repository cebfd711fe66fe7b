"""The journal's types (``fakes.journal``) name exactly the fields the gateway writes.

The types are read by mypy only; this test holds them to the JSON of the running gateway, so
that neither can drift: every kind of entry, its ``response`` record, the journal itself and
its ``refused`` record, each compared key for key with its TypedDict; the keys a bounded journal
adds (``retention``, ``body_digest``, ``sent_digest``) appear exactly when it elides something.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from gw_wire import full_stream, post, scenario

from fakes import FakesError, Gateway
from fakes.journal import (
    ChatEntry,
    CountTokensEntry,
    Digest,
    Journal,
    McpEntry,
    ModelsEntry,
    Refused,
    Response,
    RetentionRecord,
    ToolEntry,
    UnknownEntry,
)
from fakes.retention import EDGE_CHARS, Retention

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
    assert set(journal) == keys(Journal) - {"refused", "retention"}  # a whole journal
    entries = journal["entries"]
    kinds = [e["kind"] for e in entries]
    assert kinds == ["chat"] * 4 + ["models", "count_tokens", "tool", "tool", "unknown", "mcp"]
    for e in entries:
        assert set(e) == keys(BY_KIND[e["kind"]]) - {"body_digest"}, e["kind"]
        assert e["response"] is not None
        # t_agent_wall_headers only for an agent on a fast clock (test_warp.py has one).
        assert set(e["response"]) == keys(Response) - {"sent_digest", "t_agent_wall_headers"}, e[
            "kind"
        ]
    cut, reset = entries[0]["response"], entries[1]["response"]
    assert cut["end"] == "reset" and cut["cut_at_byte"] is not None
    assert reset["status"] is None and reset["end"] == "reset"
    assert entries[3]["otherwise"] is True and entries[3]["step"] is None
    assert entries[7]["harness_error"] and entries[-2]["harness_error"]


def test_refused_record_has_exactly_its_typed_fields(gateway_session):
    s = gateway_session(scenario({"reply": {"text": "hello"}}, refuse_connections={"seconds": 5}))
    journal = s.journal()
    assert set(journal) == keys(Journal) - {"retention"}
    assert set(journal["refused"]) == keys(Refused)


def test_a_bounded_journal_keeps_a_ring_and_digests_large_bodies():
    reply = {"text": "x" * 400, "chunk_chars": 50}
    wire = full_stream(reply)
    with (
        Gateway.running(retention=Retention(entries=3, body_bytes=300)) as gw,
        httpx.Client(timeout=5.0) as client,
    ):
        s = gw.create_session(scenario({"times": 10, "reply": reply}))
        for i in range(5):
            got = post(client, s.base_url, note="y" * (400 if i == 4 else 0))
            assert got.body == wire  # the wire is whole whatever the journal keeps
        journal = s.journal()
    assert set(journal) == keys(Journal) - {"refused"}
    assert journal["retention"] == {"entries": 3, "body_bytes": 300, "dropped": 2}
    assert set(journal["retention"]) == keys(RetentionRecord)
    entries = journal["entries"]
    assert [e["seq"] for e in entries] == [2, 3, 4]  # the last three; seq counts them all
    small, large = entries[0], entries[2]
    assert small["body"]["messages"] and "body_digest" not in small
    assert large["body"] is None and set(large["body_digest"]) == keys(Digest)
    assert large["body_digest"]["bytes"] > 300
    for e in entries:
        r = e["response"]
        assert r["sent"] is None and r["sent_bytes"] == len(wire)
        assert set(r) == keys(Response) - {"t_agent_wall_headers"}  # no fast clock here
        d = r["sent_digest"]
        assert d == {
            "sha256": hashlib.sha256(wire).hexdigest(),
            "bytes": len(wire),
            "head": wire.decode()[:EDGE_CHARS],
            "tail": wire.decode()[-EDGE_CHARS:],
        }


def test_retention_bounds_are_positive_integers_or_none():
    assert not Retention().bounded and Retention(entries=5).bounded
    for bad in ({"entries": 0}, {"body_bytes": -1}, {"entries": True}, {"entries": 2.5}):
        with pytest.raises(FakesError, match="journal retention"):
            Retention(**bad)
