"""The drive: one agent's turn on one scenario against a gateway session, recorded, not judged.

The drive builds the protocol's ``start`` message, hands the agent a fresh working directory,
a debug directory and a secret API key, and (when the scenario asks for a user abort) watches
the gateway's journal to send the abort once the named step's headers are out. When the agent
has stopped it waits (at most :data:`SETTLE_S`) for the journal to record the end of every
response, reads the debug files, and returns a :class:`Drive`: everything the judge needs, as the
agent and the wire gave it (unredacted: DBG-02 is judged on it; the results entry redacts).
"""

from __future__ import annotations

import secrets as _secrets
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.adapters.interface import Adapter, RunOutcome, RunRequest, Status
from conformance.judging.deadlines import deadline_s
from conformance.run.gate import DEFAULT_DIALECT
from fakes import FakesError, GatewayHandle, Scenario, SessionHandle
from fakes.journal import Journal

__all__ = ["SETTLE_S", "Drive", "drive", "not_driven", "start_message"]

# How long the journal may take to record the end of responses the agent left behind.
SETTLE_S = 0.5


@dataclass
class Drive:
    """What one run of a scenario produced, before any judging."""

    status: Status  # how the turn ended, the wire's word over the adapter's (``_settle``)
    error: str | None
    crashed: bool  # the agent ended itself mid-turn (ERR-05)
    journal: Journal
    events: list[dict[str, Any]]  # as the agent wrote them, its stopped turn's turn_end too
    agent_log: str
    time_scale: float
    api_key: str  # the run's secret (never written anywhere: the entry redacts it)
    debug_files: dict[str, str] = field(default_factory=dict)
    # Their format when they are the agent's own (the adapter names it); None: contracts §5.
    debug_format: str | None = None
    stopped_ns: int | None = None  # time.monotonic_ns() when the agent stopped
    duration_s: float = 0.0
    outside_attempts: list[dict[str, Any]] | None = None  # None: the agent was not guarded

    @property
    def judged_events(self) -> list[dict[str, Any]]:
        """The events the checks read: a turn stopped at its deadline never ended, whatever a
        cancelled agent wrote as it went down (a turn_end then would read as its own choice)."""
        if self.status != "timeout":
            return self.events
        return [e for e in self.events if e.get("type") != "turn_end"]


def start_message(
    scenario: Scenario,
    session: SessionHandle,
    time_scale: float,
    debug_dir: Path,
    dialect: str = DEFAULT_DIALECT,
    tool_transport: str = "http",
) -> dict[str, Any]:
    config = {"fallback_model": None, "max_output_tokens": None, **scenario.config}
    start: dict[str, Any] = {
        "type": "start",
        "protocol": 1,
        "scenario": scenario.id,
        "model": "conformance-model",
        "prompt": scenario.prompt,
        "tools": scenario.tools,
        "tool_endpoint": session.tool_endpoint,
        "tool_transport": tool_transport,
        "mcp_endpoint": session.mcp_endpoint,
        "credential_url": session.credential_url,
        "time_scale": time_scale,
        "debug_dir": str(debug_dir),
        "config": config,
    }
    if scenario.history:
        start["history"] = scenario.history
    if dialect != DEFAULT_DIALECT:
        start["dialect"] = dialect  # absent means openai_chat, for agents that predate it
    return start


def _watch_abort(
    session: SessionHandle, step: int, abort: threading.Event, done: threading.Event
) -> None:
    """Set ``abort`` once the request served by ``step`` has its response headers."""
    while not done.is_set() and not abort.is_set():
        # The gateway answers the moment the headers go out, or after the timeout.
        if session.wait_headers(step, 0.05):
            abort.set()
            return


def _read_debug_files(debug_dir: Path) -> dict[str, str]:
    files = {}
    if debug_dir.is_dir():
        # Not a link: a file is read once, where the agent wrote it (Claude Code adds `latest`).
        for path in sorted(p for p in debug_dir.rglob("*") if p.is_file() and not p.is_symlink()):
            files[str(path.relative_to(debug_dir))] = path.read_text("utf-8", errors="replace")
    return files


def _model_requests(journal: Journal) -> list[Any]:
    return [e for e in journal.get("entries") or [] if e.get("kind") == "chat"]


