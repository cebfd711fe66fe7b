"""What the server writes for one request: a ``Plan`` of byte ``Chunk``s and how it ends.

A module of its own so that both the renderer (``fakes.plan``) and the fault primitives
(``fakes.faults``) build plans without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Chunk", "Plan", "SSE_HEADERS", "JSON_HEADERS"]

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass
class Chunk:
    """Bytes to write after waiting ``delay`` unscaled seconds; ``event`` counts data events.

    The server writes every chunk that is due in one go: consecutive chunks are joined into one
    write up to a timed point (a chunk with a ``delay``) or a chunk with ``flush``, after which
    what was joined goes out, flushed to the socket, before the next chunk (a write boundary
    without a wait: ``rechunk``). Where the writes fall never changes the bytes.
    """

    data: bytes
    delay: float = 0.0
    event: bool = True
    flush: bool = False


@dataclass
class Plan:
    """Everything the server needs to answer one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    chunks: list[Chunk] = field(default_factory=list)
    ending: str = "complete"  # complete | reset | close
    fault: str | None = None
    full_bytes: int = 0
    cut_at_byte: int | None = None
    header_delay: float = 0.0
    reset_before_headers: bool = False
    retry_after_date: float | None = None
    harness_error: str | None = None
    secrets: tuple[str, ...] = ()  # echoed in the body; the journal keeps [REDACTED] instead
