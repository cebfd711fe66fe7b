"""A read model over one scenario run: the gateway journal plus the agent's events.

Theory of operation: checks judge from the wire first. A chat "attempt" is one journal entry of
kind ``chat``; attempts are grouped per request mode (``stream`` true/false) into retry runs: an
attempt that follows a failed attempt of the same mode is a retry, numbered from 1. The wait
before a retry is measured from the end of the failed response (``response.t_end_ns``, or the
latest time the gateway recorded for it) to the retry's arrival, divided by the run's time scale
so it is expressed in scenario (nominal) seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeGuard, cast

from conformance.catalogue import by_id
from conformance.judging.canon import canonical_journal
from conformance.judging.executions import tool_executions
from conformance.judging.timing import DEFAULT_TIMING, EARLY_SLACK_S, LATE_FLOOR_S, Timing
from conformance.judging.wire_reply import wire_reply
from fakes.compaction import is_compaction
from fakes.faults import FAULTS
from fakes.journal import ChatEntry, Entry, Journal, Response, ToolEntry

__all__ = [
    "Evidence",
    "Retry",
    "response_of",
    "RETRYABLE_STATUSES",
    "SLACK_REAL_S",
    "LATE_SLACK_REAL_S",
    "nominal_backoff",
    "asked_wait",
    "is_failed",
    "symptom",
]

# Statuses the retry policy covers (429, 5xx of RTY-05, 408/409 of RTY-16).
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# Scheduling slack per attempt, in real seconds: an attempt may come this much early...
SLACK_REAL_S = EARLY_SLACK_S
# ...and at least this much late (a run measures how much more: ``conformance.judging.timing``): a
# loaded machine delays wake-ups far more than it advances them.
LATE_SLACK_REAL_S = LATE_FLOOR_S


# RTY-03's backoff: a base delay doubling per retry, up to a cap (seconds).
_BACKOFF = by_id("RTY-03").numbers


def nominal_backoff(n: int) -> float:
    """Nominal delay in seconds before retry ``n`` (1-based): min(cap, base * 2^(n-1)), RTY-03's
    numbers (min(32, 0.5 * 2^(n-1)))."""
    if n < 1:
        raise ValueError(f"retry number must be >= 1, got {n}")
    return min(float(_BACKOFF["cap_s"]), _BACKOFF["base_s"] * 2.0 ** (n - 1))


def response_of(entry: Entry) -> Response:
    """What the gateway sent back for ``entry``: its ``response`` record, or the empty record
    when there is none (nothing sent yet, a tool hang the agent abandoned). Read its fields with
    ``.get``: on the empty record each is absent."""
    return entry.get("response") or {}


def _is_chat(entry: Entry) -> TypeGuard[ChatEntry]:
    return entry.get("kind") == "chat"


def _finished(entry: Entry) -> bool:
    """Whether a streamed attempt's bytes carried its finish marker (``finish_reason``, in the
    canonical view) before whatever ended it."""
    if not _is_chat(entry) or not response_of(entry).get("stream"):
        return False
    return wire_reply(entry).finish_reason is not None


def is_failed(entry: Entry) -> bool:
    """Whether a chat attempt failed on the wire (error status, no response, or broken)."""
    resp = entry.get("response")
    if not resp:
        return True
    status = resp.get("status")
    if status is None or status >= 400:
        return True
    # The fault's own rule (``fakes.faults``), else: broken if the connection broke or the
    # fault is one that breaks an attempt.
    fault = FAULTS.get(entry.get("fault") or "")
    if fault is not None and fault.symptom == "broken_stream" and _finished(entry):
        # The connection broke (or the client gave up in a stall) after the finish marker: the
        # turn is complete, judged by the marker (seed 000; STR-13), not a failed attempt.
        return False
    if fault is not None:
        verdict = fault.attempt_failed(resp, entry.get("fault_params") or {})
        if verdict is not None:
            return verdict
    return resp.get("end") in ("reset", "close") or (fault is not None and fault.breaks)


def symptom(entry: Entry) -> str | None:
    """What the client met in this attempt, whatever fault made it (``Fault.symptom`` of
    ``fakes.faults``); None without a fault, or for one a client need not recover from."""
    fault = FAULTS.get(entry.get("fault") or "")
    return fault.symptom if fault is not None else None


def _header(entry: Entry, name: str) -> str | None:
    headers = response_of(entry).get("headers") or {}
    for k, v in headers.items():
        if k.lower() == name:
            return str(v)
    return None


def asked_wait(entry: Entry) -> tuple[float, str] | None:
    """The wait the server asked for, in nominal seconds, and the header that asked.

    ``retry-after-ms`` is preferred over ``retry-after``; an HTTP-date is measured from the
    wall-clock moment the headers were written (``response.t_wall_headers``; in the agent's
    clock, ``t_agent_wall_headers``, when it ran on a fast one).
    """
    ms = _header(entry, "retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0, "retry-after-ms"
        except ValueError:
            pass
    ra = _header(entry, "retry-after")
    if ra is None:
        return None
    try:
        return float(ra), "retry-after"
    except ValueError:
        pass
    resp = response_of(entry)
    # In the agent's clock when it ran on a fast one: the date was rendered in that clock.
    wall = resp.get("t_agent_wall_headers", resp.get("t_wall_headers"))
    try:
        when = parsedate_to_datetime(ra).timestamp()
    except (TypeError, ValueError):
        return None
    if wall is None:
        return None
    return max(0.0, when - float(wall)), "retry-after-date"


@dataclass(frozen=True)
class Retry:
    """One retry: the failed attempt, the attempt that followed it, its number and wait."""

    failed: ChatEntry
    attempt: ChatEntry
    n: int
    wait: float  # nominal seconds


@dataclass
class Evidence:
    """Everything one scenario run left behind, with read helpers for the checks."""

    scenario: dict[str, Any]
    # The journal as recorded: what was on the wire, in the run's dialect.
    raw_journal: Journal
    events: list[dict[str, Any]] = field(default_factory=list)
    time_scale: float = 1.0
    capabilities: set[str] = field(default_factory=set)
    debug_files: dict[str, str] = field(default_factory=dict)
    # The format of the debug files when they are the agent's own files (its reader:
    # conformance.judging.debug_formats); None: the harness's format (contracts §5).
    debug_format: str | None = None
    # Secret values handed to the agent (API key); only used to prove they leaked nowhere.
    secrets: tuple[str, ...] = ()
    agent_log: str = ""
    # The run's timing allowances (measured at its start; the floors when nothing was measured).
    timing: Timing = DEFAULT_TIMING
    # An agent on a fast clock (conformance.adapters.warp): its own work between two attempts
    # is not sped up, so each wait on the wire carries that much real time more, which the
    # calibration measured (mean and spread, real seconds). Waits are judged with the mean
    # taken off and the slack widened by the spread.
    overhead_s: float = 0.0
    overhead_spread_s: float = 0.0
    # When the agent had stopped (its turn over, or the run cut at its deadline), on the
    # journal's monotonic clock: how long a silence lasted that no request ended. None when
    # unknown (evidence built by hand).
    stopped_ns: int | None = None
    # Its chat-completions view, which the checks read: entries of other dialects translated
    # (conformance.judging.canon), the same dicts' shape.
    journal: Journal = field(init=False, repr=False)
    _tools: list[ToolEntry] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        raw = self.raw_journal
        if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
            raise ValueError("Evidence.raw_journal must be a dict with an 'entries' list")
        # canonical_journal keeps the journal's shape: plain dicts in, plain dicts out.
        self.journal = cast(Journal, canonical_journal(cast(dict[str, Any], raw)))
        if not self.time_scale or self.time_scale <= 0:
            raise ValueError(f"Evidence.time_scale must be > 0, got {self.time_scale!r}")
        self._tools = tool_executions(self.journal["entries"])

    # --- wire -------------------------------------------------------------------------------
    @property
    def slack(self) -> float:
        """The per-attempt scheduling slack in nominal seconds."""
        return (self.timing.early_slack_s + self.overhead_spread_s) / self.time_scale

    def slack_after(self, failed: Entry | None) -> float:
        """How early the attempt after ``failed`` may come, in nominal seconds: the slack, and
        when ``failed`` ended with the client gone, the gateway's wake-up allowance too (that
        end is stamped when the gateway's loop noticed it, late by its lag, so the wait after it
        reads short)."""
        gone = failed is not None and response_of(failed).get("end") == "client_gone"
        return self.slack + (self.timing.wakeup_s / self.time_scale if gone else 0.0)

    @property
    def late_slack(self) -> float:
        """How late an attempt may be, beyond its upper bound, in nominal seconds."""
        return (self.timing.late_slack_s + self.overhead_spread_s) / self.time_scale

    def both_units(self, nominal: float) -> str:
        """A duration in scenario seconds with the real time beside: "9.040 s (180.8 ms real)"."""
        return f"{nominal:.3f} s ({nominal * self.time_scale * 1000:.1f} ms real)"

    @property
    def reaction(self) -> float:
        """The agent's own time between deciding to send a request and its arrival, at most,
        in nominal seconds (its measured reaction or fast-clock overhead): a limit the agent
        times from its own decision may end that much sooner after the arrival."""
        return self.overhead_s / self.time_scale

    def chat(self) -> list[ChatEntry]:
        """Chat attempts in arrival order: every request the agent sent is evidence, those
        served by ``otherwise`` and those the script could not serve (a 500, failed) included."""
        entries = [e for e in self.journal["entries"] if _is_chat(e)]
        return sorted(entries, key=lambda e: (e.get("t_arrival_ns", 0), e.get("seq", 0)))

    # --- the scenario, as the checks read it (one home for its optional parts) --------------
    @property
    def config(self) -> dict[str, Any]:
        """The scenario's ``config`` (empty when it sets none)."""
        return dict(self.scenario.get("config") or {})

    @property
    def history(self) -> list[dict[str, Any]]:
        """The messages the scenario gave before the prompt (``history``)."""
        return [m for m in self.scenario.get("history") or [] if isinstance(m, dict)]

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The hosted tools the scenario offered."""
        return [t for t in self.scenario.get("tools") or [] if isinstance(t, dict)]

    @property
    def prompt(self) -> str:
        return str(self.scenario.get("prompt") or "")

    @property
    def script(self) -> list[dict[str, Any]]:
        """The scenario's script steps, as written."""
        return [s for s in self.scenario.get("script") or [] if isinstance(s, dict)]

    @property
    def abort_step(self) -> int | None:
        """The script step whose headers the user's abort follows (None: no abort)."""
        step = (self.scenario.get("abort") or {}).get("when_step")
        return int(step) if step is not None else None

    def is_compaction(self, entry: Entry) -> bool:
        """Whether a chat attempt is a compaction request, in the agent's own words: the one
        rule the gateway matches scenario steps by (``fakes.compaction``), the scenario's prompt
        left out of the words it looks for."""
        return is_compaction(entry.get("body") or {}, self.prompt)

    def bodies(self) -> list[dict[str, Any]]:
        """The parsed bodies of the chat attempts, in order."""
        return [e.get("body") or {} for e in self.chat()]

    def tool_entries(self) -> list[ToolEntry]:
        """Hosted tool executions in arrival order, over HTTP or MCP, in one shape (an MCP
        ``tools/call`` as the tool host's HTTP entry: ``conformance.judging.executions``)."""
        return list(self._tools)

    def sent_after(self, t0_ns: int) -> list[Entry]:
        """What the agent sent after ``t0_ns``, in arrival order: model requests and hosted tool
        executions, over HTTP or MCP (an MCP ``tools/call`` is one; its session's other messages,
        a cancellation among them, are not)."""
        sent: list[Entry] = [*self.chat(), *self._tools]
        later = [e for e in sent if e.get("t_arrival_ns", 0) > t0_ns]
        return sorted(later, key=lambda e: (e.get("t_arrival_ns", 0), e.get("seq", 0)))

    @staticmethod
    def mode(entry: Entry) -> bool:
        """The request mode: True for streaming."""
        return bool((entry.get("body") or {}).get("stream", False))

    @staticmethod
    def end_ns(entry: Entry) -> int:
        """When the attempt's response ended (the latest time recorded for it)."""
        resp = response_of(entry)
        for t in (resp.get("t_end_ns"), resp.get("t_headers_ns")):
            if t is not None:
                return int(t)
        return int(entry.get("t_arrival_ns", 0))

    def silence_after(self, entry: Entry) -> float | None:
        """Nominal seconds from ``entry``'s end until the agent stopped (None when unknown)."""
        if self.stopped_ns is None:
            return None
        return max(0.0, (self.stopped_ns - self.end_ns(entry)) / 1e9 / self.time_scale)

    def gap(self, before: Entry, after: Entry) -> float:
        """Nominal seconds from the end of ``before``'s response to ``after``'s arrival (less a
        fast-clock agent's measured overhead)."""
        real = (int(after["t_arrival_ns"]) - self.end_ns(before)) / 1e9 - self.overhead_s
        return real / self.time_scale

    def runs(self, stream: bool) -> list[list[ChatEntry]]:
        """Retry runs of one mode: consecutive attempts, each after a failure of the previous."""
        runs: list[list[ChatEntry]] = []
        current: list[ChatEntry] = []
        for e in (e for e in self.chat() if self.mode(e) == stream):
            if current and is_failed(current[-1]):
                current.append(e)
            else:
                if current:
                    runs.append(current)
                current = [e]
        if current:
            runs.append(current)
        return runs

    def retries(self) -> list[Retry]:
        """Every retry of either mode, with its number within its run and its wait."""
        out: list[Retry] = []
        for stream in (True, False):
            for run in self.runs(stream):
                for i in range(1, len(run)):
                    out.append(Retry(run[i - 1], run[i], i, self.gap(run[i - 1], run[i])))
        return sorted(out, key=lambda r: r.attempt.get("t_arrival_ns", 0))

    # --- agent events -----------------------------------------------------------------------
    def events_of(self, kind: str) -> list[dict[str, Any]]:
        """Agent events of one type, in order."""
        return [e for e in self.events if e.get("type") == kind]

    def shown_messages(self) -> list[dict[str, Any]]:
        """Messages the user still sees at the end: removals applied (meta ones included)."""
        removed = {e.get("id") for e in self.events_of("removed")}
        return [m for m in self.events_of("message") if m.get("id") not in removed]

    def turn_ends(self) -> list[dict[str, Any]]:
        return self.events_of("turn_end")

    def errors(self) -> list[dict[str, Any]]:
        return self.events_of("error")
