"""Hand-built journals for check tests: attempts with explicit timings in nominal seconds."""

from __future__ import annotations

import copy
from typing import Any

from conformance.judging.evidence import Evidence

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

    def event(self, type_: str, *, after: float = 0.001, **fields: Any) -> dict[str, Any]:
        """An agent event read ``after`` nominal seconds past the latest attempt's end."""
        self.t += after
        return {"type": type_, "t_ns": self._ns(self.t), **fields}

    def evidence(self, events: list[dict[str, Any]] | None = None, **kw: Any) -> Evidence:
        return Evidence(
            scenario=kw.pop("scenario", {"id": "synthetic"}),
            raw_journal={"session": "s", "time_scale": self.scale, "entries": self.entries},
            events=events or [],
            time_scale=self.scale,
            **kw,
        )


def cut(ev: Evidence, at_ns: int, *, in_flight: str = "none") -> Evidence:
    """The evidence a run cut short at ``at_ns`` (monotonic ns) leaves behind.

    Entries that arrived before the cut are kept; one whose response had not ended is in
    flight: ``in_flight="none"`` drops its response (not yet recorded), ``"open"`` keeps the
    status with no end and no bytes (headers being written). Events read before the cut are
    kept, never a ``turn_end``: the turn did not end.
    """
    entries = []
    for e in ev.raw_journal["entries"]:
        if int(e.get("t_arrival_ns", 0)) >= at_ns:
            continue
        e = copy.deepcopy(e)
        resp = e.get("response")
        if resp and int(resp.get("t_end_ns") or resp.get("t_headers_ns") or 0) >= at_ns:
            if in_flight == "none":
                e["response"] = None
            else:
                resp.update(t_end_ns=None, t_headers_ns=None, sent="", sent_bytes=0)
        entries.append(e)
    events = [
        x
        for x in ev.events
        if x.get("type") != "turn_end" and (x.get("t_ns") is None or x["t_ns"] < at_ns)
    ]
    return Evidence(
        scenario=ev.scenario,
        raw_journal={**ev.raw_journal, "entries": entries},
        events=events,
        time_scale=ev.time_scale,
        capabilities=ev.capabilities,
        debug_files=ev.debug_files,
        debug_format=ev.debug_format,
        secrets=ev.secrets,
        agent_log=ev.agent_log,
    )


def cut_points(ev: Evidence) -> list[int]:
    """Every moment the evidence changes: arrivals, response ends, events (plus the very end)."""
    points = set()
    for e in ev.raw_journal["entries"]:
        points.add(int(e.get("t_arrival_ns", 0)))
        resp = e.get("response") or {}
        for k in ("t_headers_ns", "t_end_ns"):
            if resp.get(k) is not None:
                points.add(int(resp[k]))
    points.update(int(x["t_ns"]) for x in ev.events if x.get("t_ns") is not None)
    ordered = sorted(points)
    # Just after each moment as well, so that each change is seen both undone and done.
    return sorted(set(ordered) | {p + 1 for p in ordered})


def turn_end(reason: str = "completed") -> dict[str, Any]:
    """The agent's end of turn: what lets a check say that something never came."""
    return {"type": "turn_end", "reason": reason}
