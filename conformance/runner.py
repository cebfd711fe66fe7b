"""Run one agent over scenarios against the fake gateway and judge every criterion.

Theory of operation: one gateway serves every scenario of a run, each in its own session. For a
scenario the runner builds the protocol's ``start`` message, hands the agent a fresh working
directory and a secret API key, and (when the scenario asks for a user abort) watches the
gateway's journal to send the abort once the named step's headers are out. After the agent's
turn it reads the evidence -- the journal first, the agent's events second -- and asks each
criterion's check for a finding. Capabilities the agent does not declare make a criterion
UNSUPPORTED before any check runs; a broken or hung agent makes it ERROR or TIMEOUT.

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

import datetime as _dt
import secrets as _secrets
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from conformance import __version__
from conformance.adapters.interface import (
    Adapter,
    RunOutcome,
    RunRequest,
    redact,
    redact_obj,
    run_time_scale,
)
from conformance.catalogue import CATALOGUE, by_id
from conformance.checks import FINAL_ON_PARTIAL, INVARIANTS, run_check
from conformance.checks.waits import retry_waits
from conformance.deadlines import DEADLINE_GRACE_S, DEFAULT_DEADLINE_S, deadline_s
from conformance.evidence import Evidence
from conformance.timing import DEFAULT_TIMING, Timing
from conformance.verdicts import aggregate, verdict_for
from conformance.verify import judged
from fakes import FakesError, Scenario, SyncGateway
from fakes.dialects import NAMES
from fakes.journal import Journal

__all__ = [
    "DEFAULT_DIALECT",
    "DIALECTS",
    "MCP_TOOLS",
    "TOOL_TRANSPORTS",
    "DEADLINE_GRACE_S",
    "DEFAULT_DEADLINE_S",
    "DEFAULT_TIME_SCALE",
    "agent_results",
    "deadline_s",
    "progress_line",
    "rerun_command",
    "results_document",
    "run_scenario",
    "run_suite",
]

DEFAULT_TIME_SCALE = 0.02
DEFAULT_DIALECT = "openai_chat"
DIALECTS = NAMES  # the registry's names (fakes.dialects)
TOOL_TRANSPORTS = ("http", "mcp")
MCP_TOOLS = "mcp_tools"  # the capability of an agent that takes its hosted tools from MCP
HISTORY = "history"  # what a scenario with a history needs of an agent that says it cannot take one


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


def dialect_capability(dialect: str) -> str | None:
    """The capability an agent declares to be run in ``dialect`` (None: every agent speaks it)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    return None if dialect == DEFAULT_DIALECT else f"dialect:{dialect}"


def _applies_in(crit: Any, dialect: str) -> bool:
    """Whether a criterion applies in ``dialect`` (catalogue ``dialects``; none = everywhere)."""
    only = getattr(crit, "dialects", None)
    return not only or dialect in only


def _start_message(
    scenario: Scenario,
    session: Any,
    time_scale: float,
    debug_dir: Path,
    dialect: str = DEFAULT_DIALECT,
    tool_transport: str = "http",
) -> dict:
    config = {"fallback_model": None, "max_output_tokens": None, **scenario.config}
    start = {
        "type": "start",
        "protocol": 1,
        "scenario": scenario.id,
        "model": "conformance-model",
        "prompt": scenario.prompt,
        "tools": scenario.tools,
        "tool_endpoint": session.tool_endpoint,
        "tool_transport": tool_transport,
        "mcp_endpoint": session.mcp_endpoint,
        "time_scale": time_scale,
        "debug_dir": str(debug_dir),
        "config": config,
    }
    if scenario.history:
        start["history"] = scenario.history
    if dialect != DEFAULT_DIALECT:
        start["dialect"] = dialect  # absent means openai_chat, for agents that predate it
    return start


def _watch_abort(session: Any, step: int, abort: threading.Event, done: threading.Event) -> None:
    """Set ``abort`` once the request served by ``step`` has its response headers."""
    while not done.is_set() and not abort.is_set():
        # The gateway answers the moment the headers go out, or after the timeout.
        if session.wait_headers(step, 0.05):
            abort.set()
            return


