"""One conformance run, as ``conformance run`` and the pytest plugin both drive it.

Theory of operation: a front end reads its command line into :class:`RunSettings`
(``conformance/options.py``) and opens a :class:`RunSession` on them, which resolves the input at
once: the time scale, the expectations file, then the agents (:meth:`RunSession.open_agents`) and,
for the CLI, the scenarios (:meth:`RunSession.load_scenarios`; under pytest, collection finds
them). Bad input raises :class:`RunInputError`, whose message names what is wrong and where: the
CLI exits 2 with it, the plugin makes it a pytest usage error.

The scenarios run either in this process, in order (:meth:`RunSession.run_in_process`; Ctrl-C or
SIGTERM stops it and keeps what ran), or one per pytest item (:meth:`RunSession.run_scenario` in
whichever process runs the item, :meth:`RunSession.record` in the one that collects the results:
the only process, or pytest-xdist's controller). Either way :meth:`RunSession.finish` then builds
the results document of what ran, an interrupted run's too, writes it and renders the report, and
:meth:`RunSession.gate` compares it with the expectations (or rewrites them) and, in certification
mode, adds the certification problems: the exit status of ``conformance run``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from conformance.adapters.interface import Adapter, FastClock
from conformance.durations import DurationsKey, read_durations, write_durations
from conformance.errors import ConformanceError
from conformance.expectations import (
    Comparison,
    Expectations,
    ExpectationsError,
    best_run,
    compare_results,
    load_expectations,
    updated_expectations,
    write_expectations,
)
from conformance.judging.reaction import NO_REACTION, Reaction
from conformance.judging.timing import DEFAULT_TIMING, Timing, measure, run_timing
from conformance.options import DEFAULT_EXPECTATIONS, RunSettings
from conformance.repeat import combine
from conformance.results import AgentResults, ResultsDocument, ScenarioEntry, ScenarioVerdict
from conformance.runner import (
    DEFAULT_TIME_SCALE,
    RunConfig,
    agent_results,
    attempts,
    progress_line,
    rerun_command,
    results_document,
    run_checked,
    run_suite,
)
from conformance.share import Share
from conformance.verify import beside, needs_more

DURATIONS = "durations.json"  # in the run's share folder: the agents' earlier durations

if TYPE_CHECKING:
    from fakes import GatewayHandle, Scenario
    from fakes.remote import GatewayProcess

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "AgentUnderTest",
    "Gate",
    "RunInputError",
    "RunSession",
    "ScenarioRun",
    "certify_problems",
    "select_shard",
    "sigterm_as_interrupt",
]

# The exit statuses of `conformance run` (its --help epilog and docs/ci.md say what they mean).
EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class RunInputError(ConformanceError):
    """Bad input to a run: an option value, a scenario, an agent or an expectations file. The
    message names which, and where."""


@dataclass(frozen=True)
class AgentUnderTest:
    label: str  # its name in the results: the adapter's, numbered when the same agent runs twice
    spec: str  # as the command line gave it (a rerun line names it so)
    adapter: Adapter


class ScenarioRun(TypedDict):
    """One scenario run by one agent, as a pytest item reports it (JSON: pytest-xdist carries it
    from a worker to the controller)."""

    agent: str  # the AgentUnderTest label
    adapter: str
    capabilities: list[str]
    index: int  # the item's place in collection order
    repeat: int  # which of the scenario's --repeat runs (from 0)
    entry: ScenarioEntry  # runner.run_scenario's results entry
    verdicts: dict[str, ScenarioVerdict]  # and its verdicts
    timing: dict[
        str, Any
    ]  # the timing allowances it was judged with (conformance.judging.timing.Timing)
    took_s: float  # the item's run, its confirmations and reruns included (conformance.durations)
    # Its first run only: a timing verdict to confirm once the run's other runs are done
    # (RunSession.confirm_deferred); its verdicts are not the run's yet.
    deferred: bool


@dataclass(frozen=True)
class Gate:
    """How a finished run stands: the exit status of ``conformance run`` and why."""

    status: int
    comparison: Comparison | None = None  # None: not compared (nothing ran, interrupted, updated)
    certify: tuple[str, ...] = ()  # certification problems (certify mode)
    wrote: Path | None = None  # the expectations file written (update_expectations)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the run lasts, SIGTERM is handled like Ctrl-C (a KeyboardInterrupt), so that a run
    a CI job cancels still leaves the results and report of what ran."""

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RunSession:
    """One run: its settings and input, the scenario runs so far, and its results."""

    def __init__(self, settings: RunSettings, *, command: str) -> None:
        self.settings = settings
        self.command = command  # recorded in the results: the words this run was given
        scale = settings.time_scale
        self.time_scale = DEFAULT_TIME_SCALE if scale is None else scale
        if not 0 < self.time_scale <= 1:
            flag = settings.flag_of("time_scale")
            raise RunInputError(f"{flag} must be in (0, 1], got {self.time_scale}")
        if settings.processes < 1:
            flag = settings.flag_of("processes")
            raise RunInputError(f"{flag} must be at least 1, got {settings.processes}")
        self.repeat = 1 if settings.repeat is None else settings.repeat
        if self.repeat < 1:
            flag = settings.flag_of("repeat")
            raise RunInputError(f"{flag} must be at least 1, got {settings.repeat}")
        self.verify = settings.verify or 0
        if self.verify < 0:
            flag = settings.flag_of("verify")
            raise RunInputError(f"{flag} must be 0 or more, got {settings.verify}")
        if settings.shard is not None and settings.update_expectations:
            # Each part would rewrite the file from its own verdicts only.
            raise RunInputError(
                f"{settings.flag_of('update_expectations')} cannot be used with "
                f"{settings.flag_of('shard')}: update the expectations from an unsharded run"
            )
        self.selection: dict[str, Any] | None = None  # run.shard of the results, once sharded
        # --update-expectations writes the default file when none is named.
        self.expectations_path = settings.expectations or (
            DEFAULT_EXPECTATIONS if settings.update_expectations else None
        )
        self.expectations, self.expectations_file = self._load_expectations()
        self.agents: list[AgentUnderTest] = []
        self.started = time.time()
        self.interrupted = False
        self.document: ResultsDocument | None = None  # set by finish()
        self.report: Path | None = None  # the report's index.html, once rendered
        self._runs: list[ScenarioRun] = []
        self._agent_results: list[AgentResults] | None = None  # from run_in_process
        self._stack = contextlib.ExitStack()
        self._gateway: GatewayHandle | None = None
        self._starting: GatewayProcess | None = None  # launched, not yet waited for
        self.process = "main"  # which of the run's processes this is (the xdist worker's id)
        self.timing: Timing = DEFAULT_TIMING  # this process's, once its gateway started
        self._calibrations: dict[str, dict[str, Any]] = {}  # every process's, by process
        self._reactions: dict[str, Reaction] = {}  # each agent's in this process, by label
        self._share = Share.from_env()  # what one process of the run measures for all
        self._took: dict[str, dict[str, float]] = {}  # label: {scenario id: seconds it took}
        # Starting the gateway and measuring an agent, once each in this process.
        self._starting_lock = threading.RLock()

    # --- input ---------------------------------------------------------------------------------

    def _load_expectations(self) -> tuple[Expectations, Path | None]:
        """The expectations and the file they were read from (None: none was read)."""
        path = self.expectations_path
        if path is None:
            return Expectations(), None
        if self.settings.update_expectations and not path.exists():
            return Expectations([], str(path)), None  # to be written from this run
        try:
            return load_expectations(path), path
        except ExpectationsError as exc:
            raise RunInputError(str(exc)) from exc

    def open_agents(self, *, greet: bool = False) -> None:
        """Build an adapter per agent; with ``greet``, each must say hello (its capabilities)
        now, so that an agent that cannot start is bad input rather than a run of errors."""
        # Looked up when called, not imported: a test may put a stand-in there.
        from conformance.adapters import base

        flag = self.settings.flag_of("agent")
        labels = [a.label for a in self.agents]
        for spec in self.settings.agent:
            try:
                adapter = base.make_adapter(spec)
                if greet:
                    adapter.capabilities()
            except (ValueError, RuntimeError) as exc:
                raise RunInputError(f"{flag}: {exc}") from exc
            label, n = adapter.name, 2
            while label in labels:  # the same agent twice: keep the labels apart
                label, n = f"{adapter.name}#{n}", n + 1
            labels.append(label)
            self.agents.append(AgentUnderTest(label, spec, adapter))

    def agent(self, label: str) -> AgentUnderTest:
        return next(a for a in self.agents if a.label == label)

    def load_scenarios(self) -> list[Any]:
        """The scenarios the settings name (default: the bundled criteria scenarios)."""
        from fakes import FakesError, load_scenarios
        from scenarios import SCENARIO_DIR

        found = []
        for path in self.settings.scenario or (SCENARIO_DIR / "criteria",):
            if not path.exists():
                raise RunInputError(f"{path}: no such scenario file or directory")
            try:
                found += load_scenarios(path)
            except FakesError as exc:
                raise RunInputError(str(exc)) from exc
        if not found:
            raise RunInputError("no scenarios found")
        if self.settings.shard is not None:
            found, self.selection = select_shard(found, *self.settings.shard)
        return found

    # --- running -------------------------------------------------------------------------------

    def gateway(self) -> GatewayHandle:
        """This process's fake gateway, in a process of its own, started on first use (and the
        machine's timing calibrated then: ``conformance.judging.timing``) and stopped by :meth:`close`."""
        with self._starting_lock:  # two runs in flight may both be the first (conformance.ahead)
            return self._gateway_started()

    def _gateway_started(self) -> GatewayHandle:
        if self._gateway is None:
            gateway = self._launched()
            self._starting = None
            gateway.start()
            self.timing = measure(gateway, process=self.process)
            self._calibrations[self.process] = self.timing.as_dict()
            self._gateway = gateway
        return self._gateway

    def prepare(self) -> None:
        """Launch this process's gateway now, not waiting for it: its process starts while this
        one collects the scenarios (a worker of ``-n N``); :meth:`gateway` then waits for it."""
        if self._gateway is None:
            self._launched()

    def _launched(self) -> GatewayProcess:
        if self._starting is None:
            from fakes.remote import GatewayProcess

            self._starting = GatewayProcess()
            self._stack.callback(self._starting.stop)
            self._starting.launch()
        return self._starting

    def ready(self, agent: AgentUnderTest) -> Reaction:
        """Before an agent's first scenario in this process: calibrate its fast clock when it
        asks for one (conformance.calibration; once per run, conformance.share), else measure
        its reaction (conformance.judging.reaction), under this run's own parallelism. Returns
        its reaction."""
        with self._starting_lock:
            return self._ready(agent)

    def _ready(self, agent: AgentUnderTest) -> Reaction:
        known = self._reactions.get(agent.label)
        if known is not None:
            return known
        adapter = agent.adapter
        clock = adapter.fast_clock
        reaction = NO_REACTION
        if clock is not None and clock.needs_calibration():
            from conformance import calibration
            from conformance.calibration import ClockChoice

            def measure(clock: FastClock = clock) -> dict[str, Any]:
                dialect, identity = self.settings.dialect, clock.clock_identity()
                kept = None
                if not self.settings.recalibrate:  # an earlier run's, on this machine
                    kept = calibration.kept_choice(identity, dialect)
                if kept is not None:
                    kept.adopt(clock)
                    return kept.as_json()
                choice = calibration.choose_clock(self.gateway(), adapter, dialect)
                if choice is None:
                    return {}
                calibration.keep_choice(identity, dialect, choice)
                return choice.as_json()

            # One calibration for the whole run: the first process calibrates, the others wait
            # for it and take its choice (conformance.share).
            found, here = self._share.once(f"clock of {agent.label}", measure)
            if not here and found:
                ClockChoice.from_json(found).adopt(clock)
            if self.settings.progress:
                whose = "" if here else " (the choice of another process of the run)"
                _say(f"[clock] {adapter.name}: {clock.warp_note}{whose}")
        elif clock is None and "time_scale" in adapter.capabilities():
            from conformance.calibration import measure_reaction

            reaction = measure_reaction(
                self.gateway(),
                adapter,
                scale=self.time_scale,
                dialect=self.settings.dialect,
                tool_transport=self.settings.tool_transport,
            )
            if self.settings.progress:
                _say(f"[reaction] {agent.label}: {reaction.note}")
        self._reactions[agent.label] = reaction
        return reaction

    def close(self) -> None:
        self._gateway = self._starting = None
        self._stack.close()

    def run_in_process(self, scenarios: list[Any]) -> bool:
        """Run every agent over ``scenarios`` (longest first where known, :meth:`longest_first`;
        the results in the order given); return whether Ctrl-C or SIGTERM stopped it (the
        scenario in flight is then dropped whole, the ones that ran are kept)."""
        stop = threading.Event()
        dialect, transport = self.settings.dialect, self.settings.tool_transport
        agents = []
        if self._share.folder is None and self.overlaps():
            # Two runs in flight: a confirming run holds the machine against the other one.
            folder = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="conformance-"))
            self.use_share(Share.create(Path(folder), processes=1))
        try:
            for agent in self.agents:
                spec = agent.spec
                reaction = self.ready(agent)

                def rerun(s: Scenario, spec: str = spec) -> str:
                    return rerun_command(s, spec, dialect, transport)

                gateway = self.gateway()
                result = run_suite(
                    gateway,
                    agent.adapter,
                    scenarios,
                    time_scale=self.time_scale,
                    rerun=rerun,
                    progress=_say if self.settings.progress else None,
                    stop=stop,
                    dialect=dialect,
                    timing=self.timing,
                    verify=self.verify,
                    tool_transport=transport,
                    reaction=reaction,
                    repeat=self.repeat,
                    config=self.config(agent),
                    took=self._took.setdefault(agent.label, {}),
                    order=self.longest_first(agent, scenarios),
                )
                result["name"] = agent.label
                agents.append(result)
                if stop.is_set():
                    break
        finally:
            self.close()
        self._agent_results = agents
        return stop.is_set()

    def longest_first(self, agent: AgentUnderTest, scenarios: list[Any]) -> list[int] | None:
        """The order of a run in one process: longest first when the agent's earlier durations
        (over what its adapter knows it takes) name every scenario, so that two runs in flight
        (``conformance.ahead``) pair long with long and the longest do not start last; None (the
        order given) otherwise."""
        known = self._earlier_durations(agent)
        if not all(s.id in known for s in scenarios):
            return None
        return sorted(range(len(scenarios)), key=lambda i: -known[scenarios[i].id])

    def _earlier_durations(self, agent: AgentUnderTest) -> dict[str, float]:
        # The run's own times over what the adapter knows: a run of a few scenarios (-k) leaves
        # the others ordered as before.
        return {
            **agent.adapter.typical_durations(),
            **read_durations(self.durations_key(agent.label)),
        }

    def durations_key(self, label: str) -> DurationsKey:
        """Whose earlier durations order this run's scenarios of ``label`` (conformance.durations)."""
        s = self.settings
        return (label, s.dialect, s.tool_transport, self.time_scale)

    def known_durations(self) -> dict[str, dict[str, float]]:
        """{agent label: {scenario id: seconds}} that ``conformance run`` handed this run's
        processes (conformance.durations); empty when it handed none."""
        found = self._share.read_json(DURATIONS)
        return found if isinstance(found, dict) else {}

    def hand_durations(self) -> None:
        """Read each agent's earlier durations once (over what its adapter knows it takes) and
        hand them to the run's processes."""
        self._share.write_json(
            DURATIONS, {a.label: self._earlier_durations(a) for a in self.agents}
        )

    def overlaps(self) -> bool:
        """Whether an agent of the run overlaps its runs (``conformance.ahead``)."""
        return any(a.adapter.overlap for a in self.agents)

    def use_share(self, share: Share) -> None:
        """Share measurements and the machine through ``share`` (``conformance.share``): the
        run's, made by the process that starts it after this session was opened."""
        self._share = share

    def config(self, agent: AgentUnderTest) -> RunConfig:
        """How this process runs and judges ``agent``'s scenarios (its timing once calibrated).
        A run of it shares the machine when the run has other processes or it overlaps its runs,
        and it overlaps them, only when there is a folder to hold the machine through."""
        held = self._share.folder is not None
        return RunConfig(
            time_scale=self.time_scale,
            dialect=self.settings.dialect,
            tool_transport=self.settings.tool_transport,
            timing=self.timing,
            verify=self.verify,
            repeat=self.repeat,
            hold=self._share.hold,
            shared=held and (self._share.processes > 1 or agent.adapter.overlap),
            ahead=held and agent.adapter.overlap,
        )

    def run_scenario(
        self, label: str, scenario: Scenario, *, index: int, repeat: int = 0
    ) -> ScenarioRun:
        """Run one scenario with the agent ``label`` (a pytest item's run; ``repeat``: which of
        the scenario's ``--repeat`` runs it is, from 0)."""
        agent = self.agent(label)
        dialect, transport = self.settings.dialect, self.settings.tool_transport
        reaction = self.ready(agent)
        gateway = self.gateway()
        began = time.monotonic()
        rerun = rerun_command(scenario, agent.spec, dialect, transport)
        config = self.config(agent)
        deferred = False
        if self._share.processes > 1:
            # The run's other processes would each finish their scenario before a confirming
            # run could have the machine: it waits until they are all done instead.
            once = attempts(gateway, agent.adapter, scenario, config, rerun, reaction)
            # A failure the run's load may explain is run again at once, beside the others: a
            # confirmation at the end would have the whole scenario's time to itself.
            entry, verdicts = beside(once("first"), once)
            # A timing verdict to confirm, or --verify reruns: run_checked finishes it later.
            deferred = needs_more((entry, verdicts), config.verify)
        else:
            entry, verdicts = run_checked(gateway, agent.adapter, scenario, config, rerun, reaction)
        return {
            "agent": label,
            "adapter": agent.adapter.name,
            "capabilities": sorted(agent.adapter.capabilities()),
            "index": index,
            "repeat": repeat,
            "entry": entry,
            "verdicts": verdicts,
            "timing": self.timing.as_dict(),
            "took_s": time.monotonic() - began,
            "deferred": deferred,
        }

    def drop_deferred(self) -> None:
        """Drop the recorded runs whose verdicts were left to confirm (an interrupted run)."""
        self._runs = [r for r in self._runs if not r.get("deferred")]

    def confirm_deferred(self, scenarios: list[Scenario]) -> None:
        """Finish the recorded runs whose timing verdicts wait for a confirmation (or for the
        reruns of ``--verify``), now that the run's other processes are done: in this process,
        one after another, with nothing else of the run in flight (``conformance.verify``).
        Ctrl-C drops the runs not finished yet, like a scenario in flight."""
        todo = [i for i, r in enumerate(self._runs) if r.get("deferred")]
        if not todo:
            return
        by_id = {s.id: s for s in scenarios}
        try:
            for k, i in enumerate(todo, 1):
                run = self._runs[i]
                agent = self.agent(run["agent"])
                reaction = self.ready(agent)
                began = time.monotonic()
                entry, verdicts = run_checked(
                    self.gateway(),
                    agent.adapter,
                    by_id[run["entry"]["id"]],
                    self.config(agent),
                    run["entry"]["rerun"],
                    reaction,
                    first=(run["entry"], run["verdicts"]),
                )
                took = run["took_s"] + time.monotonic() - began
                self._runs[i] = {
                    **run,
                    "entry": entry,
                    "verdicts": verdicts,
                    "took_s": took,
                    "deferred": False,
                }
                self._took.setdefault(run["agent"], {})[entry["id"]] = took
                if self.settings.progress:
                    line = progress_line(k, len(todo), entry, verdicts)
                    _say(line.replace("[", "[confirmed ", 1))
        finally:
            self.drop_deferred()
            self.close()

    def regressions(self, run: ScenarioRun) -> list[tuple[str, ScenarioVerdict, str]]:
        """The verdicts of one scenario run that the expectations do not allow, as (criterion,
        verdict entry, the worst verdict allowed)."""
        strict = self.settings.strict
        found = []
        for cid, v in run["verdicts"].items():
            kind, finding = self.expectations.judge(
                run["agent"], cid, v["verdict"], strict=strict, flaky_best=best_run(v)
            )
            if kind == "regression":
                found.append((cid, v, finding.expected or ("PASS" if strict else "NON-STRICT")))
        return found

    def record(self, run: ScenarioRun, *, total: int = 0) -> None:
        """Keep one scenario run for the results (``total``: how many are to run)."""
        self._runs.append(run)
        self._took.setdefault(run["agent"], {})[run["entry"]["id"]] = run.get("took_s", 0.0)
        timing = run.get("timing")
        if timing and timing.get("harness") is not None:
            self._calibrations.setdefault(str(timing.get("process")), timing)
        if self.settings.progress:
            done = len(self._runs)
            line = progress_line(done, max(total, done), run["entry"], run["verdicts"])
            if run.get("deferred"):
                line += " (timing to confirm once the other scenarios are done)"
            if len(self.agents) > 1:
                line += f" [{run['agent']}]"
            _say(line)

    # --- results -------------------------------------------------------------------------------

    def _agents_of_runs(self) -> list[AgentResults]:
        """The agents' results entries of the recorded runs, in collection order, the runs of
        one scenario (``--repeat``) joined (``conformance.repeat``)."""
        agents = []
        for agent in self.agents:
            runs = sorted((r for r in self._runs if r["agent"] == agent.label), key=_index)
            by_scenario: dict[str, list[ScenarioRun]] = {}
            for r in runs:
                by_scenario.setdefault(r["entry"]["id"], []).append(r)
            joined = [
                combine(
                    [
                        (r["entry"], r["verdicts"])
                        for r in sorted(group, key=lambda r: r.get("repeat", 0))
                    ]
                )
                for group in by_scenario.values()
            ]
            if runs:
                agents.append(
                    agent_results(
                        agent.label,
                        runs[0]["adapter"],
                        runs[0]["capabilities"],
                        joined,
                        traits=agent.adapter.traits,
                    )
                )
        return agents

    def finish(self, *, interrupted: bool) -> ResultsDocument:
        """Build the results document of what ran, write it and render the report."""
        self.interrupted = interrupted
        agents = self._agent_results
        doc = results_document(
            self._agents_of_runs() if agents is None else agents,
            started=self.started,
            time_scale=self.time_scale,
            interrupted=interrupted,
            command=self.command,
            dialect=self.settings.dialect,
            tool_transport=self.settings.tool_transport,
            timing=run_timing(list(self._calibrations.values())),
            repeat=self.repeat,
        )
        if self.selection is not None:
            doc["run"]["shard"] = dict(self.selection)  # reports.merge joins the parts
        self.document = doc
        for label, took in self._took.items():
            write_durations(self.durations_key(label), took)  # the next run's order
        path = self.settings.results
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
            tmp.replace(path)  # atomic: a reader never sees half a file
        if self.settings.bundle is not None:
            from conformance.bundle import write_bundle

            write_bundle(doc, self.settings.bundle)
        if self.settings.report_dir is not None and doc["agents"]:
            from reports import render

            # Built here, by code whose documents the tests hold to results.schema.json
            # (tests/test_run.py): validating it again would only lengthen every run.
            self.report = render(
                [cast(dict[str, Any], doc)], self.settings.report_dir, validated=True
            )
            if self.settings.junit is not None:
                shutil.copyfile(self.report.parent / "junit.xml", self.settings.junit)
        return doc

    def compare(self) -> Comparison:
        """The finished run against the expectations."""
        return compare_results(self._finished(), self.expectations, strict=self.settings.strict)

    def gate(self) -> Gate:
        """The exit status of the finished run: 2 when nothing ran, 130 when interrupted (the
        expectations are then not updated), else 0 or 1 by the expectations, or by the
        certification problems in certify mode; with update_expectations, write them instead."""
        doc = self._finished()
        if not doc["agents"]:
            return Gate(EXIT_INTERRUPTED if self.interrupted else EXIT_BAD_INPUT)
        if self.interrupted:
            return Gate(EXIT_INTERRUPTED)
        if self.settings.update_expectations:
            path = self.expectations_path or DEFAULT_EXPECTATIONS
            strict = self.settings.strict
            write_expectations(path, updated_expectations(doc, self.expectations, strict=strict))
            return Gate(EXIT_OK, wrote=path)
        comparison = self.compare()
        # A part of a sharded run cannot tell which MUST criteria the whole run judged: that
        # is certified once the parts are merged (`conformance report --certify`).
        coverage = self.settings.shard is None
        problems = tuple(certify_problems(doc, coverage=coverage)) if self.settings.certify else ()
        failed = comparison.regressions or problems
        return Gate(EXIT_REGRESSION if failed else EXIT_OK, comparison, problems)

    def _finished(self) -> ResultsDocument:
        if self.document is None:
            raise RuntimeError("the run is not finished: call finish() first")
        return self.document


