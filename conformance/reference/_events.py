"""Events the driver feeds to the recovery core (:mod:`conformance.reference.core`).

Each event names the request, timer or tool call it is about; the core ignores events about a
request, timer or call it no longer waits for (a cancelled stream may still deliver a chunk).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

__all__ = [
    "Aborted",
    "BodyEnded",
    "BodyFailed",
    "Chunk",
    "ConnectFailed",
    "Event",
    "HeadersReceived",
    "StopHookDone",
    "TimerFired",
    "ToolOutcome",
]


class Event:
    """Base class of everything the driver reports."""

    __slots__ = ()


@dataclass(frozen=True)
class ConnectFailed(Event):
    """The request failed before response headers: ``kind`` is ``reset``, ``timeout``, ...."""

    request_id: int
    kind: str = "reset"
    reason: str = ""


@dataclass(frozen=True)
class HeadersReceived(Event):
    """Response headers arrived. ``received_at`` (wall clock) dates a ``Retry-After`` HTTP-date."""

    request_id: int
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    received_at: datetime | None = None


@dataclass(frozen=True)
class Chunk(Event):
    """One server-sent event's ``data`` (lines joined by newlines) of a streaming 200 reply."""

    request_id: int
    data: str


@dataclass(frozen=True)
class BodyEnded(Event):
    """The body ended cleanly; ``body`` is the whole text of a non-streaming or error reply."""

    request_id: int
    body: str = ""


@dataclass(frozen=True)
class BodyFailed(Event):
    """Reading the body failed after the headers (reset, cut, timeout)."""

    request_id: int
    reason: str = ""


@dataclass(frozen=True)
class TimerFired(Event):
    """A timer started by :class:`StartTimer` ran out."""

    timer_id: int


@dataclass(frozen=True)
class ToolOutcome(Event):
    """The raw outcome of one attempt started by :class:`RunTool`; the core decides the rest.

    ``kind``: ``ok`` (``text`` is the output), ``error`` (``error_type`` and ``text`` the
    message), ``transient`` (``text`` the message; retried by the core), ``denied`` (``text`` the
    reason), or ``final`` (a batch run as one unit: ``text`` is the finished output and
    ``error_type`` its status).
    """

    call_id: str
    kind: str
    text: str = ""
    error_type: str = ""


@dataclass(frozen=True)
class StopHookDone(Event):
    """The stop hook returned; ``blocked`` is the block reason, or None."""

    blocked: str | None = None


@dataclass(frozen=True)
class Aborted(Event):
    """The user aborted the turn."""
