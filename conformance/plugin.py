"""The conformance runner as a pytest plugin: scenario files become items, one per agent.

Inert unless ``--conformance`` (or ``--conformance-agent``) is given, so that loading it through
the ``pytest11`` entry point changes nothing for other test suites::

    pytest --conformance scenarios/criteria -k rty --junitxml=junit.xml -n 2

Theory of operation: each ``*.yaml`` scenario file collects one item per agent, named
``<scenario-id>[<agent>]``. The options come from the run options' table
(``conformance/options.py``) and open a run session (``conformance/session.py``), the one
``conformance run`` uses. An item runs its scenario through the session on a gateway owned by its
process (started on first use, stopped at session end), records every criterion's verdict as a
JUnit property, and fails when a verdict is a regression against the expectations (by default:
FAIL, ERROR, TIMEOUT, and NON-STRICT with ``--conformance-strict``). The scenario's run rides on
the test report (as a JSON string, so pytest-xdist carries it from a worker to the controller);
the controller, or the only process without xdist, records the runs in its session and alone
finishes it at session end, also after Ctrl-C (then with what ran): results JSON and report.

``conformance run -k`` and ``-n N`` run through here (:func:`run_in_pytest`): the CLI hands its
own session to the pytest run it starts in its process, which records into it; the workers open
theirs from the plugin flags the settings are written as, and the CLI finishes the session.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import yaml

from conformance.ahead import Ahead
from conformance.options import add_pytest_options, plugin_words, settings_from_pytest

if TYPE_CHECKING:  # the session module imports the runner: loaded only when a run starts
    from _pytest._code.code import TerminalRepr, TracebackStyle  # pytest's own annotations

    from conformance.session import RunSession, ScenarioRun
    from fakes import Scenario

__all__ = ["ConformanceFailure", "ScenarioFile", "ScenarioItem", "dealt", "run_in_pytest"]

T = TypeVar("T")
_KEY = "conformance"  # the report attribute that carries a scenario's results entry
_NO_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup("conformance", "agent conformance suite"))


def _active(config: pytest.Config) -> bool:
    return bool(config.getoption("conformance") or config.getoption("conformance_agent"))


class _Handoff:
    """Carries a session that ``conformance run`` opened into the pytest run it starts."""

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self.ended = False  # pytest reached the end of its session
        self.interrupted = False


class _State:
    """This process's part of the run: its session and the pytest hooks that drive it.

    Standalone, the session is this process's own and, in the process that collects the
    results, finished here. Handed over by ``conformance run``, the CLI finishes it.
    """

    def __init__(self, config: pytest.Config, session: RunSession, handoff: _Handoff | None):
        self.config = config
        self.run = session
        self.handoff = handoff
        self.labels = [a.label for a in session.agents]
        self.is_worker = bool(_workerinput(config))
        if (
            self.is_worker
        ):  # its timing measurement is labelled with it (conformance.judging.timing)
            session.process = str(_workerinput(config).get("workerid", "worker"))
        self.test_session: pytest.Session | None = None
        self.ahead: Ahead[ScenarioRun] = Ahead()  # scenarios started before their turn

    # Hooks of this run (registered as a plugin by pytest_configure).

    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        # For an agent that overlaps its runs, the next scenario starts while this one runs
        # (conformance.ahead). pytest-xdist has taken ``nextitem`` out of the worker's queue, so
        # no other worker can steal it: it is this process's next run.
        if (
            isinstance(nextitem, ScenarioItem)
            and self.run.config(self.run.agent(nextitem.agent)).ahead
        ):
            self.ahead.start(nextitem.nodeid, nextitem.run_now)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.test_session = session
        if self.is_worker:
            self.run.prepare()  # its gateway starts while this process collects

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, _KEY, None)
        if self.is_worker or report.when != "call":
            return  # workers only send; the controller (or the only process) collects
        if not data:
            quiet_terminal = self.config.pluginmanager.get_plugin("terminalreporter") is None
            if report.failed and (self.run.settings.progress or quiet_terminal):
                # The harness itself broke on this item: say so, the scenario has no entry.
                last = (report.longreprtext or "").strip().splitlines()[-1:] or ["?"]
                print(f"{report.nodeid}: harness error: {last[0]}", file=sys.stderr, flush=True)
            return
        total = getattr(self.test_session, "testscollected", 0) or 0
        self.run.record(json.loads(data), total=total)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.run.close()
        if self.is_worker:
            return
        # Also after Ctrl-C: the results and report then hold what ran.
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if self.handoff is not None:
            self.handoff.ended, self.handoff.interrupted = True, interrupted
        else:
            self.run.finish(interrupted=interrupted)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.run.document is None:
            return  # a worker, or a run that `conformance run` finishes and reports itself
        lines = []
        if self.run.settings.results is not None:
            lines.append(f"results: {self.run.settings.results}")
        if self.run.report is not None:
            lines.append(f"report: {self.run.report}")
        cmp = self.run.compare()
        lines += [f"better than expected: {f.describe()}" for f in cmp.fixed]
        lines += [f"expected: {f.describe()}" for f in cmp.expected_failures]
        if lines:
            terminalreporter.write_sep("-", "conformance")
            for line in lines:
                terminalreporter.write_line(line)


_STATE = pytest.StashKey[_State]()


def _state(config: pytest.Config) -> _State:
    return config.stash[_STATE]


def pytest_configure(config: pytest.Config) -> None:
    if not _active(config):
        return
    from conformance.session import RunInputError, RunSession

    plugins = config.pluginmanager.get_plugins()
    handoff = next((p for p in plugins if isinstance(p, _Handoff)), None)
    if handoff is not None:
        session = handoff.session
    else:
        command = "pytest " + shlex.join(str(a) for a in config.invocation_params.args)
        try:
            session = RunSession(settings_from_pytest(config), command=command)
            session.open_agents()
        except RunInputError as exc:
            raise pytest.UsageError(str(exc)) from exc
    st = _State(config, session, handoff)
    config.stash[_STATE] = st
    config.pluginmanager.register(st, "conformance-run")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths given: the bundled criteria scenarios, not the project's own tests.
        from scenarios import SCENARIO_DIR

        config.args[:] = [str(SCENARIO_DIR / "criteria")]


def run_in_pytest(session: RunSession, scenarios: list[Scenario]) -> bool:
    """Run ``session`` over ``scenarios`` through pytest and this plugin, in this process: the
    path of ``conformance run -k EXPR`` and ``-n N`` (pytest's selection, pytest-xdist's worker
    processes). The items record into ``session``; return whether the run was interrupted.
    Raises RunInputError when pytest ended before its session did (nothing to finish).
    """
    import os
    import tempfile

    from conformance.session import RunInputError
    from conformance.share import ENV as SHARE_ENV
    from conformance.share import Share

    settings = session.settings
    # With --update-expectations the run is not gated: the items judge against none.
    gating = None if settings.update_expectations else session.expectations_file
    forwarded = dataclasses.replace(settings, active=True, expectations=gating)
    files = [str(Path(s.source)) for s in scenarios]
    # Test ids relative to the scenarios' common directory, wherever they are installed.
    root = os.path.commonpath([str(Path(f).resolve().parent) for f in files])
    handoff = _Handoff(session)
    with tempfile.TemporaryDirectory(prefix="conformance-run-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")  # the user's pytest config does not apply
        words = [*files, "-c", str(ini), "--rootdir", root, "--noconftest"]
        # Only the plugins this run needs, loaded once each: no third-party plugin autoloading
        # (the user's pytest plugins and settings are not part of a conformance run).
        words += ["-p", "no:cacheprovider", "-p", "no:terminal", "-p", "conformance.plugin"]
        # The workers build their own session from these; this process uses ``session``.
        words += plugin_words(forwarded)
        if settings.keyword:
            words += ["-k", settings.keyword]
        if settings.processes > 1:
            words += ["-p", "xdist.plugin", "-n", str(settings.processes), "--dist", "worksteal"]
        # Inherited by the xdist workers: no plugin autoloading; one calibration per run, and
        # the machine held alone for a confirming run (conformance.share), when there are several
        # processes or two runs in flight in one (conformance.ahead).
        inherited = {_NO_AUTOLOAD: "1"}
        if settings.processes > 1 or session.overlaps():
            share = Path(tmp) / "share"
            share.mkdir()
            session.use_share(Share.create(share, settings.processes))
            session.hand_durations()  # read once: every process orders the scenarios alike
            inherited[SHARE_ENV] = str(share)
        saved = {k: os.environ.get(k) for k in inherited}
        os.environ.update(inherited)
        try:
            rc = pytest.main(words, plugins=[handoff])
            if handoff.ended and not handoff.interrupted:
                # The first runs are all done: the timing verdicts left to confirm now have
                # the machine to themselves (conformance.verify).
                try:
                    session.confirm_deferred(scenarios)
                except KeyboardInterrupt:
                    handoff.interrupted = True
            else:
                session.drop_deferred()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    if not handoff.ended:
        raise RunInputError(f"the pytest run ended without results (exit {int(rc)})")
    return handoff.interrupted


def _looks_like_scenario(path: Path) -> bool:
    from fakes.scenario import FAST_LOADER

    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=FAST_LOADER)
    except (OSError, yaml.YAMLError):
        return True  # let loading report the problem with file and line
    return isinstance(doc, dict) and "script" in doc


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not _active(config) or file_path.suffix not in (".yaml", ".yml"):
        return None
    read = _state(config).run.expectations_file
    if read is not None and file_path.resolve() == read.resolve():
        return None
    # Other YAML beside the scenarios (CI files, configs) is skipped unless named explicitly.
    if not parent.session.isinitpath(file_path) and not _looks_like_scenario(file_path):
        return None
    return ScenarioFile.from_parent(parent, path=file_path)


class ScenarioFile(pytest.File):
    """One scenario file: one item per agent under test."""

    def collect(self) -> Iterator[ScenarioItem]:
        from fakes import FakesError, load_scenario

        try:
            scenario = load_scenario(self.path)
        except FakesError as exc:
            raise self.CollectError(str(exc)) from exc
        state = _state(self.config)
        repeat = state.run.repeat
        for label in state.labels:
            for r in range(repeat):
                # One item per run of --repeat N, so that -n spreads the runs too.
                name = f"{scenario.id}[{label}]" + (f"[run{r + 1}]" if repeat > 1 else "")
                yield ScenarioItem.from_parent(
                    self, name=name, scenario=scenario, agent=label, repeat=r
                )


class ConformanceFailure(Exception):
    """A scenario gave verdicts that the expectations do not allow."""


class ScenarioItem(pytest.Item):
    """One scenario run by one agent."""

    def __init__(self, *, scenario: Scenario, agent: str, repeat: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.agent = agent
        self.repeat = repeat
        self.order = 0  # its place in collection order (the results' order), set on collection
        self.payload: ScenarioRun | None = None

    def run_now(self) -> ScenarioRun:
        """Run this item's scenario through the session (on this thread)."""
        run = _state(self.config).run
        return run.run_scenario(self.agent, self.scenario, index=self.order, repeat=self.repeat)

    def runtest(self) -> None:
        state = _state(self.config)
        run = state.run
        self.payload = state.ahead.result(self.nodeid, self.run_now)
        for cid, v in self.payload["verdicts"].items():
            self.user_properties.append((cid, v["verdict"]))
        if self.payload["deferred"]:
            return  # not its verdicts yet: the run judges them once it confirms them
        lines = [
            f"{cid}: verdict {v['verdict']}, expectations allow {allowed} or better\n"
            f"  expected: {v['expected']}\n  observed: {v['observed']}"
            for cid, v, allowed in run.regressions(self.payload)
        ]
        if lines:
            entry = self.payload["entry"]
            if entry.get("error"):
                lines.append(f"agent {entry['status']}: {entry['error']}")
            lines.append(f"rerun: {entry['rerun']}")
            raise ConformanceFailure("\n".join(lines))

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: TracebackStyle | None = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, ConformanceFailure):
            return f"{self.name}:\n{excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"scenario {self.name}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when == "call" and isinstance(item, ScenarioItem) and item.payload is not None:
        # A JSON string: pytest-xdist serializes report attributes to the controller.
        setattr(report, _KEY, json.dumps(item.payload, ensure_ascii=False))
    return report


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Longest scenarios first, dealt over the processes of ``-n N`` (:func:`dealt`), so that
    they end together instead of one running the longest one after another; the results keep the
    collection order. The estimate is each scenario's time in the agent's earlier run when
    ``conformance run`` knows them all (``conformance.durations``; then each process gets an
    equal share of it, two at a time for agents that overlap their runs), else what a correct
    agent may need (``conformance.judging.deadlines.floor_s``: the waits the criteria allow, at
    the run's time scale, and each attempt's own time). Deterministic, so that pytest-xdist's
    workers collect the same order."""
    if not _active(config):
        return
    from conformance.judging.deadlines import ATTEMPT_OVERHEAD_S, floor_s

    scale = _state(config).run.time_scale
    for i, item in enumerate(items):
        if isinstance(item, ScenarioItem):
            item.order = i

    def expected_s(item: pytest.Item) -> float:
        if not isinstance(item, ScenarioItem):
            return 0.0
        nominal, attempts = floor_s(item.scenario)
        return nominal * scale + attempts * ATTEMPT_OVERHEAD_S

    run = _state(config).run
    known = run.known_durations()

    def took_s(item: pytest.Item) -> float | None:
        if not isinstance(item, ScenarioItem):
            return None
        return known.get(item.agent, {}).get(item.scenario.id)

    # A worker of -n N is told N by pytest-xdist (its settings are the controller's, less -n).
    processes = max(1, int(_workerinput(config).get("workercount", 1)))
    if items and all(took_s(item) is not None for item in items):
        # Each scenario's time in the agent's earlier run (conformance.durations).
        items.sort(key=lambda item: took_s(item) or 0.0, reverse=True)
        together = 2 if all(a.adapter.overlap for a in run.agents) else 1
        items[:] = dealt(items, processes, lambda item: took_s(item) or 0.0, together)
    else:
        items.sort(key=expected_s, reverse=True)
        items[:] = dealt(items, processes)


def _workerinput(config: pytest.Config) -> dict[str, Any]:
    """What pytest-xdist tells one of its worker processes (workerid, workercount, ...); empty
    in the controller or a run without xdist. xdist sets it as an attribute of the config."""
    found: dict[str, Any] = getattr(config, "workerinput", None) or {}
    return found


def dealt(
    ordered: list[T], n: int, cost: Callable[[T], float] = lambda _: 1.0, together: int = 1
) -> list[T]:
    """``ordered`` (longest first) dealt into the contiguous parts pytest-xdist's work stealing
    hands its ``n`` processes at the start (part i: ``len // (n - i)`` of what is left), so
    that each process starts with one of the longest. Sorted alone, the first process would get
    the longest in a row and run them one after another while the others stole its short tail.

    The items go in units of ``together`` consecutive ones (2 for an agent whose runs overlap:
    a unit runs side by side, ``conformance.ahead``, and costs its longest), each unit to the
    part with the least ``cost`` so far that has room for it (the longest processing time
    first rule); with equal costs, round-robin."""
    sizes, left = [], len(ordered)
    for i in range(n):
        sizes.append(left // (n - i))
        left -= sizes[-1]
    parts: list[list[T]] = [[] for _ in range(n)]
    loads = [0.0] * n
    units = [ordered[i : i + together] for i in range(0, len(ordered), max(1, together))]
    turn = 0  # ties go round-robin, from the part after the last one dealt to
    for unit in units:
        room = [k for k in range(n) if len(parts[k]) + len(unit) <= sizes[k]]
        if not room:  # the last parts' room is one item each: the unit is split
            for item in unit:
                k = min(
                    (k for k in range(n) if len(parts[k]) < sizes[k]),
                    key=lambda k: (loads[k], (k - turn) % n),
                )
                parts[k].append(item)
                loads[k] += cost(item)
            continue
        k = min(room, key=lambda k: (loads[k], (k - turn) % n))
        parts[k] += unit
        loads[k] += max(cost(item) for item in unit)
        turn = (k + 1) % n
    return [item for part in parts for item in part]