def _read_debug_files(debug_dir: Path) -> dict[str, str]:
    files = {}
    if debug_dir.is_dir():
        for path in sorted(p for p in debug_dir.rglob("*") if p.is_file()):
            files[str(path.relative_to(debug_dir))] = path.read_text("utf-8", errors="replace")
    return files


def _model_requests(journal: Journal) -> list[Any]:
    return [e for e in journal.get("entries") or [] if e.get("kind") == "chat"]


# "Never crash": an agent that exits, or dies of a signal, on its own before its turn ended
# fails it (``RunOutcome.crashed``); every other criterion of that run is an ERROR.
CRASH_CRITERION = "ERR-05"


def _set_keys(config: dict[str, Any]) -> set[str]:
    """The keys a scenario's config sets (to anything but null)."""
    return {k for k, v in config.items() if v is not None}


# How long the journal may take to record the end of responses the agent left behind.
SETTLE_S = 0.5


def _settled_journal(session: Any) -> Journal:
    """The session's journal once every model response in it has its end recorded (the agent
    has stopped: a reply it hung up on ends as soon as the gateway notices), waiting at most
    ``SETTLE_S``: a check then never takes a reply still being written for a whole one."""

    def settled(j: Journal) -> bool:
        return all(
            (e.get("response") or {}).get("end") for e in j["entries"] if e.get("kind") == "chat"
        )

    try:
        return cast(Journal, session.wait_for(settled, timeout=SETTLE_S))
    except FakesError:
        return cast(Journal, session.journal())


def _settle(outcome: RunOutcome, journal: Journal) -> tuple[str, str | None]:
    """The scenario's status and error, from the adapter's outcome and the wire.

    Two outcomes an agent may not choose for itself: "unsupported" (exit 89) counts only before
    its first model request, since after it the wire already holds evidence to judge; and a
    request the script could not serve (no step, no ``otherwise``) is a broken script, an ERROR
    of the scenario rather than a silently dropped attempt.
    """
    status, error = outcome.status, outcome.error
    chat = _model_requests(journal)
    unserved = next((e for e in chat if e.get("harness_error")), None)
    if unserved is not None:
        return "error", (
            f"the scenario's script could not serve request #{unserved.get('seq')} "
            f"({unserved.get('harness_error')}); give the scenario an `otherwise:` step"
            + (f"; the agent's own outcome: {status}" if status not in ("ran", "ok") else "")
        )
    if status == "unsupported" and chat:
        return "error", (
            f"the agent reported the scenario unsupported (exit 89) after {len(chat)} model "
            "request(s): exit 89 is honoured only before the first model request"
            + (f" ({error})" if error else "")
        )
    return status, error


def _judge_unfinished(
    cid: str, crit: Any, ev: Evidence, status: str, error: str
) -> tuple[str, str, str, bool]:
    """The verdict of a criterion when the turn never ended (TIMEOUT) or the run broke (ERROR).

    A check whose failure is final on partial evidence (``FINAL_ON_PARTIAL``: "never more than
    N", "never X") is run: a violation the wire already shows is a FAIL whatever came after.
    Anything else, a partial pass included, stays TIMEOUT/ERROR: the end was never seen.
    """
    unfinished = "the turn never ended" if status == "timeout" else "the run broke"
    if cid in FINAL_ON_PARTIAL:
        finding = run_check(cid, ev)
        if finding.outcome == "fail":
            return (
                verdict_for(crit, finding),
                finding.expected,
                f"{finding.observed} [judged on the wire before {status.upper()}: {unfinished}"
                f"; {error}]",
                True,
            )
    return status.upper(), "the agent ends its turn", error, False


