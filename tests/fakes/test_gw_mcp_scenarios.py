"""The MCP criteria scenarios' faults, as the official MCP client meets them.

Each scenario of ``scenarios/criteria/mcp`` is served as written; the SDK client (the oracle
independent of the reference agent, which ``tests/test_run_mcp.py`` runs over the same files)
makes the scripted tool calls. What it meets is pinned: the fault is on the wire as the MCP
criteria's checks read it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client, MCPError

from fakes.pytest_plugin import sessions_on

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "criteria" / "mcp"

# scenario -> what each scripted call met: the result text, or the MCP error's code and words.
MET: dict[str, list[tuple[Any, str]]] = {
    "mcp-01-call-too-slow": [("ok", "wrote 2 bytes to a.txt")],  # held its scaled seconds
    "mcp-01-rpc-error": [(-32603, "backend down")],
    "mcp-02-session-expired": [(-32600, "Session not found")],
    "mcp-02-session-expired-twice": [(-32600, "Session not found")],
    "mcp-03-bad-json": [(-32700, "")],
    "mcp-04-tool-removed": [("ok", "wrote 2 bytes to a.txt"), (-32602, "Unknown tool")],
}


@pytest.fixture
def http_session(fake_gateway: Any) -> Any:
    yield from sessions_on(fake_gateway)


def _calls(scenario: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c["name"], json.loads(c["arguments"]))
        for step in scenario["script"]
        for c in (step.get("reply") or {}).get("tool_calls") or []
    ]


async def _meet(endpoint: str, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[Any, str]]:
    met: list[tuple[Any, str]] = []
    async with Client(endpoint, mode="legacy") as c:
        await c.list_tools()
        for name, args in calls:
            try:
                r = await c.call_tool(name, args)
                met.append(("ok", str(r.content[0].text)))
            except MCPError as exc:
                met.append((exc.code, exc.message))
    return met


@pytest.mark.parametrize("name", sorted(MET))
def test_the_sdk_meets_each_mcp_scenario_fault(http_session: Any, name: str) -> None:
    scenario = yaml.safe_load((ROOT / f"{name}.yaml").read_text(encoding="utf-8"))
    s = http_session(scenario)
    met = asyncio.run(asyncio.wait_for(_meet(s.mcp_endpoint, _calls(scenario)), 10))
    want = MET[name]
    assert [code for code, _ in met] == [code for code, _ in want], met
    assert all(words in text for (_, text), (_, words) in zip(met, want, strict=True)), met
    faulted = [e for e in s.journal()["entries"] if e["fault"]]
    assert faulted and faulted[0]["rpc_method"] == "tools/call"


def test_every_mcp_scenario_is_met_by_the_sdk_or_says_why_not() -> None:
    # The cut answer ends the SDK's whole client session (docs/gateway.md, `cut`): the
    # reference agent's run of it stands alone (tests/test_run_mcp.py).
    assert {p.stem for p in ROOT.glob("*.yaml")} == set(MET) | {"mcp-03-cut-answer"}