def select_shard(scenarios: list[Any], k: int, n: int) -> tuple[list[Any], dict[str, Any]]:
    """Part ``k`` of ``n`` of ``scenarios`` and the record of it for the results' run.shard.

    The scenarios sorted by id (then file), every n-th from the k-th, kept in the selection's
    own order: the same selection always splits the same way, whatever order it was named in;
    the parts are disjoint, cover it, and differ in size by one at most.
    """
    ordered = sorted(scenarios, key=lambda s: (s.id, str(s.source)))
    mine = {id(s) for s in ordered[k - 1 :: n]}
    ids = "\n".join(s.id for s in ordered)
    record = {
        "index": k,
        "count": n,
        "selected": len(ordered),
        "selection": hashlib.sha256(ids.encode()).hexdigest()[:16],
    }
    return [s for s in scenarios if id(s) in mine], record


def _index(run: ScenarioRun) -> int:
    return run["index"]


def certify_problems(doc: Mapping[str, Any], *, coverage: bool = True) -> list[str]:
    """Certification mode: outside connection attempts of guarded agents, then (``coverage``)
    per agent the shards of its run that are missing and the MUST criteria no scenario judged
    (UNSUPPORTED is reported apart: the report counts it; a certificate states it)."""
    from conformance.adapters.guard import certify_problems as outside_attempts
    from reports.model import build_report

    lines = outside_attempts(doc)
    if not coverage:
        return lines
    report = build_report([dict(doc)])
    for agent, missing, count in report.incomplete():
        lines.append(
            f"{agent.name}: shard(s) {', '.join(map(str, missing))} of {count} missing: the "
            "scenarios there were not judged"
        )
    for agent in report.agents:
        unjudged = report.must_unjudged(agent)
        if unjudged:
            lines.append(
                f"{agent.name}: {len(unjudged)} MUST criteria judged by no scenario "
                f"(not run, only n/a, ERROR or TIMEOUT): {', '.join(unjudged)}"
            )
        unsettled = report.must_unsettled(agent)
        if unsettled:
            lines.append(
                f"{agent.name}: {len(unsettled)} MUST criteria judged in some scenarios but "
                f"ERROR or TIMEOUT in others: {', '.join(unsettled)}"
            )
    return lines