def run_scenario(
    gateway: SyncGateway,
    adapter: Adapter,
    scenario: Scenario,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    rerun: str = "",
    dialect: str = DEFAULT_DIALECT,
    timing: Timing = DEFAULT_TIMING,
    tool_transport: str = "http",
    confirm: bool = False,
) -> tuple[dict, dict[str, dict]]:
    """Run one scenario in ``dialect``, its tools over ``tool_transport``; return its results
    entry and {criterion id: scenario verdict entry}. Timing checks judge with ``timing``'s
    allowances (``conformance.timing``). ``confirm``: an agent on a fast clock runs on the clock
    that confirms a failed timing verdict (``conformance.verify.judged``)."""
    if tool_transport not in TOOL_TRANSPORTS:
        raise ValueError(f"unknown tool transport {tool_transport!r}; known: http, mcp")
    caps = set(adapter.capabilities())
    # Scenario config keys the agent cannot be given (a shipped agent's profile names them).
    config_ignored = getattr(adapter, "config_ignored", None)
    ignored = set(config_ignored()) if callable(config_ignored) else set()
    if tool_transport != "mcp":
        caps.discard(MCP_TOOLS)  # its tools do not go over MCP in this run
    on_timing = any(by_id(c).timing for c in scenario.criteria)
    scale = run_time_scale(adapter, time_scale, on_timing, confirm)
    needed = set(scenario.capabilities)
    speaks = dialect_capability(dialect)
    if speaks is not None:
        needed.add(speaks)
    if tool_transport == "mcp":
        needed.add(MCP_TOOLS)
    missing = sorted(needed - caps)
    # A scenario's history the agent cannot be given (a CLI run as it ships starts a new
    # conversation): judging it would judge a setup it never had.
    takes_history = getattr(adapter, "takes_history", None)
    no_history = bool(scenario.history) and callable(takes_history) and not takes_history()
    if no_history:
        missing.append(HISTORY)
    criteria = list(dict.fromkeys([*scenario.criteria, *INVARIANTS]))
    api_key = "sk-conformance-" + _secrets.token_hex(16)
    began = time.monotonic()
    if missing:
        why = f"needs {', '.join(missing)}"
        if speaks in missing:
            why += (
                f" (the agent does not declare {speaks}, so it is not run in the {dialect} dialect)"
            )
        elif MCP_TOOLS in missing and tool_transport != "mcp":
            why += " (the run's tools go over http: --tool-transport mcp runs them over MCP)"
        elif no_history:
            why += (
                " (the agent cannot be given the scenario's history: it starts a new conversation)"
            )
        outcome = RunOutcome("unsupported", [], None, "", why)
        stopped_ns = time.monotonic_ns()
        journal: Journal = {
            "session": "",
            "scenario": scenario.id,
            "time_scale": scale,
            "entries": [],
        }
        debug_files: dict[str, str] = {}
    else:
        session = gateway.create_session(scenario, time_scale=scale)
        # A Ctrl-C can land while the agent still writes here; a cleanup error must not replace
        # the KeyboardInterrupt, or the run would end without its results.
        with tempfile.TemporaryDirectory(prefix="conformance-", ignore_cleanup_errors=True) as tmp:
            workdir = Path(tmp) / "work"
            debug_dir = Path(tmp) / "debug"
            workdir.mkdir()
            debug_dir.mkdir()
            req = RunRequest(
                start=_start_message(scenario, session, scale, debug_dir, dialect, tool_transport),
                base_url=session.base_url,
                api_key=api_key,
                ca_file=gateway.ca_file if scenario.tls else None,
                workdir=workdir,
                deadline_s=deadline_s(scenario, scale),
                agent_clock=session.set_agent_clock,
            )
            done = threading.Event()
            watcher = None
            if scenario.abort:
                watcher = threading.Thread(
                    target=_watch_abort,
                    args=(session, int(scenario.abort["when_step"]), req.abort, done),
                    daemon=True,
                )
                watcher.start()
            try:
                outcome = adapter.run(req)
            finally:
                stopped_ns = time.monotonic_ns()  # the agent has stopped, or was stopped
                done.set()
                if watcher:
                    watcher.join(1)
            journal = _settled_journal(session)
            debug_files = _read_debug_files(debug_dir)
        gateway.drop_session(session.id)

    status, error = _settle(outcome, journal)
    events = outcome.events
    if status == "timeout":
        # A turn stopped at its deadline never ended, whatever a cancelled agent wrote as it
        # went down: a turn_end then would read as the agent's own decision to give up.
        events = [e for e in events if e.get("type") != "turn_end"]
    # An agent on a fast clock: its own time between attempts, measured by the calibration.
    overhead = getattr(adapter, "overhead", None)
    over_s, spread_s = overhead(scale) if callable(overhead) else (0.0, 0.0)
    ev = Evidence(
        scenario=scenario.raw,
        journal=journal,
        events=events,
        time_scale=scale,
        capabilities=caps,
        debug_files=debug_files,
        secrets=(api_key,),
        agent_log=outcome.log,
        timing=timing,
        overhead_s=over_s,
        overhead_spread_s=spread_s,
        stopped_ns=stopped_ns,
    )
    verdicts: dict[str, dict] = {}
    for cid in criteria:
        crit = by_id(cid)
        partial = False
        if speaks in missing:
            v, exp, obs = (
                "UNSUPPORTED",
                f"capability {speaks}",
                f"not declared by the agent: it is not run in the {dialect} dialect",
            )
        elif untold := sorted(set(crit.config_keys) & _set_keys(scenario.config) & ignored):
            v, exp = "UNSUPPORTED", "an agent that can be given " + ", ".join(untold)
            obs = f"the agent cannot be given config {', '.join(untold)} (its profile says so)"
        elif no_history:
            v, exp = "UNSUPPORTED", "an agent that can be given the scenario's history"
            obs = "the agent cannot be given a history: it starts a new conversation"
        elif status == "unsupported" or (crit.capability and crit.capability not in caps):
            need = crit.capability or ", ".join(missing) or "the scenario"
            obs = "not declared by the agent"
            if MCP_TOOLS in (crit.capability, *missing) and tool_transport != "mcp":
                obs = "the run's tools go over http, not MCP (--tool-transport mcp)"
            v, exp = "UNSUPPORTED", f"capability {need}"
        elif not _applies_in(crit, dialect):
            v = "INFORMATIONAL"
            exp = f"applies only in {', '.join(crit.dialects)}"
            obs = f"not applicable in this dialect ({dialect})"
        elif status == "error" and outcome.crashed and cid == CRASH_CRITERION:
            # The agent ended itself mid-turn: the crash ERR-05 forbids, not a broken run.
            v, exp, obs = "FAIL", "the turn ends with turn_end, whatever fails", error or ""
        elif status in ("error", "timeout"):
            v, exp, obs, partial = _judge_unfinished(cid, crit, ev, status, error or "")
        else:
            finding = run_check(cid, ev)
            v, exp, obs = verdict_for(crit, finding), finding.expected, finding.observed
        verdicts[cid] = {
            "id": scenario.id,
            "verdict": v,
            "expected": redact(exp, api_key),
            "observed": redact(obs, api_key),
        }
        if partial:
            verdicts[cid]["partial"] = True
    entry = {
        "id": scenario.id,
        "file": _display_path(scenario.source),
        "status": status,
        "duration_s": round(time.monotonic() - began, 4),
        "rerun": rerun,
        # Adapters hand over what the agent really wrote (DBG-02 is judged on it); nothing of
        # it leaves the runner unredacted.
        "journal": redact_obj(journal, api_key),
        "events": redact_obj(outcome.events, api_key),
        "agent_log": redact(outcome.log, api_key),
        "error": redact(error, api_key) if error else None,
        "waits": retry_waits(ev),  # each retry's wait and its band, for the report's timeline
    }
    clock = getattr(adapter, "clock_info", None)
    info = clock(scale) if callable(clock) else None
    if info:
        entry["clock"] = info
    # Adapters under the loopback guard (shipped:<profile>) report what tried to leave.
    attempts = getattr(adapter, "last_outside_attempts", None) if not missing else None
    if attempts is not None:
        entry["outside_attempts"] = redact_obj(attempts, api_key)
    return entry, verdicts


