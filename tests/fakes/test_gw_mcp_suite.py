"""What the official MCP conformance suite checks of the MCP tool host, held here without Node:
undeclared capabilities refused as the specification says, the suite's tools served by the
bundled scenario, and its expected-failures file (every scenario not served, with a reason).
``tox -e mcp-conformance`` runs the suite itself."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client

from fakes import load_scenario
from fakes.mcp import SESSION_HEADER
from fakes.pytest_plugin import sessions_on

MCP_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "mcp"
SUITE_SCENARIO = MCP_DIR / "mcp-conformance-suite.yaml"
EXPECTED = MCP_DIR / "conformance-expected-failures.yml"
# `conformance list --server` of @modelcontextprotocol/conformance 0.1.16, and those it passes.
SUITE_SERVER_SCENARIOS = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
]
PASSED = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "json-schema-2020-12",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
# The methods of the capabilities the host does not declare (logging, completions, resources,
# prompts): a server answers them "method not found".
UNDECLARED = (
    "logging/setLevel",
    "completion/complete",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
)


@pytest.fixture
def http_session(fake_gateway: Any) -> Any:
    """Sessions on the plain-HTTP gateway, where the SDK client needs no CA."""
    yield from sessions_on(fake_gateway)


def _rpc(method: str, rpc_id: int = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


def test_undeclared_capabilities_are_refused_as_method_not_found(gateway_session, client):
    s = gateway_session(load_scenario(SUITE_SCENARIO))
    init = client.post(s.mcp_endpoint, json=_rpc("initialize", protocolVersion="2025-11-25"))
    assert init.json()["result"]["capabilities"] == {"tools": {"listChanged": True}}
    headers = {SESSION_HEADER: init.headers[SESSION_HEADER]}
    for n, method in enumerate(UNDECLARED, 2):
        r = client.post(s.mcp_endpoint, json=_rpc(method, n, name="x", uri="x"), headers=headers)
        assert r.status_code == 200, method
        assert r.json() == {
            "jsonrpc": "2.0",
            "id": n,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }


def test_the_bundled_scenario_serves_the_suites_tools(http_session):
    """What the suite's tools-list, tools-call-simple-text, tools-call-error and
    json-schema-2020-12 read, through the official Python client."""
    s = http_session(load_scenario(SUITE_SCENARIO))

    async def go() -> tuple[Any, ...]:
        async with Client(s.mcp_endpoint) as c:
            tools = (await c.list_tools()).tools
            text = await c.call_tool("test_simple_text", {})
            error = await c.call_tool("test_error_handling", {})
            return tools, text, error

    tools, text, error = asyncio.run(go())
    assert all(t.name and t.description and t.input_schema for t in tools)
    schema = next(t.input_schema for t in tools if t.name == "json_schema_2020_12_tool")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["$defs"]["address"]["properties"]) == {"street", "city"}
    assert schema["additionalProperties"] is False
    assert (text.is_error, text.content[0].text) == (
        False,
        "This is a simple text response for testing.",
    )
    assert error.is_error is True and error.content[0].text


def test_the_expected_failures_list_every_scenario_not_served_with_its_reason():
    listed = yaml.safe_load(EXPECTED.read_text("utf-8"))
    assert set(listed) == {"server"}, "the suite reads `server:` (and `client:`) only"
    names = listed["server"]
    assert len(names) == len(set(names))
    assert sorted(names + PASSED) == sorted(SUITE_SERVER_SCENARIOS)
    items = [ln for ln in EXPECTED.read_text("utf-8").splitlines() if ln.startswith("  - ")]
    assert len(items) == len(names)
    for line in items:
        _, _, reason = line.partition(" # ")
        assert len(reason.split()) >= 4, f"no reason given: {line!r}"
