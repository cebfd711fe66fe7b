"""The conformance runner as a pytest plugin: scenario files become items, one per agent.

Inert unless ``--conformance`` (or ``--conformance-agent``) is given, so that loading it through
the ``pytest11`` entry point changes nothing for other test suites::

    pytest --conformance scenarios/criteria -k rty --junitxml=junit.xml -n 2

Theory of operation: each ``*.yaml`` scenario file collects one item per agent, named
``<scenario-id>[<agent>]``. An item runs ``runner.run_scenario`` on a gateway owned by its
process (started on first use, stopped at session end), records every criterion's verdict as a
JUnit property, and fails when a verdict is a regression against the expectations (by default:
FAIL, ERROR, TIMEOUT, and NON-STRICT with ``--conformance-strict``). The scenario's results entry
rides on the test report (as a JSON string, so pytest-xdist carries it from a worker to the
controller); the controller, or the only process without xdist, collects the entries and alone
writes the results JSON and the report at session end, also after Ctrl-C (then of what ran).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = ["ConformanceFailure", "ScenarioFile", "ScenarioItem"]

_KEY = "conformance"  # the report attribute that carries a scenario's results entry


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "agent conformance suite")
    group.addoption(
        "--conformance",
        action="store_true",
        default=False,
        help="collect scenario YAML files (default: the bundled criteria scenarios) as tests",
    )
    group.addoption(
        "--conformance-agent",
        action="append",
        default=None,
        metavar="SPEC",
        help="agent under test: 'reference', 'openai-sdk' or 'cmd:COMMAND' "
        "(repeatable: one item per scenario and agent; default: reference)",
    )
    group.addoption(
        "--conformance-time-scale",
        type=float,
        default=None,
        metavar="S",
        help="multiply every scenario duration by S, in (0, 1] (default 0.02)",
    )
    group.addoption(
        "--conformance-results", default=None, metavar="FILE", help="write results JSON here"
    )
    group.addoption(
        "--conformance-report-dir",
        default=None,
        metavar="DIR",
        help="write the HTML, JUnit and Markdown report here",
    )
    group.addoption(
        "--conformance-strict",
        action="store_true",
        default=False,
        help="NON-STRICT verdicts fail their scenario",
    )
    group.addoption(
        "--conformance-expectations",
        default=None,
        metavar="FILE",
        help="expectations YAML: verdicts that are known and do not fail",
    )
    group.addoption(
        "--conformance-dialect",
        default="openai_chat",
        choices=("openai_chat", "anthropic_messages", "openai_responses"),
        help="the wire dialect the agents are served in (default: openai_chat)",
    )
    # Used by `conformance run`: its own progress lines and the command it records.
    group.addoption(
        "--conformance-progress", action="store_true", default=False, help="==SUPPRESS=="
    )
    group.addoption("--conformance-command", default=None, help="==SUPPRESS==")


def _active(config: pytest.Config) -> bool:
    return bool(config.getoption("conformance") or config.getoption("conformance_agent"))


class _State:
    """Per-process state: options, adapters, the lazily started gateway, collected entries."""

    def __init__(self, config: pytest.Config) -> None:
        from conformance.adapters import make_adapter
        from conformance.expectations import Expectations, ExpectationsError, load_expectations
        from conformance.runner import DEFAULT_TIME_SCALE

        self.config = config
        self.specs: list[str] = list(config.getoption("conformance_agent") or ["reference"])
        scale = config.getoption("conformance_time_scale")
        self.time_scale = DEFAULT_TIME_SCALE if scale is None else scale
        if not 0 < self.time_scale <= 1:
            raise pytest.UsageError(
                f"--conformance-time-scale must be in (0, 1], got {self.time_scale}"
            )
        self.strict: bool = config.getoption("conformance_strict")
        self.dialect: str = config.getoption("conformance_dialect") or "openai_chat"
        self.labels: list[str] = []
        self._adapters: dict[str, Any] = {}
        for spec in self.specs:
            try:
                adapter = make_adapter(spec)
            except ValueError as exc:
                raise pytest.UsageError(f"--conformance-agent: {exc}") from exc
            label, n = adapter.name, 2
            while label in self.labels:  # the same agent twice: keep the labels apart
                label, n = f"{adapter.name}#{n}", n + 1
            self.labels.append(label)
            self._adapters[label] = adapter
        exp = config.getoption("conformance_expectations")
        self.expectations_path = Path(exp).resolve() if exp else None
        try:
            self.expectations = load_expectations(exp) if exp else Expectations()
        except ExpectationsError as exc:
            raise pytest.UsageError(str(exc)) from exc
        self.is_worker = hasattr(config, "workerinput")
        self.started = time.time()
        self.runs: list[dict] = []
        self.session: pytest.Session | None = None
        self._stack = contextlib.ExitStack()
        self._gateway: Any = None
        self.summary: list[str] = []

    def adapter(self, label: str) -> Any:
        return self._adapters[label]

    def spec(self, label: str) -> str:
        return self.specs[self.labels.index(label)]

    def gateway(self) -> Any:
        if self._gateway is None:
            from fakes import Gateway

            self._gateway = self._stack.enter_context(Gateway.running())
        return self._gateway

    def close(self) -> None:
        self._gateway = None
        self._stack.close()

    # Hooks of this run (registered as a plugin by pytest_configure).

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, _KEY, None)
        if self.is_worker or report.when != "call":
            return  # workers only send; the controller (or the only process) collects
        if not data:
            quiet_terminal = self.config.pluginmanager.get_plugin("terminalreporter") is None
            if report.failed and (self.config.getoption("conformance_progress") or quiet_terminal):
                # The harness itself broke on this item: say so, the scenario has no entry.
                last = (report.longreprtext or "").strip().splitlines()[-1:] or ["?"]
                print(f"{report.nodeid}: harness error: {last[0]}", file=sys.stderr, flush=True)
            return
        run = json.loads(data)
        self.runs.append(run)
        if self.config.getoption("conformance_progress"):
            from conformance.runner import progress_line

            done = len(self.runs)
            total = max(getattr(self.session, "testscollected", 0) or 0, done)
            line = progress_line(done, total, run["entry"], run["verdicts"])
            if len(self.labels) > 1:
                line += f" [{run['agent']}]"
            print(line, file=sys.stderr, flush=True)

    def results(self, *, interrupted: bool) -> dict:
        """The results document of the entries collected so far, in collection order."""
        from conformance.runner import agent_results, results_document

        agents = []
        for label in self.labels:
            runs = sorted((r for r in self.runs if r["agent"] == label), key=lambda r: r["index"])
            if runs:
                agents.append(
                    agent_results(
                        label,
                        runs[0]["adapter"],
                        runs[0]["capabilities"],
                        [(r["entry"], r["verdicts"]) for r in runs],
                    )
                )
        command = self.config.getoption("conformance_command") or "pytest " + shlex.join(
            str(a) for a in self.config.invocation_params.args
        )
        return results_document(
            agents,
            started=self.started,
            time_scale=self.time_scale,
            interrupted=interrupted,
            command=command,
            dialect=self.dialect,
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.close()
        if self.is_worker:
            return
        # Also after Ctrl-C: the results and report then hold what ran.
        doc = self.results(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        results = self.config.getoption("conformance_results")
        if results:
            path = Path(results)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
            tmp.replace(path)  # atomic: a reader never sees half a file
            self.summary.append(f"results: {path}")
        report_dir = self.config.getoption("conformance_report_dir")
        if report_dir and doc["agents"]:
            from reports import render

            self.summary.append(f"report: {render([doc], Path(report_dir))}")
        from conformance.expectations import compare_results

        cmp = compare_results(doc, self.expectations, strict=self.strict)
        self.summary += [f"better than expected: {f.describe()}" for f in cmp.fixed]
        self.summary += [f"expected: {f.describe()}" for f in cmp.expected_failures]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary:
            terminalreporter.write_sep("-", "conformance")
            for line in self.summary:
                terminalreporter.write_line(line)


_STATE = pytest.StashKey[_State]()


def _state(config: pytest.Config) -> _State:
    return config.stash[_STATE]


def pytest_configure(config: pytest.Config) -> None:
    if not _active(config):
        return
    st = _State(config)
    config.stash[_STATE] = st
    config.pluginmanager.register(st, "conformance-run")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths given: the bundled criteria scenarios, not the project's own tests.
        from scenarios import SCENARIO_DIR

        config.args[:] = [str(SCENARIO_DIR / "criteria")]


def _looks_like_scenario(path: Path) -> bool:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return True  # let loading report the problem with file and line
    return isinstance(doc, dict) and "script" in doc


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not _active(config) or file_path.suffix not in (".yaml", ".yml"):
        return None
    st = _state(config)
    if st.expectations_path is not None and file_path.resolve() == st.expectations_path:
        return None
    # Other YAML beside the scenarios (CI files, configs) is skipped unless named explicitly.
    if not parent.session.isinitpath(file_path) and not _looks_like_scenario(file_path):
        return None
    return ScenarioFile.from_parent(parent, path=file_path)


class ScenarioFile(pytest.File):
    """One scenario file: one item per agent under test."""

    def collect(self):
        from fakes import FakesError, load_scenario

        try:
            scenario = load_scenario(self.path)
        except FakesError as exc:
            raise self.CollectError(str(exc)) from exc
        for label in _state(self.config).labels:
            yield ScenarioItem.from_parent(
                self, name=f"{scenario.id}[{label}]", scenario=scenario, agent=label
            )


class ConformanceFailure(Exception):
    """A scenario gave verdicts that the expectations do not allow."""


class ScenarioItem(pytest.Item):
    """One scenario run by one agent."""

    def __init__(self, *, scenario: Any, agent: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.agent = agent
        self.payload: dict | None = None

    def runtest(self) -> None:
        from conformance.runner import rerun_command, run_scenario

        st = _state(self.config)
        adapter = st.adapter(self.agent)
        entry, verdicts = run_scenario(
            st.gateway(),
            adapter,
            self.scenario,
            time_scale=st.time_scale,
            rerun=rerun_command(self.scenario, st.spec(self.agent), st.dialect),
            dialect=st.dialect,
        )
        index = self.session.items.index(self) if self in self.session.items else 0
        self.payload = {
            "agent": self.agent,
            "adapter": adapter.name,
            "capabilities": sorted(adapter.capabilities()),
            "index": index,
            "entry": entry,
            "verdicts": verdicts,
        }
        for cid, v in verdicts.items():
            self.user_properties.append((cid, v["verdict"]))
        lines = []
        for cid, v in verdicts.items():
            kind, finding = st.expectations.judge(self.agent, cid, v["verdict"], strict=st.strict)
            if kind != "regression":
                continue
            allowed = finding.expected or ("PASS" if st.strict else "NON-STRICT")
            lines.append(
                f"{cid}: verdict {v['verdict']}, expectations allow {allowed} or better\n"
                f"  expected: {v['expected']}\n  observed: {v['observed']}"
            )
        if lines:
            if entry.get("error"):
                lines.append(f"agent {entry['status']}: {entry['error']}")
            lines.append(f"rerun: {entry['rerun']}")
            raise ConformanceFailure("\n".join(lines))

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, ConformanceFailure):
            return f"{self.name}:\n{excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"scenario {self.name}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if call.when == "call" and isinstance(item, ScenarioItem) and item.payload is not None:
        # A JSON string: pytest-xdist serializes report attributes to the controller.
        setattr(report, _KEY, json.dumps(item.payload, ensure_ascii=False))
    return report
