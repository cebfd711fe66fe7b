"""What one request brought back (an :class:`Exchange`), and the probe's one exception.

An exchange keeps the body as the raw chunks exactly as they arrived, so that a recording can
make the fake gateway send the same bytes again; the SSE events are parsed from them on demand.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError

from conformance.errors import ConformanceError

__all__ = ["Exchange", "ProbeError"]


class ProbeError(ConformanceError):
    """The probe could not run (bad usage, gateway unreachable, key refused): exit status 2."""


@dataclass
class Exchange:
    """One request and what came back, the body as the raw chunks that arrived."""

    name: str
    stream: bool
    request: dict[str, Any]
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    end: str = "complete"  # complete | incomplete | reset | timeout | unreachable
    error: str | None = None
    elapsed_ms: float = 0.0

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def events(self) -> list[dict[str, Any]]:
        """SSE events of the body (``event``, ``data``, ``json`` when the data parses)."""
        if not self.is_sse():
            return []
        resp = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=self.body)
        out = []
        try:
            for ev in EventSource(resp).iter_sse():
                item: dict[str, Any] = {"event": ev.event, "data": ev.data, "json": None}
                with contextlib.suppress(ValueError):
                    item["json"] = json.loads(ev.data)
                out.append(item)
        except SSEError:  # pragma: no cover - content type checked above
            return []
        return out

    def is_sse(self) -> bool:
        return "text/event-stream" in self.headers.get("content-type", "")

    def json_body(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
