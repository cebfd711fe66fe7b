"""Run one agent over scenarios against the fake gateway and judge every criterion.

Theory of operation: one gateway serves every scenario of a run, each in its own session. A
scenario's run is three steps (``conformance.run``): the gate says whether the agent is run on
it at all (capabilities, dialect, history and config it can be given); the drive runs the
agent's turn against a session and records what happened; the judge turns the record into a
verdict per criterion. :func:`run_scenario` composes them and writes the results entry
(``conformance.run.record``: the record redacted, with what the judge used, so that
``conformance rejudge`` can derive the verdicts again from it alone).

A run speaks one wire dialect (``openai_chat`` by default; ``anthropic_messages``,
``openai_responses``): the start message carries it, an agent that does not declare
``dialect:<name>`` gets UNSUPPORTED for every scenario, and a criterion whose catalogue entry
names the dialects it applies in is INFORMATIONAL in the others.

A run reaches the hosted tools over one transport (``http`` by default, or ``mcp``: the start
message names it, with the session's MCP endpoint). Over ``mcp`` an agent that does not declare
``mcp_tools`` gets UNSUPPORTED for every scenario; over ``http`` an agent's ``mcp_tools`` counts
as undeclared, since its tools do not go over MCP (a criterion of the MCP wire is UNSUPPORTED).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.adapters.interface import (
    DEFAULT_TRAITS,
    Adapter,
    AgentTraits,
    key_marker,
    redact,
    redact_obj,
    run_time_scale,
)
from conformance.ahead import Ahead
from conformance.catalogue import CATALOGUE, by_id
from conformance.checks.waits import retry_waits
from conformance.judging.deadlines import DEADLINE_GRACE_S, DEFAULT_DEADLINE_S, deadline_s
from conformance.judging.reaction import NO_REACTION, Reaction
from conformance.judging.timing import DEFAULT_TIMING, Timing
from conformance.release import CATALOGUE_VERSION, rules_sha256
from conformance.repeat import combine
from conformance.results import (
    AgentResults,
    CriterionResult,
    ResultsDocument,
    Run,
    RunInfo,
    ScenarioEntry,
    ScenarioVerdict,
)
from conformance.run.drive import Drive, drive, not_driven
from conformance.run.gate import (
    DEFAULT_DIALECT,
    MCP_TOOLS,
    TOOL_TRANSPORTS,
    Admission,
    admit,
    dialect_capability,
)
from conformance.run.judge import Allowances, Ruling, evidence_of, judge
from conformance.run.record import recorded
from conformance.verdicts import aggregate
from conformance.verify import Attempt, judged
from fakes import GatewayHandle, Scenario
from fakes.dialects import NAMES

__all__ = [
    "DEFAULT_DIALECT",
    "DIALECTS",
    "MCP_TOOLS",
    "TOOL_TRANSPORTS",
    "DEADLINE_GRACE_S",
    "DEFAULT_DEADLINE_S",
    "DEFAULT_TIME_SCALE",
    "RunConfig",
    "agent_results",
    "attempts",
    "deadline_s",
    "dialect_capability",
    "progress_line",
    "rerun_command",
    "results_document",
    "run_checked",
    "run_scenario",
    "run_suite",
    "scenario_verdicts",
]

DEFAULT_TIME_SCALE = 0.02
DIALECTS = NAMES  # the registry's names (fakes.dialects)


def _display_path(source: str) -> str:
    """A scenario's path relative to the working directory when under it, for rerun lines."""
    path = Path(source)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return source


def rerun_command(
    scenario: Scenario,
    agent: str = "reference",
    dialect: str = DEFAULT_DIALECT,
    tool_transport: str = "http",
) -> str:
    """The command line that reruns one scenario (shown in the report)."""
    flag = "" if agent == "reference" else f"--agent {shlex.quote(agent)} "
    if dialect != DEFAULT_DIALECT:
        flag += f"--dialect {dialect} "
    if tool_transport != "http":
        flag += f"--tool-transport {tool_transport} "
    return f"conformance run {flag}--scenario {shlex.quote(_display_path(scenario.source))}"