def progress_line(i: int, n: int, entry: dict, verdicts: dict[str, dict]) -> str:
    """One progress line per scenario: ``[i/n] id: status, worst VERDICT``."""
    worst = aggregate([v["verdict"] for v in verdicts.values()])
    return f"[{i}/{n}] {entry['id']}: {entry['status']}, worst {worst}"


def agent_results(
    name: str,
    adapter_name: str,
    capabilities: Iterable[str],
    runs: Iterable[tuple[dict, dict[str, dict]]],
) -> dict:
    """One agent's results entry (contracts §4) from ``run_scenario``'s (entry, verdicts) pairs,
    in the order given; each criterion's aggregate is the worst of its scenarios."""
    agent: dict[str, Any] = {
        "name": name,
        "adapter": adapter_name,
        "capabilities": sorted(capabilities),
        "criteria": {},
        "scenarios": [],
    }
    per_criterion: dict[str, list[dict]] = {}
    agent["version"] = None
    for entry, verdicts in runs:
        agent["scenarios"].append(entry)
        if agent["version"] is None:
            # The agent's own word in its hello, not the harness's version.
            hello: dict[str, Any] = next(
                (e for e in entry.get("events") or [] if e.get("type") == "hello"), {}
            )
            agent["version"] = str(hello["version"]) if hello.get("version") else None
        for cid, v in verdicts.items():
            per_criterion.setdefault(cid, []).append(v)
    for cid in sorted(per_criterion):
        found = per_criterion[cid]
        agent["criteria"][cid] = {
            "verdict": aggregate([r["verdict"] for r in found]),
            "scenarios": found,
        }
        if any(r.get("flaky") for r in found):  # its verdict differed between runs (--verify)
            agent["criteria"][cid]["flaky"] = True
    return agent


