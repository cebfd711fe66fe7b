"""The MCP checks fail the wire of a client that gets MCP wrong.

The client is driven by hand (raw JSON-RPC over httpx) against a real gateway session, so each
check is judged on what such a client really sends; the reference agent's own runs (passing,
and its broken copies failing) are in ``tests/test_run_mcp.py``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from conformance.checks import run_check
from conformance.judging.evidence import Evidence
from fakes.mcp import SESSION_HEADER
from fakes.pytest_plugin import fake_gateway, sessions_on  # noqa: F401 (fixture)

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}
ARGS = {"path": "a.txt"}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
DONE = [{"type": "turn_end", "reason": "completed"}]


def _scenario(mcp_faults: list[dict[str, Any]]) -> dict[str, Any]:
    call = {"id": "call_1", "name": "write_file", "arguments": json.dumps(ARGS)}
    gone = {"id": "call_2", "name": "delete_file", "arguments": json.dumps(ARGS)}
    return {
        "id": "t",
        "criteria": ["MCP-02"],
        "prompt": "p",
        "tools": [{"name": "write_file", "parameters": PARAMS}, {"name": "delete_file"}],
        "tool_host": {"write_file": [{"output": "wrote"}], "delete_file": [{"output": "gone"}]},
        "mcp_faults": mcp_faults,
        "script": [
            {"reply": {"tool_calls": [call], "finish_reason": "tool_calls"}},
            {"reply": {"tool_calls": [gone], "finish_reason": "tool_calls"}},
            {"reply": {"text": "done"}},
        ],
    }


class _Client:
    """A hand-driven MCP client and model client of one gateway session."""

    def __init__(self, c: httpx.Client, s: Any) -> None:
        self.c, self.s, self.n, self.sid = c, s, 0, None

    def chat(self) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "p"}]}
        self.c.post(self.s.base_url + "/chat/completions", json=body).raise_for_status()

    def rpc(self, method: str, params: dict[str, Any], sid: str | None = None) -> httpx.Response:
        self.n += 1
        headers = {"Accept": "application/json, text/event-stream"}
        if sid or self.sid:
            headers[SESSION_HEADER] = sid or self.sid or ""
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        return self.c.post(self.s.mcp_endpoint, json=msg, headers=headers)

    def initialize(self) -> str:
        self.sid = None
        self.sid = self.rpc("initialize", INIT).headers[SESSION_HEADER]
        return self.sid

    def call(self, name: str = "write_file", sid: str | None = None) -> httpx.Response:
        return self.rpc("tools/call", {"name": name, "arguments": ARGS}, sid)


@pytest.fixture
def wire(fake_gateway: Any) -> Any:  # noqa: F811
    made = sessions_on(fake_gateway)
    make = next(made)

    def drive(mcp_faults: list[dict[str, Any]], steps: Callable[[_Client], None]) -> Evidence:
        s = make(_scenario(mcp_faults))
        with httpx.Client(timeout=5.0) as c:
            steps(_Client(c, s))
        return Evidence(scenario=_scenario(mcp_faults), raw_journal=s.journal(), events=DONE)

    yield drive
    next(made, None)


EXPIRE = [{"fault": {"session_expired": {}}}]


def _expired_then(after: Callable[[_Client, str], None]) -> Callable[[_Client], None]:
    def steps(m: _Client) -> None:
        m.chat()
        old = m.initialize()
        assert m.call().status_code == 404
        after(m, old)

    return steps


def test_mcp_02_passes_one_initialize_and_one_retry(wire: Any) -> None:
    ev = wire(EXPIRE, _expired_then(lambda m, old: (m.initialize(), m.call())))
    assert run_check("MCP-02", ev).outcome == "pass", run_check("MCP-02", ev)


def test_mcp_02_passes_a_client_that_probes_for_the_stateless_revision_first(wire: Any) -> None:
    # A client of a newer revision asks server/discover before initialize (400 here: not
    # served); the probe belongs to starting the new session (seen from Claude Code 2.1.332).
    def probe_then_init(m: _Client, old: str) -> None:
        m.sid = None
        assert m.rpc("server/discover", {}).status_code == 400
        m.initialize()
        m.call()

    ev = wire(EXPIRE, _expired_then(probe_then_init))
    assert run_check("MCP-02", ev).outcome == "pass", run_check("MCP-02", ev)


def test_mcp_02_fails_the_expired_id_sent_again(wire: Any) -> None:
    ev = wire(EXPIRE, _expired_then(lambda m, old: m.call(sid=old)))
    finding = run_check("MCP-02", ev)
    assert finding.outcome == "fail" and "expired session id sent again" in finding.observed


def test_mcp_02_fails_no_retry_after_initialize(wire: Any) -> None:
    ev = wire(EXPIRE, _expired_then(lambda m, old: m.initialize()))
    finding = run_check("MCP-02", ev)
    assert finding.outcome == "fail" and "not retried" in finding.observed


def test_mcp_02_fails_a_second_initialize_for_the_call(wire: Any) -> None:
    def again(m: _Client, old: str) -> None:
        m.initialize()
        m.initialize()
        m.call()

    finding = run_check("MCP-02", wire(EXPIRE, _expired_then(again)))
    assert finding.outcome == "fail" and "2 initialize" in finding.observed


CHANGE = [{"fault": {"list_changed": {"tools": [{"name": "write_file", "parameters": PARAMS}]}}}]


def test_mcp_04_fails_a_call_of_a_tool_no_longer_listed(wire: Any) -> None:
    def steps(m: _Client) -> None:
        m.chat()
        m.initialize()
        m.call()  # its answer says the tools changed
        m.rpc("tools/list", {})
        m.chat()
        m.call("delete_file")

    finding = run_check("MCP-04", wire(CHANGE, steps))
    assert finding.outcome == "fail" and "no longer listed" in finding.observed


def test_mcp_04_fails_a_call_before_listing_anew(wire: Any) -> None:
    def steps(m: _Client) -> None:
        m.chat()
        m.initialize()
        m.call()
        m.call()

    finding = run_check("MCP-04", wire(CHANGE, steps))
    assert finding.outcome == "fail" and "before listing anew" in finding.observed


# --- what the agent sent after an abort includes its MCP tool calls (CTL-01) ---------------
def _after_abort(wire: Any, then: Callable[[_Client], None]) -> Any:
    def steps(m: _Client) -> None:
        m.initialize()
        m.chat()  # step 0, the request the abort falls in
        then(m)

    ev = wire([], steps)
    scenario = {**_scenario([]), "criteria": ["CTL-01"], "abort": {"when_step": 0}}
    return run_check("CTL-01", Evidence(scenario=scenario, raw_journal=ev.raw_journal, events=DONE))


def test_ctl_01_fails_a_tool_called_over_mcp_after_the_abort(wire: Any) -> None:
    finding = _after_abort(wire, lambda m: m.call())
    assert finding.outcome == "fail" and "tool request" in finding.observed, finding.observed


def test_ctl_01_passes_a_cancellation_sent_after_the_abort(wire: Any) -> None:
    def cancel(m: _Client) -> None:
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        headers = {"Accept": "application/json, text/event-stream", SESSION_HEADER: m.sid or ""}
        m.c.post(m.s.mcp_endpoint, json=note, headers=headers)

    finding = _after_abort(wire, cancel)
    assert finding.outcome == "pass", finding.observed


# --- MCP-01: the result the model gets carries the server's message -------------------------
RPC_ERROR = [{"fault": {"rpc_error": {"code": -32603, "message": "backend down"}}}]


def _send_result(m: _Client, result: str) -> None:
    """The model's next request, carrying ``result`` for its write_file call."""
    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "write_file", "arguments": json.dumps(ARGS)}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "p"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
        ],
    }
    m.c.post(m.s.base_url + "/chat/completions", json=body).raise_for_status()


