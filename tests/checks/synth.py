"""Hand-built journals for check tests: attempts with explicit timings in nominal seconds."""

from __future__ import annotations

from typing import Any

from conformance.evidence import Evidence

SCALE = 0.02
NS = 1_000_000_000


class Journal:
    """Builds chat entries; times are nominal seconds, stored as scaled monotonic ns."""

    def __init__(self, scale: float = SCALE) -> None:
        self.scale = scale
        self.t = 1.0  # nominal seconds
        self.entries: list[dict[str, Any]] = []

    def _ns(self, t: float) -> int:
        return int(round(t * self.scale * NS))

    def chat(
        self,
        status: int | None = 200,
        *,
        wait: float = 0.0,
        stream: bool = True,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        end: str = "complete",
        fault: str | None = None,
        duration: float = 0.01,
    ) -> dict[str, Any]:
        """Append an attempt arriving ``wait`` nominal seconds after the previous one ended."""
        self.t += wait
        arrival = self.t
        self.t += duration
        b = (
            body
            if body is not None
            else {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
        )
        response = None
        if status is not None:
            response = {
                "status": status,
                "headers": {k.lower(): v for k, v in (headers or {}).items()},
                "stream": stream,
                "t_headers_ns": self._ns(arrival + duration / 2),
                "t_end_ns": self._ns(self.t),
                "end": end,
            }
        entry = {
            "seq": len(self.entries),
            "kind": "chat",
            "step": len(self.entries),
            "body": b,
            "t_arrival_ns": self._ns(arrival),
            "fault": fault if fault else ("http_error" if status and status >= 400 else None),
            "response": response,
            "harness_error": None,
        }
        self.entries.append(entry)
        return entry

    def evidence(self, events: list[dict[str, Any]] | None = None, **kw: Any) -> Evidence:
        return Evidence(
            scenario=kw.pop("scenario", {"id": "synthetic"}),
            journal={"session": "s", "time_scale": self.scale, "entries": self.entries},
            events=events or [],
            time_scale=self.scale,
            **kw,
        )
