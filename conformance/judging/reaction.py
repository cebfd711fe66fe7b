"""An agent's own reaction time, measured before its scenarios, so that its waits are judged
net of it: a verdict then depends on what the agent decided, not on how fast its runtime is.

Theory of operation: every wait on the wire is the agent's decided wait plus the real time the
agent spent between reading a response and sending its next request (its runtime's HTTP stack,
parsing, its own logic). At time scale S every real millisecond of that counts 1/S in scenario
time: 20 ms of a Node agent's reaction is a second of scenario time at the default 0.02, enough
to take a correct backoff out of its band. So before an agent's first scenario in a process,
it runs :data:`SCENARIO` (``conformance.calibration.measure_reaction``): hosted tool calls, each answered at once, then a reply (an agent that
does not declare ``tools`` gets 429s with ``Retry-After: 0`` instead). Only transitions where no
wait is due are measured: from the end of a tool's answer (or of the 429) to the next model
request. From those gaps (real seconds):

- the reaction, their median, is taken off every wait the timing checks judge, at most
  :data:`REACTION_CAP_S` (an agent whose reaction is longer has the rest judged as its wait);
- their spread (largest less smallest) widens the checks' slack. When the spread, in scenario
  seconds at the run's scale, exceeds :data:`SPREAD_LIMIT_S`, or the reaction exceeds
  :data:`REACTION_LIMIT_S` (it is an allowance where it cannot be taken off exactly: a tool's
  time limit runs from before the agent's request leaves), the scenarios resting on timing run
  at the slower scale where neither does (up to real time), and the results say so: noise is
  never judged as a wrong wait, and a slow runtime never widens a band by more than that.

A wrong wait cannot hide in the estimate: it is measured only where no wait is due, and a
backoff that is wrong is wrong in scenario seconds, which a reaction in real milliseconds does
not cover. The results carry what was measured (``reaction`` in each scenario entry).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.adapters.warp import SPREAD_LIMIT_S

__all__ = [
    "REACTION_CAP_S",
    "ROUNDS",
    "SCENARIO",
    "SPREAD_LIMIT_S",
    "Reaction",
    "NO_REACTION",
    "judge_reaction",
    "reaction_gaps",
    "scenario",
]

ROUNDS = 6
REACTION_CAP_S = 0.25  # real seconds: at most this much is taken off a wait
REACTION_LIMIT_S = 1.0  # scenario seconds: the most a reaction may weigh in a timing scenario
NOT_MEASURED = "not measured"

_TOOL = {
    "name": "lookup",
    "description": "Look a word up",
    "parameters": {
        "type": "object",
        "properties": {"word": {"type": "string"}},
        "required": ["word"],
    },
}
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def scenario(tools: bool) -> dict[str, Any]:
    """The reaction scenario: ``ROUNDS`` transitions with no wait due, then a reply."""
    if tools:
        steps: list[dict[str, Any]] = [
            {
                "reply": {
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "name": "lookup",
                            "arguments": f'{{"word": "{_WORDS[i]}"}}',
                        }
                    ],
                    "finish_reason": "tool_calls",
                }
            }
            for i in range(ROUNDS)
        ]
        extra: dict[str, Any] = {
            "capabilities": ["tools"],
            "tools": [_TOOL],
            "tool_host": {"lookup": [{"output": f"{w}: a word"} for w in _WORDS[:ROUNDS]]},
        }
    else:
        steps = [
            {"fault": {"http_error": {"status": 429, "headers": {"Retry-After": "0"}}}}
            for _ in range(ROUNDS)
        ]
        extra = {}
    return {
        "id": "agent-reaction",
        "title": "The agent's own reaction: transitions with no wait due",
        "criteria": ["RTY-01"],
        "prompt": "Look up the words one by one, then say done.",
        "deadline": 60,
        **extra,
        "script": [*steps, {"reply": {"text": "Done.", "finish_reason": "stop"}}],
        "otherwise": {"reply": {"text": "Done.", "finish_reason": "stop"}},
    }


SCENARIO = scenario(True)


@dataclass(frozen=True)
class Reaction:
    """An agent's reaction as measured (real seconds), and the time scale its timing runs at."""

    median_s: float = 0.0
    spread_s: float = 0.0
    gaps_s: tuple[float, ...] = ()
    timing_scale: float | None = None  # None: the run's own scale
    note: str = NOT_MEASURED

    @property
    def taken_off_s(self) -> float:
        """What is taken off each wait: the median, at most ``REACTION_CAP_S``."""
        return min(self.median_s, REACTION_CAP_S)

    def scale_for(self, asked: float, timing: bool) -> float:
        """The time scale a scenario runs at: the run's, or for one resting on timing, the
        slower one the reaction's spread asks for."""
        if timing and self.timing_scale is not None:
            return max(asked, self.timing_scale)
        return asked

    @property
    def measured(self) -> bool:
        return bool(self.gaps_s) and not self.note.startswith(NOT_MEASURED)

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_ms": round(self.median_s * 1000, 1),
            "spread_ms": round(self.spread_s * 1000, 1),
            "gaps_ms": [round(g * 1000, 1) for g in self.gaps_s],
            "taken_off_ms": round(self.taken_off_s * 1000, 1),
            "timing_scale": self.timing_scale,
            "note": self.note,
        }