def _told(result: str) -> Callable[[_Client], None]:
    """The model's call run over MCP (answered with a JSON-RPC error), then ``result`` sent."""

    def steps(m: _Client) -> None:
        m.chat()  # step 0: the model calls write_file
        m.initialize()
        m.call()
        _send_result(m, result)

    return steps


def test_mcp_01_passes_the_servers_message_sent_to_the_model(wire: Any) -> None:
    ev = wire(RPC_ERROR, _told("Error: MCP error -32603: backend down"))
    assert run_check("MCP-01", ev).outcome == "pass", run_check("MCP-01", ev)


def test_mcp_01_fails_a_result_that_drops_the_servers_message(wire: Any) -> None:
    finding = run_check("MCP-01", wire(RPC_ERROR, _told("Error: the tool failed")))
    assert finding.outcome == "fail" and "backend down" in finding.observed, finding.observed


def _answered_then_cancelled(cancel: bool, result: str | None) -> Callable[[_Client], None]:
    """The call answered in full, then (``cancel``) given up by the client all the same, as an
    agent whose time limit fired late does; then ``result`` sent to the model, if any."""

    def steps(m: _Client) -> None:
        m.chat()
        m.initialize()
        assert m.call().status_code == 200
        if cancel:
            note = {"requestId": m.n, "reason": "Request timed out"}
            msg = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note}
            headers = {"Accept": "application/json, text/event-stream", SESSION_HEADER: m.sid}
            m.c.post(m.s.mcp_endpoint, json=msg, headers=headers)
        if result is not None:
            _send_result(m, result)

    return steps