def _allowances(adapter: Adapter, scale: float, timing: Timing, reaction: Reaction) -> Allowances:
    """The timing allowances a run at ``scale`` is judged with: the machine's, and the agent's
    own time per wait: on a fast clock what its calibration measured, else its reaction
    (``conformance.judging.reaction``)."""
    clock = adapter.fast_clock
    if clock is not None:
        over_s, spread_s = clock.overhead(scale)
    else:
        over_s, spread_s = reaction.taken_off_s, reaction.spread_s
    return Allowances(timing=timing, overhead_s=over_s, overhead_spread_s=spread_s)


def scenario_verdicts(
    rulings: dict[str, Ruling], scenario_id: str, api_key: str
) -> dict[str, ScenarioVerdict]:
    """A scenario's verdicts as the results carry them, ``api_key`` redacted from their text
    (the run's, and ``conformance rejudge``'s of a saved run)."""
    mark = key_marker(api_key) if api_key else ""
    out: dict[str, ScenarioVerdict] = {}
    for cid, r in rulings.items():
        out[cid] = {
            "id": scenario_id,
            "verdict": r.verdict,
            "expected": redact(r.expected, api_key, mark),
            "observed": redact(r.observed, api_key, mark),
        }
        if r.partial:
            out[cid]["partial"] = True
        if r.beyond_load:
            out[cid]["beyond_load"] = True
    return out


def run_scenario(
    gateway: GatewayHandle,
    adapter: Adapter,
    scenario: Scenario,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    rerun: str = "",
    dialect: str = DEFAULT_DIALECT,
    timing: Timing = DEFAULT_TIMING,
    tool_transport: str = "http",
    confirm: bool = False,
    reaction: Reaction = NO_REACTION,
) -> Run:
    """Run one scenario in ``dialect``, its tools over ``tool_transport``: gate, drive, judge;
    return its results entry and {criterion id: scenario verdict entry}. Timing checks judge with
    ``timing``'s allowances (``conformance.judging.timing``) and the agent's ``reaction``. ``confirm``:
    run on the slower clock that confirms a failed timing verdict (``conformance.verify``)."""
    admission = admit(
        scenario,
        adapter.capabilities(),
        adapter.traits,
        dialect=dialect,
        tool_transport=tool_transport,
    )
    scale = scenario_scale(adapter, scenario, time_scale, confirm, reaction)
    if admission.runs:
        record = drive(
            gateway,
            adapter,
            scenario,
            time_scale=scale,
            dialect=dialect,
            tool_transport=tool_transport,
        )
    else:
        record = not_driven(scenario, scale, admission.reason())
    allowances = _allowances(adapter, scale, timing, reaction)
    secrets = (record.api_key,) if record.api_key else ()
    ev = evidence_of(scenario, admission, record, allowances, secrets)
    verdicts = scenario_verdicts(
        judge(scenario, admission, record, ev), scenario.id, record.api_key
    )
    entry = _entry(scenario, rerun, record, allowances, admission, adapter)
    if reaction.measured and adapter.fast_clock is None:
        entry["reaction"] = reaction.as_dict()
    entry["waits"] = retry_waits(ev)  # each retry's wait and its band, for the report's timeline
    return entry, verdicts


def scenario_scale(
    adapter: Adapter,
    scenario: Scenario,
    time_scale: float,
    confirm: bool = False,
    reaction: Reaction = NO_REACTION,
) -> float:
    """The time scale ``scenario`` runs at (``confirm``: on the clock that confirms a failed
    timing verdict): the adapter's clock, or the run's scale, slower for a noisy agent's timing."""
    on_timing = any(by_id(c).timing for c in scenario.criteria)
    scale = run_time_scale(adapter, time_scale, on_timing, confirm)
    if adapter.fast_clock is None and scale < 1.0:
        scale = reaction.scale_for(scale, on_timing)  # a noisy agent's timing, slower
    return scale