def _settled_journal(session: SessionHandle) -> Journal:
    """The session's journal once every model response in it has its end recorded (the agent
    has stopped: a reply it hung up on ends as soon as the gateway notices), waiting at most
    ``SETTLE_S``: a check then never takes a reply still being written for a whole one."""

    def settled(j: Journal) -> bool:
        return all(
            (e.get("response") or {}).get("end") for e in j["entries"] if e.get("kind") == "chat"
        )

    try:
        return session.wait_for(settled, timeout=SETTLE_S)
    except FakesError:
        return session.journal()


def settle(
    outcome_status: Status, error: str | None, journal: Journal
) -> tuple[Status, str | None]:
    """The scenario's status and error, from the adapter's outcome and the wire.

    Two outcomes an agent may not choose for itself: "unsupported" (exit 89) counts only before
    its first model request, since after it the wire already holds evidence to judge; and a
    request the script could not serve (no step, no ``otherwise``) is a broken script, an ERROR
    of the scenario rather than a silently dropped attempt.
    """
    chat = _model_requests(journal)
    unserved = next((e for e in chat if e.get("harness_error")), None)
    if unserved is not None:
        own = outcome_status not in ("ran", "ok")
        return "error", (
            f"the scenario's script could not serve request #{unserved.get('seq')} "
            f"({unserved.get('harness_error')}); give the scenario an `otherwise:` step"
            + (f"; the agent's own outcome: {outcome_status}" if own else "")
        )
    if outcome_status == "unsupported" and chat:
        return "error", (
            f"the agent reported the scenario unsupported (exit 89) after {len(chat)} model "
            "request(s): exit 89 is honoured only before the first model request"
            + (f" ({error})" if error else "")
        )
    return outcome_status, error


def not_driven(scenario: Scenario, time_scale: float, why: str) -> Drive:
    """The record of a scenario the gate kept the agent from: nothing ran."""
    journal: Journal = {
        "session": "",
        "scenario": scenario.id,
        "time_scale": time_scale,
        "entries": [],
    }
    return Drive(
        status="unsupported",
        error=why,
        crashed=False,
        journal=journal,
        events=[],
        agent_log="",
        time_scale=time_scale,
        api_key="",
        stopped_ns=time.monotonic_ns(),
    )


def drive(
    gateway: GatewayHandle,
    adapter: Adapter,
    scenario: Scenario,
    *,
    time_scale: float,
    dialect: str = DEFAULT_DIALECT,
    tool_transport: str = "http",
) -> Drive:
    """Run ``adapter``'s agent on ``scenario`` in a session of its own (module doc)."""
    api_key = "sk-conformance-" + _secrets.token_hex(16)
    began = time.monotonic()
    session = gateway.create_session(scenario, time_scale=time_scale)
    # A Ctrl-C can land while the agent still writes here; a cleanup error must not replace the
    # KeyboardInterrupt, or the run would end without its results.
    with tempfile.TemporaryDirectory(prefix="conformance-", ignore_cleanup_errors=True) as tmp:
        workdir, debug_dir = Path(tmp) / "work", Path(tmp) / "debug"
        workdir.mkdir()
        debug_dir.mkdir()
        req = RunRequest(
            start=start_message(scenario, session, time_scale, debug_dir, dialect, tool_transport),
            base_url=session.base_url,
            api_key=api_key,
            ca_file=gateway.ca_file if scenario.tls else None,
            workdir=workdir,
            deadline_s=deadline_s(scenario, time_scale),
            agent_clock=session.set_agent_clock,
        )
        outcome, stopped_ns = _run_watched(adapter, req, session, scenario)
        journal = _settled_journal(session)
        debug_files = _read_debug_files(debug_dir)
    gateway.drop_session(session.id)
    status, error = settle(outcome.status, outcome.error, journal)
    return Drive(
        status=status,
        error=error,
        crashed=outcome.crashed,
        journal=journal,
        events=outcome.events,
        agent_log=outcome.log,
        time_scale=time_scale,
        api_key=api_key,
        debug_files=debug_files,
        debug_format=outcome.debug_format,
        stopped_ns=stopped_ns,
        duration_s=time.monotonic() - began,
        outside_attempts=outcome.outside_attempts,
    )


def _run_watched(
    adapter: Adapter, req: RunRequest, session: SessionHandle, scenario: Scenario
) -> tuple[RunOutcome, int]:
    """The adapter's run, with the abort watcher beside it when the scenario asks for one;
    returns the outcome and when the agent stopped (or was stopped)."""
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
        stopped_ns = time.monotonic_ns()
        done.set()
        if watcher:
            watcher.join(1)
    return outcome, stopped_ns
