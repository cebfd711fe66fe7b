"""Per-session state: script cursor (step uses), tool-host cursors and the journal."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fakes.compaction import is_compaction, message_text
from fakes.journal import Entry, Journal
from fakes.refuse import RefusingPort
from fakes.retention import REDACTED, Retention
from fakes.scenario import Scenario, Step

__all__ = ["SessionState", "select_step", "redact_headers", "REDACTED", "SECRET_HEADERS"]

# The headers that carry credentials, by lower-cased name: the harness's one list (the probe
# reads it; `reports`, which may import nothing of ours, keeps a copy a test holds equal).
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "proxy-authorization",
        "api-key",  # Azure OpenAI
        "cf-aig-authorization",  # Cloudflare AI Gateway
        "x-portkey-api-key",  # Portkey
    }
)


def redact_headers(headers: Any) -> dict[str, str]:
    """Lower-cased header names; secret values replaced by ``[REDACTED]``."""
    return {k.lower(): (REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def _matches(step: Step, req: dict[str, Any], prompt: str = "") -> bool:
    m = step.match
    if "compaction" in m and is_compaction(req, prompt) != m["compaction"]:
        return False
    if "stream" in m and bool(req.get("stream")) != m["stream"]:
        return False
    if "model" in m and req.get("model") != m["model"]:
        return False
    if "contains" in m and m["contains"].lower() not in message_text(req.get("messages")).lower():
        return False
    return not ("tools" in m and bool(req.get("tools")) != m["tools"])


def select_step(
    script: list[Step], used: list[int], req: dict[str, Any], prompt: str = ""
) -> Step | None:
    """Earliest step with uses left whose match accepts ``req`` (contracts §5); ``prompt`` is
    the scenario's, which does not make a request a compaction request (``fakes.compaction``)."""
    for st in script:
        if used[st.index] < st.times and _matches(st, req, prompt):
            return st
    return None


@dataclass
class SessionState:
    """Mutable state of one session; touched only from the server's event loop."""

    scenario: Scenario
    time_scale: float = 1.0
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    used: list[int] = field(default_factory=list)
    tool_cursor: dict[str, int] = field(default_factory=dict)
    refused: RefusingPort | None = None  # when the scenario refuses connections
    mcp_sessions: dict[str, str] = field(default_factory=dict)  # MCP session id -> version
    mcp_counts: dict[str, int] = field(default_factory=dict)  # MCP messages by method
    mcp_tools: list[dict[str, Any]] | None = None  # the MCP tools after a list_changed fault
    # The agent's own wall clock when it runs on a fast one (libfaketime): (the real wall time
    # it started from, its speed); HTTP-dates the session renders are in that clock.
    agent_clock: tuple[float, float] | None = None
    retention: Retention = field(default_factory=Retention)
    # Credentials (RTY-10): each distinct API key the session's model requests carried, in
    # order of first use, so the journal names which one a request carried (1, 2, ...) and
    # never the key; and the key a refresh hands out after an expired-credential 401.
    keys: list[str] = field(default_factory=list, repr=False)
    refreshed_key: str | None = field(default=None, repr=False)
    # The journal: every entry, or a ring of the last ``retention.entries``.
    entries: deque[Entry] = field(init=False)
    count: int = 0  # entries journaled since the session began (the next ``seq``)
    # Set (and replaced) whenever a response's headers go out: wakes wait_headers.
    _headers_out: asyncio.Event = field(
        default_factory=asyncio.Event, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.used = [0] * len(self.scenario.script)
        self.entries = deque(maxlen=self.retention.entries)

    def add(self, entry: Entry) -> None:
        """Journal ``entry`` (its ``seq`` is ``count``); a full ring lets its oldest go."""
        self.entries.append(entry)
        self.count += 1

    def key_label(self, key: str | None) -> int | None:
        """Which of the session's keys ``key`` is: 1 for the first one seen, 2 for the next;
        None for a request that carried none."""
        if not key:
            return None
        if key not in self.keys:
            self.keys.append(key)
        return self.keys.index(key) + 1

    def expire(self, key: str | None) -> None:
        """An expired-credential 401 was served to a request carrying ``key``: a refresh from
        now on hands out a new key. It extends the expired one, so that wherever it shows up
        (a log, a dump, a report) it is found and redacted as the run's key is."""
        if key:
            self.refreshed_key = f"{key}-refreshed-{len(self.keys)}"

    def headers_sent(self) -> None:
        """A response's headers just went out (called by the server)."""
        self._headers_out.set()
        self._headers_out = asyncio.Event()

    def headers_out(self, step: int) -> bool:
        """Whether the response served by script step ``step`` has its headers out."""
        return any(
            e.get("step") == step and (e.get("response") or {}).get("t_headers_ns")
            for e in self.entries
        )

    async def wait_headers(self, step: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for :meth:`headers_out`; its value at the end."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not self.headers_out(step):
            left = end - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._headers_out.wait(), left)
            except TimeoutError:
                return self.headers_out(step)
        return True

    def restart(self) -> int:
        """Start the scenario over, as a new session with the same id would: the script, the
        tool cursors, the MCP sessions and faults, the agent clock and the journal (``seq``
        from 0 again). Returns how many entries the journal had journaled. The caller refuses a
        session with a port of its own (its refusal window cannot be replayed on that port)."""
        dropped = self.count
        self.used = [0] * len(self.scenario.script)
        self.tool_cursor.clear()
        self.mcp_sessions.clear()
        self.mcp_counts.clear()
        self.mcp_tools = None
        self.agent_clock = None
        self.entries = deque(maxlen=self.retention.entries)
        self.count = 0
        return dropped

    def agent_time(self, wall: float) -> float:
        """The agent's wall clock at real wall time ``wall`` (the same clock without a warp)."""
        if self.agent_clock is None:
            return wall
        origin, speed = self.agent_clock
        return origin + (wall - origin) * speed

    def take_step(self, req: dict[str, Any]) -> tuple[Step | None, bool]:
        """The step serving ``req`` and whether it serves as ``otherwise`` (contracts §5)."""
        st = select_step(self.scenario.script, self.used, req, self.scenario.prompt or "")
        if st is not None:
            self.used[st.index] += 1
            return st, False
        other = self.scenario.fallback_step
        return other, other is not None

    def journal(self) -> Journal:
        """Contracts §2 journal (a deep copy; headers already redacted on entry)."""
        out: Journal = {
            "session": self.id,
            "scenario": self.scenario.id,
            "time_scale": self.time_scale,
            "entries": copy.deepcopy(list(self.entries)),
        }
        if self.refused is not None:
            out["refused"] = self.refused.record()
        if self.retention.bounded:
            out["retention"] = self.retention.record(self.count - len(self.entries))
        return out
