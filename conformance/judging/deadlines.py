"""A scenario's deadline, never shorter than what a correct agent must spend in it.

Theory of operation: a scenario's ``deadline`` is written by hand, and a hand-written number can
be shorter than correct behaviour (eleven 429s need about 200 nominal seconds of backoff at the
upper edge of the jitter band). ``floor_s`` walks the script the way a correct agent consumes it
and adds up every wait the criteria allow it: the backoff before each retry at the upper edge of
its band (RTY-03, capped at 32 s), a server-asked wait plus its band (RTY-01/02/13, bounded by
RTY-14's cap), the time the gateway itself takes to serve each step (stalls, delayed headers,
dribbles), and tool time (hangs up to the scenario's tool limit, tool retries). The runner uses
``max(deadline, floor)``, scaled, plus a real-time allowance per attempt and a grace; it never
uses less.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue import by_id
from conformance.judging.evidence import RETRYABLE_STATUSES, nominal_backoff
from fakes import Scenario, Step
from fakes.faults import FAULTS
from fakes.plan import make_plan

__all__ = [
    "DEADLINE_GRACE_S",
    "DEFAULT_DEADLINE_S",
    "ATTEMPT_OVERHEAD_S",
    "JITTER_LOW",
    "JITTER_HIGH",
    "MAX_RETRIES",
    "EXCESSIVE_WAIT_S",
    "floor_s",
    "deadline_s",
]

DEFAULT_DEADLINE_S = 30.0
# Real seconds added to every deadline: process start-up and scheduling, never a scaled wait.
DEADLINE_GRACE_S = 5.0
# Real seconds per model request: connection set-up, parsing, the agent's own work.
ATTEMPT_OVERHEAD_S = 0.05
# The edges of the jitter band (RTY-03) and the retry budget of one request (RTY-04).
JITTER_LOW = by_id("RTY-03").numbers["jitter_low"]
JITTER_HIGH = by_id("RTY-03").numbers["jitter_high"]
MAX_RETRIES = int(by_id("RTY-04").numbers["retries"])
# The longest wait a correct agent may take for an excessive asked wait (RTY-14).
EXCESSIVE_WAIT_S = float(by_id("RTY-14").numbers["max_wait_s"])
# Tool retries of a transient failure (TOL-07): at most this long in all, nominal.
TOOL_RETRY_ALLOWANCE_S = 2.0
# A tool without a scenario limit is given up after this long (the reference agent's default).
DEFAULT_TOOL_LIMIT_S = 120.0


def _serve_s(step: Step) -> float:
    """Nominal seconds the gateway spends serving ``step`` (the slower of the two modes)."""
    worst = 0.0
    for stream in (True, False):
        plan = make_plan(step, {"stream": stream, "model": "m", "messages": []})
        worst = max(worst, plan.header_delay + sum(c.delay for c in plan.chunks))
    return worst


def _asked_s(step: Step) -> float | None:
    """The wait an ``http_error`` step asks for (Retry-After, retry-after-ms, an HTTP-date)."""
    p = step.fault_params
    if p.get("retry_after_date") is not None:
        return float(p["retry_after_date"])
    headers = {str(k).lower(): v for k, v in (p.get("headers") or {}).items()}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000.0
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except (TypeError, ValueError):
        return None
    return None


def _retried(step: Step) -> bool:
    """Whether a correct agent waits before the attempt after this step's failure."""
    fault = FAULTS.get(step.fault_name or "")
    what = fault.symptom if fault is not None else None
    if what == "connection_failed":
        return True
    return what == "http_status" and int(step.fault_params.get("status", 0)) in RETRYABLE_STATUSES


def _wait_after(step: Step, n: int) -> float:
    """The longest wait a correct agent takes before retry ``n`` after ``step`` failed."""
    asked = _asked_s(step)
    if asked is not None and asked > EXCESSIVE_WAIT_S:
        return EXCESSIVE_WAIT_S  # RTY-14: a capped wait is at most this long
    if asked is not None:
        return asked * JITTER_HIGH  # RTY-01: no later than the asked wait plus the band
    return nominal_backoff(n) * JITTER_HIGH


def _tool_s(scenario: Scenario) -> float:
    """Nominal seconds of tool time: every scripted hang up to the tool limit, plus retries."""
    limit = float(scenario.config.get("tool_timeout_s") or DEFAULT_TOOL_LIMIT_S)
    total = 0.0
    for behaviours in scenario.tool_host.values():
        for b in behaviours or []:
            if not isinstance(b, dict):
                continue
            if "hang" in b:
                total += min(float(b["hang"]), limit)
            elif "transient" in b:
                total += TOOL_RETRY_ALLOWANCE_S
    return total


def floor_s(scenario: Scenario) -> tuple[float, int]:
    """The nominal seconds a correct agent may need in ``scenario``, and its model requests.

    Retry numbers count consecutive failed attempts of one request mode; a step that names the
    other mode (``match: {stream: ...}``) starts a new run, as a fallback does (STR-05).
    """
    total, attempts, n = 0.0, 0, 0
    mode: Any = None
    for step in scenario.script:
        stream = step.match.get("stream")
        if stream is not None and stream != mode:
            mode, n = stream, 0
        serve = _serve_s(step)
        # A step served many times (a probe's "always fail") is consumed by a correct agent
        # at most one request's budget at a time.
        for _ in range(min(step.times, MAX_RETRIES + 1)):
            attempts += 1
            total += serve
            if _retried(step):
                n += 1
                if n <= MAX_RETRIES:
                    total += _wait_after(step, n)
            elif step.fault_name is None:
                n = 0
    refused = scenario.refuse_connections or {}
    if refused:
        # Connections are refused for a window and a refused attempt leaves no trace: the
        # first retry to get through is the first whose elapsed backoff, at the lower edge of
        # the band, reaches the window's end; at the upper edge it comes that much later.
        secs = float(refused.get("seconds", 0))
        k = next((n for n in range(1, MAX_RETRIES + 1) if JITTER_LOW * _backoff_to(n) >= secs), 0)
        total += JITTER_HIGH * _backoff_to(k) if k else secs
    return total + _tool_s(scenario), attempts


def _backoff_to(n: int) -> float:
    """Nominal seconds of the first ``n`` backoff waits."""
    return sum(nominal_backoff(k) for k in range(1, n + 1))


def deadline_s(scenario: Scenario, time_scale: float) -> float:
    """A scenario's real deadline: the longer of its own and its floor, scaled, plus a real
    allowance per model request and the grace."""
    floor, attempts = floor_s(scenario)
    nominal = max(scenario.deadline or DEFAULT_DEADLINE_S, floor)
    return nominal * time_scale + attempts * ATTEMPT_OVERHEAD_S + DEADLINE_GRACE_S