def _entry(
    scenario: Scenario,
    rerun: str,
    record: Drive,
    allowances: Allowances,
    admission: Admission,
    adapter: Adapter,
) -> ScenarioEntry:
    """The scenario's results entry (contracts §4): the record, redacted, and how it ran."""
    kept = recorded(scenario.raw, record, allowances)
    entry: ScenarioEntry = {
        "id": scenario.id,
        "file": _display_path(scenario.source),
        "duration_s": round(record.duration_s, 4),
        "rerun": rerun,
        "scenario": kept["scenario"],
        "status": kept["status"],
        "error": kept["error"],
        "crashed": kept["crashed"],
        "journal": kept["journal"],
        "events": kept["events"],
        "agent_log": kept["agent_log"],
        "debug_files": kept["debug_files"],
        "judged_with": kept["judged_with"],
        "evidence_sha256": kept["evidence_sha256"],
    }
    if "debug_format" in kept:
        entry["debug_format"] = kept["debug_format"]
    clock = adapter.fast_clock
    info = clock.clock_info(record.time_scale) if clock is not None else None
    if info:
        entry["clock"] = info
    # Agents under the loopback guard (shipped:<profile>) report what tried to leave.
    if admission.runs and record.outside_attempts is not None:
        mark = key_marker(record.api_key)
        entry["outside_attempts"] = redact_obj(record.outside_attempts, record.api_key, mark)
    return entry


def _hold_nothing(alone: bool) -> AbstractContextManager[bool]:
    return contextlib.nullcontext(True)  # no other process of the run to wait for


@dataclass(frozen=True)
class RunConfig:
    """How every scenario of a run is run and judged (the same for each of its agents)."""

    time_scale: float = DEFAULT_TIME_SCALE
    dialect: str = DEFAULT_DIALECT
    tool_transport: str = "http"
    timing: Timing = DEFAULT_TIMING
    verify: int = 0
    repeat: int = 1
    # How a scenario's run holds the machine (conformance.share.Share.hold): shared with the
    # run's other processes, or alone for a confirming run, yielding whether it has what it
    # asked for; by default it holds nothing.
    hold: Callable[[bool], AbstractContextManager[bool]] = _hold_nothing
    # Whether the run has other processes whose load a run alone rules out (-n N, N > 1), or
    # another run in flight in this one (``ahead``).
    shared: bool = False
    # Whether an agent that overlaps its runs has its next scenario started while one runs
    # (conformance.ahead): only where ``hold`` can keep that run out of a confirmation's way.
    ahead: bool = False


def run_checked(
    gateway: GatewayHandle,
    adapter: Adapter,
    scenario: Scenario,
    config: RunConfig,
    rerun: str = "",
    reaction: Reaction = NO_REACTION,
    first: Run | None = None,
) -> Run:
    """``run_scenario`` with a failed timing verdict confirmed with the machine to itself (on
    the same clock first when the run's own load may explain it, else on a slower one) and,
    with ``config.verify``, rerun until it reproduces (``conformance.verify``). ``first``: the
    scenario's first run, made earlier (by :func:`attempts`)."""
    once = attempts(gateway, adapter, scenario, config, rerun, reaction)
    # Alone on the same clock is worth a run only beside other processes, and only when a
    # slower clock is left to confirm on should that run fail too.
    slower = scenario_scale(adapter, scenario, config.time_scale, True, reaction)
    own = scenario_scale(adapter, scenario, config.time_scale, False, reaction)
    try_alone = config.shared and slower != own
    return judged(once, config.verify, try_alone=try_alone, first=first)


def attempts(
    gateway: GatewayHandle,
    adapter: Adapter,
    scenario: Scenario,
    config: RunConfig,
    rerun: str,
    reaction: Reaction,
) -> Callable[[Attempt], Run]:
    """How each attempt at ``scenario`` runs (``conformance.verify.Attempt``): holding the
    machine with the run's other runs for the first, alone for the others. A run of several
    processes makes the first one alone in a worker and finishes it later with
    :func:`run_checked` (``conformance.session``)."""

    def once(attempt: Attempt) -> Run:
        alone = attempt not in ("first", "beside")
        with config.hold(alone) as had:
            run = run_scenario(
                gateway,
                adapter,
                scenario,
                time_scale=config.time_scale,
                rerun=rerun,
                dialect=config.dialect,
                timing=config.timing,
                tool_transport=config.tool_transport,
                confirm=attempt == "slower",
                reaction=reaction,
            )
        if not had:
            # The machine was not free within the hold's wait: the confirmation says so.
            run[0]["alone"] = False
        if attempt == "beside":
            run[0]["beside"] = True
        return run

    return once


