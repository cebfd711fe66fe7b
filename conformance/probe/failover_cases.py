"""What the failover probe asks of a gateway: the policy it is configured with and the cases.

Each case is a fault of the *primary* upstream (a scenario of its own, served by a fake gateway
session of its own) and a healthy *secondary*; the gateway under test is configured (see
``failover_config``) to retry the primary and fail over to the secondary. The two upstreams
answer with different texts, so what the client received tells which upstream it came from and
whether it is whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "CASES",
    "PRIMARY_TEXT",
    "SECONDARY_TEXT",
    "Case",
    "Policy",
    "primary_scenario",
    "secondary_scenario",
]

PRIMARY_TEXT = "Alpha reply from the primary upstream, complete and whole."
SECONDARY_TEXT = "Bravo reply from the secondary upstream, complete and whole."

# Statuses a well-kept gateway retries and fails over on by default.
TRANSIENT = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class Policy:
    """The small, documented set the gateway under test is configured from (docs/probe.md).

    ``retries``: further attempts on the same upstream after a failure; ``fallback``: whether
    the secondary upstream is configured; ``retry_on`` / ``fallback_on``: the statuses that may
    be retried / failed over on (where the gateway lets one say so); ``timeout_s``: seconds per
    attempt; ``honour_retry_after``: ask the gateway to wait what a 429's ``Retry-After`` says
    (where it has such a switch).
    """

    retries: int = 1
    fallback: bool = True
    retry_on: tuple[int, ...] = TRANSIENT
    fallback_on: tuple[int, ...] = TRANSIENT
    timeout_s: float = 3.0
    honour_retry_after: bool = True

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["retry_on"], d["fallback_on"] = list(self.retry_on), list(self.fallback_on)
        return d


@dataclass(frozen=True)
class Case:
    """One fault of the primary upstream.

    ``kind``: ``recoverable`` (a retry or the fallback may and should recover a complete reply)
    or ``non-retryable`` (the request itself is refused: resending it anywhere is wrong).
    ``steps``: the primary's scenario steps, in order; the last serves every request after.
    ``retry_after_s``: the ``Retry-After`` the primary's 429 carries, if any.
    """

    id: str
    title: str
    kind: Literal["recoverable", "non-retryable"]
    expect: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    retry_after_s: float | None = None


def _reply(text: str) -> dict[str, Any]:
    return {"text": text, "finish_reason": "stop", "chunk_chars": 8}


def _ok() -> dict[str, Any]:
    return {"reply": _reply(PRIMARY_TEXT)}


def _always(fault: dict[str, Any], reply: bool = True) -> list[dict[str, Any]]:
    step: dict[str, Any] = {"fault": fault}
    if reply:
        step["reply"] = _reply(PRIMARY_TEXT)
    return [step]


def _burst(n: int, fault: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"times": n, "fault": fault}, _ok()]


RECOVER = "a complete reply (from the secondary, or from the primary on a retry)"
AFTER = (
    RECOVER + ", or the failure passed on after the content already passed on; never the "
    "partial reply as a whole one, never two replies spliced"
)
REFUSE = "a clear 4xx error; the request sent once, to the primary only"

CASES: tuple[Case, ...] = (
    Case(
        "429-retry-after",
        "429 with Retry-After: 2, once",
        "recoverable",
        RECOVER + "; a retry of the primary no sooner than Retry-After",
        _burst(1, {"http_error": {"status": 429, "headers": {"Retry-After": "2"}}}),
        retry_after_s=2.0,
    ),
    Case(
        "429-no-retry-after",
        "429 without Retry-After, once",
        "recoverable",
        RECOVER,
        _burst(1, {"http_error": {"status": 429}}),
    ),
    Case(
        "500-burst",
        "500 three times in a row",
        "recoverable",
        RECOVER + "; one retry alone does not outlast the burst",
        _burst(3, {"http_error": {"status": 500}}),
    ),
    Case(
        "503-burst",
        "503 three times in a row",
        "recoverable",
        RECOVER + "; one retry alone does not outlast the burst",
        _burst(3, {"http_error": {"status": 503}}),
    ),
    Case(
        "reset-before-headers",
        "connection reset before any header, every time",
        "recoverable",
        RECOVER,
        _always({"reset_before_headers": {}}, reply=False),
    ),
    Case(
        "cut-before-content",
        "stream reset after the role chunk, before any content, every time",
        "recoverable",
        RECOVER,
        _always({"cut": {"after_events": 1, "mode": "reset"}}),
    ),
    Case(
        "cut-after-content",
        "stream reset after two content chunks, every time",
        "recoverable",
        AFTER,
        _always({"cut": {"after_events": 3, "mode": "reset"}}),
    ),
    Case(
        "stall-after-headers",
        "headers sent, then nothing for 60 s, every time",
        "recoverable",
        RECOVER + " once the attempt timeout has passed",
        _always({"stall": {"after_events": 0, "seconds": 60}}),
    ),
    Case(
        "malformed-chunk",
        "a chunk that is not JSON after the role chunk, every time",
        "recoverable",
        RECOVER + "; the bad chunk never reaches the client",
        _always({"malformed_event": {"after_events": 1, "kind": "bad_json"}}),
    ),
    Case(
        "malformed-after-content",
        "a chunk that is not JSON after two content chunks, every time",
        "recoverable",
        AFTER,
        _always({"malformed_event": {"after_events": 3, "kind": "bad_json"}}),
    ),
    Case(
        "end-without-finish",
        "the whole text and [DONE], but no finish_reason, every time",
        "recoverable",
        RECOVER + "; a reply without a finish marker is not passed on as whole",
        _always({"end_without_finish": {"done": True}}),
    ),
    Case(
        "in-band-error",
        "an error event after the role chunk, then a clean close, every time",
        "recoverable",
        RECOVER,
        _always({"in_band_error": {"after_events": 1}}),
    ),
    Case(
        "in-band-error-after-content",
        "an error event after two content chunks, then a clean close, every time",
        "recoverable",
        AFTER,
        _always({"in_band_error": {"after_events": 3}}),
    ),
    Case(
        "context-length",
        "400 context_length_exceeded, every time (the secondary: the same)",
        "non-retryable",
        REFUSE + " (the secondary has the same context window)",
        _always({"http_error": {"status": 400, "error": "prompt_too_long"}}, reply=False),
    ),
    Case(
        "bad-request",
        "400 invalid request, every time (the secondary: the same)",
        "non-retryable",
        REFUSE,
        _always({"http_error": {"status": 400}}, reply=False),
    ),
)


def _scenario(sid: str, title: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    # The last step serves every request after the others are used up.
    script = [dict(s) for s in steps]
    script[-1]["times"] = 1000
    return {
        "id": sid,
        "title": title,
        "criteria": [],
        "prompt": "failover probe",
        "script": script,
    }


def primary_scenario(case: Case) -> dict[str, Any]:
    return _scenario(f"failover-{case.id}-primary", f"primary: {case.title}", case.steps)


def secondary_scenario(case: Case) -> dict[str, Any]:
    """Healthy, except for a non-retryable case: the same request is refused there too."""
    steps = case.steps if case.kind == "non-retryable" else [{"reply": _reply(SECONDARY_TEXT)}]
    return _scenario(f"failover-{case.id}-secondary", f"secondary of {case.id}", steps)
