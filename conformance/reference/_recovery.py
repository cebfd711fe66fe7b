"""The recovery core's recovery policies: ordered lists of small functions, first taker wins.

A failed chat attempt goes through :data:`ATTEMPT_POLICIES` in order, a failed step (its modes
spent) through :data:`STEP_POLICIES`. Each policy either takes the failure, carries out its
recovery on the core and returns the phase the turn is in after it, or returns None to pass the
failure on. The last policy of each list always takes it. A policy's switch in
:class:`~conformance.reference._behaviours.Behaviours` turns it off for the fuzzer's broken
copies.

A policy acts on the core through :class:`RecoveringCore`, the part of the core's request layer
it may read and change: the request layer (:mod:`._requests`) runs the policies and implements
that protocol, so this module depends on no layer of the core (mypy checks that
:class:`~._requests.Requests` provides it wherever it passes itself to a policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from . import retry
from ._actions import Action, NoteRetry, RefreshCredentials
from ._behaviours import Behaviours
from ._messages import (
    compaction_body,
    corrected_max_tokens,
    has_media,
    is_media_error,
    strip_media,
    strip_private,
)
from ._transitions import Phase

__all__ = [
    "ATTEMPT_POLICIES",
    "MAX_COMPACTION_FAILURES",
    "OVERLOADS_BEFORE_FALLBACK",
    "STEP_POLICIES",
    "AttemptFailure",
    "RecoveringCore",
    "StepFailure",
]

OVERLOADS_BEFORE_FALLBACK = 3
MAX_COMPACTION_FAILURES = 3
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class AttemptFailure:
    """One chat attempt failed: an HTTP status with its error text, or a connection error."""

    status: int | None
    headers: Mapping[str, str]
    text: str
    conn: str | None  # the connection error kind when status is None
    received_at: datetime | None


@dataclass(frozen=True)
class StepFailure:
    """A step's recovery is over: the error to show, unless a turn-level recovery applies."""

    kind: str
    message: str
    body: str  # the error body, where a window overflow states the room left


class RecoveringCore(Protocol):
    """What the recovery policies read and change of the core (its request layer)."""

    b: Behaviours
    config: dict[str, Any]
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    overloads: int
    compaction_failures: int
    _out: list[Action]
    _rand: Callable[[], float]
    _body: dict[str, Any]  # the current step's body, without "stream"
    _retries: int
    _wait_timer: int | None
    _refreshed: bool
    _media_stripped: bool
    _lowered: bool
    _compacted: bool
    _pending_error: tuple[str, str] | None

    def _send(self) -> Phase:
        """Send the current step's body again, in the current mode."""
        ...

    def _send_aux(self, purpose: str, body: dict[str, Any]) -> None:
        """Send an auxiliary request (``compact``, ``title``)."""
        ...

    def _next_step(self) -> Phase:
        """Go on with the turn's next step."""
        ...

    def _surface(
        self, kind: str, message: str, *, body: str = ..., fallback_ok: bool = ...
    ) -> Phase:
        """Recovery in this mode is over: the non-streaming fallback, or the step fails."""
        ...

    def _max_retries(self) -> int | None:
        """Retries per request mode (None: no limit)."""
        ...

    def _named(self, message: str) -> str:
        """The error text plus the turn-level recovery already tried."""
        ...

    def _start_timer(self, delay_s: float, purpose: str) -> int: ...

    def _leak(self, kind: str, message: str) -> None: ...

    def _error(self, kind: str, message: str) -> Phase: ...


def switch_model(core: RecoveringCore, f: AttemptFailure) -> Phase | None:
    """Three overloads in a row: the fallback model (private fields stripped), a fresh budget."""
    fb = core.config.get("fallback_model")
    # Broken copies: switch on the first overload (MFB-03), or on a missing or forbidden
    # model too (MFB-02).
    needed = OVERLOADS_BEFORE_FALLBACK if core.b.overloads_before_fallback else 1
    due = core.overloads >= needed or (
        not core.b.fallback_on_overload_only and f.status in (403, 404)
    )
    if not (core.b.model_fallback and fb and core.model != fb and due):
        return None
    core.model, core.overloads, core._retries = str(fb), 0, 0
    messages = core._body["messages"]
    core._body = {
        **core._body,
        "model": core.model,
        "messages": strip_private(messages) if core.b.strip_private_on_fallback else messages,
    }
    return core._send()


def refresh_credentials(core: RecoveringCore, f: AttemptFailure) -> Phase | None:
    """RTY-10: an expired-credential 401 refreshes once and resends the identical request."""
    if not (
        core.b.credential_refresh
        and f.status == 401
        and "expired" in f.text.lower()
        and not core._refreshed
    ):
        return None
    core._refreshed = True
    core._leak("auth", f.text)
    core._out.append(RefreshCredentials())
    return core._send()


