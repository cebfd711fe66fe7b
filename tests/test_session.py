"""The run options' table and the run session, without running an agent: both front ends read
the same settings, and a finished run gives the exit status `conformance run` documents."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from conformance.adapters.interface import AdapterBase
from conformance.cli import build_parser
from conformance.expectations import load_expectations
from conformance.options import (
    RUN_OPTIONS,
    RunSettings,
    add_pytest_options,
    plugin_words,
    settings_from_cli,
    settings_from_pytest,
)
from conformance.session import AgentUnderTest, RunInputError, RunSession


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


class _PytestConfig:
    """The part of pytest.Config the plugin reads its options through, on pytest's own rules
    (an option is stored under its first long flag, dashes as underscores)."""

    def __init__(self, words: list[str]) -> None:
        parser = argparse.ArgumentParser()
        add_pytest_options(type("Group", (), {"addoption": staticmethod(parser.add_argument)}))
        self.namespace = parser.parse_args(words)

    def getoption(self, dest: str):
        return getattr(self.namespace, dest)


def _sample(opt) -> str:
    """A command-line word for ``opt`` that is not its default."""
    if opt.choices:
        return opt.choices[-1]
    return {float: "0.5", int: "3"}.get(opt.type, "some/where")


def test_every_cli_spelling_is_on_the_run_parser_under_the_options_name():
    parser = _run_parser()
    by_flag = {s: a for a in parser._actions for s in a.option_strings}
    for opt in RUN_OPTIONS:
        for name in opt.cli.names if opt.cli else ():
            assert by_flag[name].dest == opt.name, (opt.name, name)
    # Nothing on `conformance run` that the table does not know.
    known = {n for opt in RUN_OPTIONS if opt.cli for n in opt.cli.names} | {"-h", "--help"}
    assert set(by_flag) == known


def test_both_front_ends_read_the_same_settings():
    # Every option both front ends spell, set on `conformance run`, reaches the plugin through
    # the flags `conformance run -n N` gives pytest-xdist's workers.
    words = []
    shared = [opt for opt in RUN_OPTIONS if opt.cli and opt.plugin]
    assert {opt.name for opt in shared} >= {"agent", "dialect", "time_scale", "expectations"}
    for opt in shared:
        flag = opt.cli.names[0]
        words += [flag] if opt.action == "store_true" else [flag, _sample(opt)]
    cli = settings_from_cli(_run_parser().parse_args(words))
    plugin = settings_from_pytest(_PytestConfig(plugin_words(cli)))
    for opt in shared:
        assert getattr(cli, opt.name) != opt.default, opt.name
        assert getattr(plugin, opt.name) == getattr(cli, opt.name), opt.name
    assert (cli.front, plugin.front) == ("cli", "plugin")


def test_defaults_when_nothing_is_given():
    cli = settings_from_cli(_run_parser().parse_args([]))
    plugin = settings_from_pytest(_PytestConfig([]))
    assert cli.agent == plugin.agent == ("reference",)
    assert cli.dialect == plugin.dialect == "openai_chat"
    assert cli.report_dir == Path("conformance-report") and plugin.report_dir is None
    assert cli.progress is True and plugin.progress is False  # -q turns the CLI's off
    assert settings_from_cli(_run_parser().parse_args(["-q"])).progress is False
    assert plugin_words(plugin) == [
        "--conformance-agent",
        "reference",
        "--conformance-dialect",
        "openai_chat",
        "--conformance-tool-transport",
        "http",
    ]


@pytest.mark.parametrize(
    ("front", "flag"), [("cli", "--time-scale"), ("plugin", "--conformance-time-scale")]
)
def test_bad_input_names_the_front_ends_flag(front, flag):
    with pytest.raises(RunInputError, match=f"^{flag} must be in \\(0, 1\\], got 2"):
        RunSession(RunSettings(time_scale=2.0, front=front), command="x")
    with pytest.raises(RunInputError, match="^-n must be at least 1, got 0"):
        RunSession(RunSettings(processes=0, front=front), command="x")
    bad = RunSettings(agent=("nonsense",), front=front)
    with pytest.raises(RunInputError, match="unknown adapter 'nonsense'") as exc:
        RunSession(bad, command="x").open_agents()
    assert str(exc.value).startswith(("--agent: ", "--conformance-agent: ")[front == "plugin"])


def test_a_missing_scenario_path_is_bad_input(tmp_path):
    session = RunSession(RunSettings(scenario=(tmp_path / "nope.yaml",)), command="x")
    with pytest.raises(RunInputError, match="nope.yaml: no such scenario file or directory"):
        session.load_scenarios()


# --- finishing a run: record -> finish -> gate ----------------------------------------------


class _Agent(AdapterBase):
    name = "agent-x"

    def capabilities(self) -> set[str]:
        return {"tools"}


def _run(index: int, sid: str, verdicts: dict[str, str]) -> dict:
    return {
        "agent": "agent-x",
        "adapter": "agent-x",
        "capabilities": ["tools"],
        "index": index,
        "entry": {"id": sid, "status": "ran", "events": []},
        "verdicts": {
            c: {"id": sid, "verdict": v, "expected": "", "observed": ""}
            for c, v in verdicts.items()
        },
    }


def _session(tmp_path, *runs: dict, **settings) -> RunSession:
    session = RunSession(RunSettings(results=tmp_path / "out" / "r.json", **settings), command="x")
    session.agents.append(AgentUnderTest("agent-x", "cmd:x", _Agent()))
    for run in runs:
        session.record(run, total=len(runs))
    return session


def test_results_hold_the_runs_in_collection_order(tmp_path):
    session = _session(tmp_path, _run(1, "b", {"RTY-01": "PASS"}), _run(0, "a", {"RTY-01": "PASS"}))
    session.finish(interrupted=False)
    doc = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))  # dir made
    assert [s["id"] for s in doc["agents"][0]["scenarios"]] == ["a", "b"]
    assert doc["run"]["command"] == "x" and doc["run"]["interrupted"] is False
    assert session.gate().status == 0


def test_gate_statuses(tmp_path):
    fail = _run(0, "a", {"RTY-01": "FAIL", "STR-09": "PASS"})
    session = _session(tmp_path, fail)
    session.finish(interrupted=False)
    gate = session.gate()
    assert gate.status == 1
    assert [f.criterion for f in gate.comparison.regressions] == ["RTY-01"]

    session = _session(tmp_path, fail)
    session.finish(interrupted=True)  # Ctrl-C: what ran is kept, never compared
    assert (session.gate().status, session.gate().comparison) == (130, None)

    nothing = _session(tmp_path)
    nothing.finish(interrupted=False)
    assert nothing.gate().status == 2  # nothing ran: -k selected nothing
    nothing.finish(interrupted=True)
    assert nothing.gate().status == 130


def test_update_expectations_then_gate_on_them(tmp_path):
    exp = tmp_path / "exp.yaml"
    fail = _run(0, "a", {"RTY-01": "FAIL"})
    session = _session(tmp_path, fail, expectations=exp, update_expectations=True)
    session.finish(interrupted=False)
    gate = session.gate()
    assert (gate.status, gate.wrote) == (0, exp)
    assert [(e.criterion, e.verdict) for e in load_expectations(exp).entries] == [
        ("RTY-01", "FAIL")
    ]
    gated = _session(tmp_path, fail, expectations=exp)
    gated.finish(interrupted=False)
    assert gated.gate().status == 0
    assert gated.expectations_file == exp


def test_certify_fails_on_must_criteria_no_scenario_judged(tmp_path):
    session = _session(tmp_path, _run(0, "a", {"RTY-01": "PASS"}), certify=True)
    session.finish(interrupted=False)
    gate = session.gate()
    assert gate.status == 1 and gate.comparison.regressions == []
    (line,) = gate.certify
    assert line.startswith("agent-x: ") and "MUST criteria judged by no scenario" in line
    assert "RTY-01" not in line.split(": ", 2)[2].split(", ")
