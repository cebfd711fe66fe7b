"""Hosted tools over MCP: the run option, the start message, the reference agent's MCP client
judged by the existing criteria and by the MCP criteria, and the broken copies that fail them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.adapters.base import RunOutcome
from conformance.adapters.interface import AdapterBase
from conformance.adapters.reference import ReferenceAdapter
from conformance.cli import main
from conformance.reference import Behaviours
from conformance.runner import DIALECTS, run_scenario
from fakes import Gateway, load_scenario
from reports import validate_results

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"
MCP_SCENARIOS = sorted((CRITERIA / "mcp").glob("*.yaml"))
GOLDEN = json.loads((Path(__file__).parent / "golden" / "verdicts.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


class _Recorder(AdapterBase):
    """An agent that ends its turn at once and keeps the start message."""

    name = "recorder"

    def __init__(self, caps: set[str]) -> None:
        self.caps = caps
        self.starts: list[dict] = []

    def capabilities(self) -> set[str]:
        return self.caps

    def run(self, req):
        self.starts.append(req.start)
        end = [{"type": "turn_end", "reason": "completed", "t_ns": 0}]
        return RunOutcome("ran", end, None, "", None)


def test_the_start_message_names_the_tool_transport_and_the_mcp_endpoint(gateway):
    sc = load_scenario(CRITERIA / "tol" / "tol-03-tool-raises.yaml")
    agent = _Recorder({"tools", "mcp_tools"})
    run_scenario(gateway, agent, sc, tool_transport="mcp")
    run_scenario(gateway, agent, sc)
    over_mcp, over_http = agent.starts
    assert over_mcp["tool_transport"] == "mcp" and over_http["tool_transport"] == "http"
    for start in agent.starts:
        assert start["mcp_endpoint"].endswith("/mcp")
        assert start["mcp_endpoint"].rsplit("/", 1)[0] == start["tool_endpoint"].rsplit("/", 1)[0]


def test_over_mcp_an_agent_without_mcp_tools_is_unsupported(gateway):
    sc = load_scenario(CRITERIA / "tol" / "tol-03-tool-raises.yaml")
    agent = _Recorder({"tools"})
    entry, verdicts = run_scenario(gateway, agent, sc, tool_transport="mcp")
    assert not agent.starts and entry["status"] == "unsupported"
    assert "mcp_tools" in entry["error"]
    assert {v["verdict"] for v in verdicts.values()} == {"UNSUPPORTED"}


def test_over_http_the_mcp_criteria_are_unsupported_even_for_an_mcp_agent(gateway):
    sc = load_scenario(CRITERIA / "mcp" / "mcp-01-rpc-error.yaml")
    entry, verdicts = run_scenario(gateway, ReferenceAdapter(), sc)
    assert entry["status"] == "unsupported"
    assert "--tool-transport mcp" in entry["error"]
    assert verdicts["MCP-01"]["verdict"] == "UNSUPPORTED"
    assert "go over http" in verdicts["MCP-01"]["observed"]


def test_an_unknown_tool_transport_is_a_clear_error(gateway):
    sc = load_scenario(CRITERIA / "tol" / "tol-03-tool-raises.yaml")
    with pytest.raises(ValueError, match="unknown tool transport 'grpc'"):
        run_scenario(gateway, ReferenceAdapter(), sc, tool_transport="grpc")


@pytest.mark.parametrize("path", MCP_SCENARIOS, ids=lambda p: p.stem)
def test_the_reference_agent_passes_the_mcp_scenarios_over_mcp(gateway, path):
    sc = load_scenario(path)
    entry, verdicts = run_scenario(gateway, ReferenceAdapter(), sc, tool_transport="mcp")
    for cid in sc.criteria:
        assert verdicts[cid]["verdict"] == "PASS", (cid, verdicts[cid])
    kinds = {e["kind"] for e in entry["journal"]["entries"]}
    assert "mcp" in kinds and "tool" not in kinds  # the tools went over MCP only


# The existing tool criteria judge a run over MCP as one over HTTP: the pinned HTTP verdicts.
SAME_AS_HTTP = [
    "tol/tol-03-tool-raises.yaml",
    "tol/tol-04-tool-timeout.yaml",
    "tol/tol-05-permission-denied.yaml",
    "tol/tol-07-transient-then-ok.yaml",
    "ctl/ctl-02-block-after-tool-turn.yaml",  # the stop hook stays on the tool endpoint
    "fmt/fmt-01-large-output-cut.yaml",
    "dbg/dbg-03-tool-call-log.yaml",
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("scenario", SAME_AS_HTTP)
def test_tool_criteria_over_mcp_give_the_http_verdicts(gateway, scenario, dialect):
    sc = load_scenario(CRITERIA / scenario)
    entry, verdicts = run_scenario(
        gateway, ReferenceAdapter(), sc, dialect=dialect, tool_transport="mcp"
    )
    got = {cid: v["verdict"] for cid, v in verdicts.items()}
    assert got == GOLDEN[f"{sc.id}/{dialect}"], {c: verdicts[c]["observed"] for c in got}
    calls = [e for e in entry["journal"]["entries"] if e.get("rpc_method") == "tools/call"]
    assert calls, "no tool call went over MCP"


# Broken copies: one MCP recovery off fails its criterion (SHOULD ones are NON-STRICT).
BROKEN_MCP = [
    ("mcp_error_results", "mcp-01-rpc-error", "MCP-01", "FAIL"),
    ("mcp_error_messages", "mcp-01-rpc-error", "MCP-01", "FAIL"),
    ("mcp_reinitialize", "mcp-02-session-expired", "MCP-02", "FAIL"),
    ("mcp_cut_results", "mcp-03-cut-answer", "MCP-03", "NON-STRICT"),
    ("mcp_cut_results", "mcp-03-bad-json", "MCP-03", "NON-STRICT"),
    ("mcp_list_changes", "mcp-04-tool-removed", "MCP-04", "NON-STRICT"),
]


@pytest.mark.parametrize(("switch", "scenario", "criterion", "verdict"), BROKEN_MCP)
def test_broken_mcp_copy_fails_its_criterion(gateway, switch, scenario, criterion, verdict):
    sc = load_scenario(CRITERIA / "mcp" / f"{scenario}.yaml")
    broken = ReferenceAdapter(Behaviours(**{switch: False}))
    _, verdicts = run_scenario(gateway, broken, sc, tool_transport="mcp")
    assert verdicts[criterion]["verdict"] == verdict, verdicts[criterion]


# Broken copies of the tool layer fail their criteria over MCP too: the executions read from the
# MCP wire are judged as the tool host's.
BROKEN_TOOLS = [
    ("discard_failed_tool_calls", "str/str-03-complete-call-no-finish.yaml", "STR-03", "FAIL"),
    ("loop_detection", "tol/lop-01-same-failing-call.yaml", "LOP-01", "FAIL"),
    ("background_tools", "trn/trn-10-backgrounded-tool.yaml", "TRN-10", "NON-STRICT"),
]


@pytest.mark.parametrize(("switch", "scenario", "criterion", "verdict"), BROKEN_TOOLS)
def test_broken_tool_copy_fails_over_mcp(gateway, switch, scenario, criterion, verdict):
    sc = load_scenario(CRITERIA / scenario)
    broken = ReferenceAdapter(Behaviours(**{switch: False}))
    entry, verdicts = run_scenario(gateway, broken, sc, tool_transport="mcp")
    assert verdicts[criterion]["verdict"] == verdict, verdicts[criterion]
    assert any(e.get("rpc_method") == "tools/call" for e in entry["journal"]["entries"])


def test_cli_tool_transport_runs_over_mcp_and_says_so_in_the_rerun_line(tmp_path):
    results = tmp_path / "r.json"
    path = CRITERIA / "mcp" / "mcp-02-session-expired.yaml"
    words = ["run", "-q", "--tool-transport", "mcp", "--results", str(results)]
    rc = main([*words, "--scenario", str(path), "--report-dir", str(tmp_path / "rep")])
    doc = json.loads(results.read_text(encoding="utf-8"))
    validate_results(doc)
    agent = doc["agents"][0]
    assert rc == 0 and agent["criteria"]["MCP-02"]["verdict"] == "PASS"
    assert doc["run"]["tool_transport"] == "mcp"
    assert "--tool-transport mcp " in agent["scenarios"][0]["rerun"]


def test_plugin_tool_transport_option(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    results = tmp_path / "r.json"
    scenario = CRITERIA / "mcp" / "mcp-03-cut-answer.yaml"
    args = ["--conformance", "--conformance-tool-transport", "mcp"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "pytest.ini", "--rootdir", ".", "-p"]
        + ["no:cacheprovider", *args, "--conformance-results", str(results), str(scenario)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(results.read_text(encoding="utf-8"))
    assert doc["agents"][0]["criteria"]["MCP-03"]["verdict"] == "PASS", proc.stdout[-2000:]