NO_REACTION = Reaction()


def reaction_gaps(entry: Mapping[str, Any]) -> list[float]:
    """Real seconds from the end of each answer that asked no wait (a hosted tool's answer, a
    429 with ``Retry-After: 0``) to the next model request."""
    journal = entry.get("journal") or {}
    entries = sorted(
        journal.get("entries") or [], key=lambda e: (e.get("t_arrival_ns") or 0, e.get("seq") or 0)
    )
    gaps = []
    last_end: int | None = None
    for e in entries:
        resp = e.get("response") or {}
        if e.get("kind") == "chat":
            if last_end is not None:
                gaps.append((int(e["t_arrival_ns"]) - last_end) / 1e9)
            last_end = None
            if resp.get("status") == 429:
                last_end = resp.get("t_end_ns") or resp.get("t_headers_ns")
        elif e.get("kind") in ("tool", "mcp") and resp.get("status") == 200:
            end = resp.get("t_end_ns") or resp.get("t_headers_ns")
            if end is not None:
                last_end = max(last_end or 0, int(end))
    return [g for g in gaps if g >= 0]


def judge_reaction(gaps: list[float], scale: float) -> Reaction:
    """The reaction from measured gaps (module doc)."""
    if len(gaps) < 3:
        return Reaction(gaps_s=tuple(gaps), note=f"{NOT_MEASURED}: {len(gaps)} gap(s) seen")
    median = statistics.median(gaps)
    spread = max(gaps) - min(gaps)
    note = (
        f"reaction {median * 1000:.1f} ms (spread {spread * 1000:.1f} ms real) taken off each wait"
    )
    # The slowest scale at which the spread widens a band by at most SPREAD_LIMIT_S, and the
    # reaction, an allowance where it cannot be taken off exactly (a limit the agent times from
    # before it sends), weighs at most REACTION_LIMIT_S.
    needed = max(spread / SPREAD_LIMIT_S, min(median, REACTION_CAP_S) / REACTION_LIMIT_S)
    timing_scale = None
    if needed > scale:
        timing_scale = min(1.0, round(needed, 3))
        note += (
            f"; at time scale {scale:g} that is {median / scale:.2f} s (spread "
            f"{spread / scale:.2f} s) of scenario time, more than a timing band may absorb "
            f"({REACTION_LIMIT_S:g} s, {SPREAD_LIMIT_S:g} s): timing scenarios run at "
            + ("real time" if timing_scale >= 1.0 else f"time scale {timing_scale:g}")
        )
    return Reaction(median, spread, tuple(gaps), timing_scale, note)