def progress_line(
    i: int, n: int, entry: ScenarioEntry, verdicts: dict[str, ScenarioVerdict]
) -> str:
    """One progress line per scenario: ``[i/n] id: status, worst VERDICT``, and what was run
    again to reach it (a timing verdict confirmed on a slower clock, --verify reruns, repeats)."""
    worst = aggregate([v["verdict"] for v in verdicts.values()])
    line = f"[{i}/{n}] {entry['id']}: {entry['status']}, worst {worst}"
    notes = []
    confirmed = sorted(cid for cid, v in verdicts.items() if v.get("confirmed"))
    if confirmed:
        on = verdicts[confirmed[0]]["confirmed"]["on"]
        shown = ", ".join(
            f"{cid} {verdicts[cid]['confirmed']['first']['verdict']} -> {verdicts[cid]['verdict']}"
            for cid in confirmed
        )
        notes.append(f"timing confirmed on {on}: {shown}")
    if entry.get("reruns"):
        flaky = sorted(cid for cid, v in verdicts.items() if v.get("flaky"))
        notes.append(
            f"{len(entry['reruns'])} rerun(s)" + (f", flaky {', '.join(flaky)}" if flaky else "")
        )
    if entry.get("repeats"):
        runs = len(entry["repeats"]) + 1
        unstable = sorted(
            f"{cid} {v['repeat']['passed']}/{runs}"
            for cid, v in verdicts.items()
            if v.get("verdict") == "UNSTABLE"
        )
        notes.append(f"{runs} runs" + (f", UNSTABLE {', '.join(unstable)}" if unstable else ""))
    return line + (f" ({'; '.join(notes)})" if notes else "")


def agent_results(
    name: str,
    adapter_name: str,
    capabilities: Iterable[str],
    runs: Iterable[Run],
    *,
    traits: AgentTraits = DEFAULT_TRAITS,
) -> AgentResults:
    """One agent's results entry (contracts §4) from ``run_scenario``'s (entry, verdicts) pairs,
    in the order given; each criterion's aggregate is the worst of its scenarios. ``traits``:
    what the gate knew of the agent beyond its capabilities (kept for ``conformance rejudge``)."""
    per_criterion: dict[str, list[ScenarioVerdict]] = {}
    scenarios: list[ScenarioEntry] = []
    version: str | None = None
    for entry, verdicts in runs:
        scenarios.append(entry)
        if version is None:
            # The agent's own word in its hello, not the harness's version.
            hello: dict[str, Any] = next(
                (e for e in entry.get("events") or [] if e.get("type") == "hello"), {}
            )
            version = str(hello["version"]) if hello.get("version") else None
        for cid, v in verdicts.items():
            per_criterion.setdefault(cid, []).append(v)
    criteria: dict[str, CriterionResult] = {}
    for cid in sorted(per_criterion):
        found = per_criterion[cid]
        criteria[cid] = {"verdict": aggregate([r["verdict"] for r in found]), "scenarios": found}
        if any(r.get("flaky") for r in found):  # its verdict differed between runs (--verify)
            criteria[cid]["flaky"] = True
    return {
        "name": name,
        "adapter": adapter_name,
        "capabilities": sorted(capabilities),
        "traits": {
            "takes_history": traits.takes_history,
            "config_ignored": sorted(traits.config_ignored),
        },
        "criteria": criteria,
        "scenarios": scenarios,
        "version": version,
    }