def test_mcp_01_judges_a_call_the_agent_cancelled_as_failed_whatever_came_back(wire: Any) -> None:
    told = run_check("MCP-01", wire([], _answered_then_cancelled(True, "Error: timed out")))
    assert (told.outcome, told.observed) == (
        "pass",
        "1 failed MCP call(s) reached the model as tool results",
    )
    dropped = run_check("MCP-01", wire([], _answered_then_cancelled(True, None)))
    assert dropped.outcome == "fail" and "cancelled by the agent" in dropped.observed
    # Not cancelled: an answered call is no failure to judge.
    kept = run_check("MCP-01", wire([], _answered_then_cancelled(False, "wrote")))
    assert kept.outcome == "not_applicable"


def test_mcp_01_judges_an_answer_past_the_tool_time_limit_as_failed(wire: Any) -> None:
    # The answer went out in full, 10 s after the call, the scenario's limit being 2 s: not in
    # time, though the agent's connection stayed open (its own limit fired late, or never).
    ev = wire([], _answered_then_cancelled(False, "Error: timed out after 2s"))
    journal = copy.deepcopy(ev.raw_journal)
    call = next(
        e for e in journal["entries"] if (e.get("body") or {}).get("method") == "tools/call"
    )
    call["response"]["t_end_ns"] = call["t_arrival_ns"] + int(10 * ev.time_scale * 1e9)
    scenario = {**ev.scenario, "config": {"tool_timeout_s": 2}}
    late = Evidence(scenario=scenario, raw_journal=journal, events=DONE, time_scale=ev.time_scale)
    found = run_check("MCP-01", late)
    assert found.outcome == "pass", found.observed
    assert (
        run_check(
            "MCP-01", Evidence(scenario=scenario, raw_journal=ev.raw_journal, events=DONE)
        ).outcome
        == "not_applicable"
    )
    # The late answer's output handed to the model as if in time: the limit was not kept.
    used = wire([], _answered_then_cancelled(False, "wrote"))
    journal = copy.deepcopy(used.raw_journal)
    entries = journal["entries"]
    call = next(e for e in entries if (e.get("body") or {}).get("method") == "tools/call")
    call["response"]["t_end_ns"] = call["t_arrival_ns"] + int(10 * used.time_scale * 1e9)
    found = run_check("MCP-01", Evidence(scenario=scenario, raw_journal=journal, events=DONE))
    assert found.outcome == "fail" and "its output reached the model" in found.observed