def run_suite(
    gateway: SyncGateway,
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
) -> dict:
    """Run ``scenarios`` in order in ``dialect``; return the agent's results entry (contracts
    §4). With ``verify``, a failed timing verdict is rerun (``conformance.verify``)."""
    scenarios = list(scenarios)
    runs: list[tuple[dict, dict[str, dict]]] = []
    try:
        for i, scenario in enumerate(scenarios, 1):
            if stop is not None and stop.is_set():
                break

            def once(confirm: bool, scenario: Scenario = scenario) -> tuple[dict, dict[str, dict]]:
                return run_scenario(
                    gateway,
                    adapter,
                    scenario,
                    time_scale=time_scale,
                    rerun=rerun(scenario),
                    dialect=dialect,
                    timing=timing,
                    tool_transport=tool_transport,
                    confirm=confirm,
                )

            entry, verdicts = judged(once, verify)
            runs.append((entry, verdicts))
            if progress:
                progress(progress_line(i, len(scenarios), entry, verdicts))
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: keep what ran; the scenario in flight is dropped whole.
        if stop is not None:
            stop.set()
    return agent_results(adapter.name, adapter.name, adapter.capabilities(), runs)


def results_document(
    agents: list[dict],
    *,
    started: float,
    time_scale: float,
    interrupted: bool,
    command: str,
    dialect: str = DEFAULT_DIALECT,
    timing: dict | None = None,
    tool_transport: str = "http",
) -> dict:
    """Wrap agents' results into the results document of contracts §4 (``timing``: the run's
    measured timing allowances, ``conformance.timing``)."""

    def iso(t: float) -> str:
        return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "format": "conformance-results",
        "version": 1,
        "run": {
            "started": iso(started),
            "finished": iso(time.time()),
            "time_scale": time_scale,
            "interrupted": interrupted,
            "command": command,
            "harness_version": __version__,
            "dialect": dialect,
            "tool_transport": tool_transport,
            **({"timing": timing} if timing is not None else {}),
        },
        "catalogue": [asdict(c) for c in CATALOGUE],
        "agents": agents,
    }