def run_suite(
    gateway: GatewayHandle,
    adapter: Adapter,
    scenarios: Iterable[Scenario],
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    rerun: Callable[[Scenario], str] = rerun_command,
    progress: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    dialect: str = DEFAULT_DIALECT,
    timing: Timing = DEFAULT_TIMING,
    verify: int = 0,
    tool_transport: str = "http",
    reaction: Reaction = NO_REACTION,
    repeat: int = 1,
    config: RunConfig | None = None,
    took: dict[str, float] | None = None,
    order: Sequence[int] | None = None,
) -> AgentResults:
    """Run ``scenarios`` in ``dialect``; return the agent's results entry (contracts §4), its
    scenarios in the order given. They run in that order too, or in ``order`` (indices into
    ``scenarios``: e.g. longest first). A failed timing verdict is confirmed on a slower clock,
    and with ``verify`` rerun (``conformance.verify``); waits are judged net of the agent's
    ``reaction``. With ``repeat`` each scenario runs that many times, its runs joined
    (``conformance.repeat``). ``config``, when given, stands for every setting it holds (the
    session's, with how its runs hold the machine); ``took`` gets each scenario's seconds, its
    confirmations and reruns included. With ``config.ahead``, an agent that overlaps its runs
    has its next scenario started while the current one runs."""
    given = list(scenarios)
    sequence = list(range(len(given))) if order is None else list(order)
    if sorted(sequence) != list(range(len(given))):
        raise ValueError(f"order {sequence} is not an order of the {len(given)} scenarios")
    scenarios = [given[i] for i in sequence]
    config = config or RunConfig(time_scale, dialect, tool_transport, timing, verify, repeat)
    runs: list[tuple[int, Run]] = []  # (index in the order given, its run)
    ahead: Ahead[Run] = Ahead()

    def run_one(scenario: Scenario) -> Run:
        began = time.monotonic()
        run = combine(
            [
                run_checked(gateway, adapter, scenario, config, rerun(scenario), reaction)
                for _ in range(max(1, config.repeat))
            ]
        )
        if took is not None:
            took[scenario.id] = time.monotonic() - began
        return run

    try:
        for i, scenario in enumerate(scenarios, 1):
            if stop is not None and stop.is_set():
                break
            if config.ahead and adapter.overlap and i < len(scenarios):
                # The next scenario starts while this one runs (conformance.ahead).
                ahead.start(i + 1, functools.partial(run_one, scenarios[i]))
            entry, verdicts = ahead.result(i, functools.partial(run_one, scenario))
            runs.append((sequence[i - 1], (entry, verdicts)))
            if progress:
                progress(progress_line(i, len(scenarios), entry, verdicts))
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: keep what ran; the scenario in flight is dropped whole.
        if stop is not None:
            stop.set()
    in_order = [run for _, run in sorted(runs, key=lambda r: r[0])]
    return agent_results(
        adapter.name, adapter.name, adapter.capabilities(), in_order, traits=adapter.traits
    )


def results_document(
    agents: list[AgentResults],
    *,
    started: float,
    time_scale: float,
    interrupted: bool,
    command: str,
    dialect: str = DEFAULT_DIALECT,
    timing: dict[str, Any] | None = None,
    tool_transport: str = "http",
    repeat: int = 1,
) -> ResultsDocument:
    """Wrap agents' results into the results document of contracts §4 (``timing``: the run's
    measured timing allowances, ``conformance.judging.timing``)."""

    def iso(t: float) -> str:
        return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    run: RunInfo = {
        "started": iso(started),
        "finished": iso(time.time()),
        "time_scale": time_scale,
        "interrupted": interrupted,
        "command": command,
        "harness_version": __version__,
        # The rules that judged it (conformance.release): never compared across releases.
        "catalogue_version": CATALOGUE_VERSION,
        "catalogue_sha256": rules_sha256(),
        "dialect": dialect,
        "tool_transport": tool_transport,
        "repeat": repeat,  # how many runs of each scenario the verdicts rest on
    }
    if timing is not None:
        run["timing"] = timing
    return {
        "format": "conformance-results",
        "version": 1,
        "run": run,
        "catalogue": [asdict(c) for c in CATALOGUE],
        "agents": agents,
    }