def strip_media_once(core: RecoveringCore, f: AttemptFailure) -> Phase | None:
    """CTX-05: media too large resends once without the media (kept out of later steps too)."""
    if not (
        core.b.media_stripping
        and not core._media_stripped
        and is_media_error(f.status, f.text)
        and has_media(core._body["messages"])
    ):
        return None
    core._media_stripped = True
    core._leak("media_too_large", f.text)
    core.messages = strip_media(core.messages)
    core._body = {**core._body, "messages": strip_media(core._body["messages"])}
    return core._send()


def retry_or_surface(core: RecoveringCore, f: AttemptFailure) -> Phase:
    """The retry decision (:func:`retry.decide`): wait and retry, or surface the failure."""
    status, text = f.status, f.text
    conn = f.conn
    if status is None and conn not in retry.CONNECTION_ERROR_KINDS:
        conn = "reset"
    d = retry.decide(
        retries_done=core._retries,
        now=f.received_at or _EPOCH,
        rand=core._rand,
        status=status,
        connection_error=conn if status is None else None,
        headers=f.headers,
        honour_retry_after=core.b.honour_retry_after,
        retry_after_on_time=core.b.retry_after_on_time,
        backoff=core.b.backoff,
        cap=core.b.backoff_cap,
        jitter=core.b.jitter,
        full_base=core.b.backoff_base,
        final_4xx=core.b.final_client_errors,
        bound_retry_after=core.b.bound_retry_after,
        honour_should_retry=core.b.should_retry_header,
        max_retries=core._max_retries(),
    )
    allowed = d.retry
    if status is None and not core.b.retry_connection_errors:
        allowed = False
    if status is not None and status >= 500 and not core.b.retry_5xx:
        allowed = False
    if not allowed:
        exhausted = d.retry or core._retries > 0 or "after" in d.reason
        msg = f"{d.reason}: {text}" if text else d.reason
        if core._retries:
            msg += f" (after {core._retries} retries)"
        kind = d.kind
        if "context_length_exceeded" in text or "prompt is too long" in text:
            kind = "prompt_too_long"
        elif is_media_error(status, text):
            kind = "media_too_large"
        return core._surface(
            kind,
            msg,
            body=text,
            fallback_ok=exhausted
            and d.delay_s is None
            and (status is None or status in retry.RETRYABLE_STATUSES or status >= 500),
        )
    core._leak(d.kind, d.reason)
    core._retries += 1
    core._out.append(NoteRetry(core._retries, d.delay_s, d.reason))
    core._wait_timer = core._start_timer(d.delay_s or 0.0, "wait")
    return Phase.WAIT


def lower_max_tokens(core: RecoveringCore, f: StepFailure) -> Phase | None:
    """RTY-11: a window overflow that states the room left lowers ``max_tokens`` once."""
    fixed = corrected_max_tokens(f.body)
    if fixed is None:
        return None
    if not core.b.window_correction:
        # Broken copy: the output-limit overflow is surfaced as it is (no other recovery).
        return core._error(f.kind, core._named(f.message))
    if fixed < core.max_tokens and not core._lowered:
        core.max_tokens, core._lowered = fixed, True
        return core._next_step()
    return None


def compact_once(core: RecoveringCore, f: StepFailure) -> Phase | None:
    """CTX-01: a prompt too long gets one compaction request per turn (LOP-05 breaker)."""
    if not (
        f.kind == "prompt_too_long"
        and core.b.context_recovery
        and (not core._compacted or not core.b.one_compaction_per_turn)
        and (core.compaction_failures < MAX_COMPACTION_FAILURES or not core.b.compaction_breaker)
    ):
        return None
    core._compacted = True  # one reactive compaction per user turn
    core._pending_error = (f.kind, f.message)
    core._send_aux("compact", compaction_body(core.model, core.messages))
    return Phase.COMPACT


def show_error(core: RecoveringCore, f: StepFailure) -> Phase:
    """No recovery left: the error, naming what was tried (ERR-04), ends the turn."""
    return core._error(f.kind, core._named(f.message))


ATTEMPT_POLICIES: tuple[Callable[[RecoveringCore, AttemptFailure], Phase | None], ...] = (
    switch_model,
    refresh_credentials,
    strip_media_once,
    retry_or_surface,
)
STEP_POLICIES: tuple[Callable[[RecoveringCore, StepFailure], Phase | None], ...] = (
    lower_max_tokens,
    compact_once,
    show_error,
)
