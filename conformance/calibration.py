"""Calibrating an agent on a fast clock: what its waits look like on the wire, measured.

Theory of operation: libfaketime speeds up an agent's clocks and sleeps, not its own work. Each
wait on the wire is then the agent's wait at the fast clock plus the real time the agent spent
between the failure and the next request; at speed N that time weighs N times as much in the
agent's seconds. Before its first scenario, once per run (``conformance.share``: the run's other
processes adopt the choice), an agent whose profile asks for a warp runs :data:`SCENARIO`: a first
429 asking ``Retry-After: 1``, then four asking waits of 1, 4, 1 and 4 seconds (every agent
certified so far honours a whole-second ``Retry-After``), then a reply. From the five waits
measured:

- the effective speed, from the difference of the four last waits' 4 s and 1 s ones (the
  agent's own time cancels out): a warp whose effective speed is off by more than
  :data:`SPEED_BOUND` is refused. The first wait is left out of it: an agent's first retry may
  carry work done once (opencode's took 0.2-2.2 s real more than its later ones with four
  processes calibrating at once), which would read as a clock off its speed;
- the overhead of each wait, the first included (measured less asked/N, where "asked" is the
  delay the agent announced it would wait if it prints one, e.g. Claude Code's
  ``api_retry.retry_delay_ms``: an agent that adds its own backoff to ``Retry-After`` does so on
  its fast clock): its mean is taken off every wait the checks judge, and its spread (largest
  less smallest) widens their slack. A speed whose spread, in the
  agent's seconds (spread x N), exceeds :data:`SPREAD_LIMIT_S` would judge waits too loosely:
  the scenarios whose criteria rest on timing (``timing: true`` in the catalogue) do not run at
  it.

Every speed of the profile is calibrated; the agent then runs at the fastest accepted, and the
scenarios resting on timing at the fastest whose spread fits, or in real time. With no speed
accepted, the agent runs in real time, and the clock's ``warp_note`` says why. The run's
results carry what was measured (``clock`` in each scenario entry).

A choice that accepted a speed is kept in the cache folder (``conformance.cache``) under the
agent's clock identity (its profile, package and executable file, the speeds asked:
``FastClock.clock_identity``), the dialect and the machine (:func:`machine`). The next run of
that agent on that machine, within :data:`KEEP_S`, takes it instead of calibrating again
(:func:`kept_choice`), and its clock's note says so with its age; ``--recalibrate`` measures
anew. A choice is a measurement of the agent on this machine, not of the machine's load at the
time: a run under more load than the calibration saw has its waits later, and a failed timing
verdict is confirmed alone and then on a slower clock as for any run (``conformance.verify``).
A choice that accepted no speed is not kept: the next run measures again.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from conformance.adapters.interface import Adapter, FastClock
from conformance.adapters.warp import SPREAD_LIMIT_S
from conformance.cache import read_entry, write_entry
from conformance.judging.reaction import Reaction, judge_reaction, reaction_gaps
from conformance.judging.reaction import scenario as reaction_scenario
from conformance.runner import run_scenario
from fakes import GatewayHandle, Scenario

__all__ = [
    "ASKED_S",
    "SCENARIO",
    "SPEED_BOUND",
    "SPREAD_LIMIT_S",
    "Calibration",
    "ClockChoice",
    "KEEP_S",
    "choose_clock",
    "keep_choice",
    "kept_choice",
    "machine",
    "measure_reaction",
]

ASKED_S = (1, 4, 1, 4)
WARMUP_S = 1  # asked first; its wait counts in the overhead and spread, not in the speed
SPEED_BOUND = 0.25
KEEP_S = 7 * 24 * 3600.0  # a kept choice older than this is measured again
_KIND = "calibrations"

SCENARIO: dict[str, Any] = {
    "id": "clock-calibration",
    "title": "Calibration of a fast clock: Retry-After waits of known length",
    "criteria": ["RTY-01"],
    "prompt": "Say hello.",
    "deadline": 60,
    "script": [
        {"fault": {"http_error": {"status": 429, "headers": {"Retry-After": str(WARMUP_S)}}}},
        *(
            {"fault": {"http_error": {"status": 429, "headers": {"Retry-After": str(s)}}}}
            for s in ASKED_S
        ),
        {"reply": {"text": "Hello.", "finish_reason": "stop"}},
    ],
}


@dataclass(frozen=True)
class Calibration:
    """What one calibration run measured at ``speed`` (real seconds)."""

    speed: float
    waits_s: list[float] = field(default_factory=list)
    effective_speed: float | None = None
    overhead_s: float = 0.0
    spread_s: float = 0.0
    accepted: bool = False  # the effective speed is close enough: fit for any scenario...
    timing_ok: bool = False  # ...and its spread for those whose verdicts rest on timing
    reason: str = ""
    asked_s: list[float] = field(default_factory=list)  # the agent's announced delays, if any

    def as_dict(self) -> dict[str, Any]:
        return {
            "time_warp": self.speed,
            "effective_speed": None
            if self.effective_speed is None
            else round(self.effective_speed, 2),
            "overhead_ms": round(self.overhead_s * 1000, 1),
            "spread_ms": round(self.spread_s * 1000, 1),
            "waits_ms": [round(w * 1000, 1) for w in self.waits_s],
            "announced_ms": [round(a * 1000, 1) for a in self.asked_s],
            "judged": "waits less the mean overhead; slack widened by the spread",
        }


def judge(
    speed: float, waits_s: list[float], announced_s: list[float] | None = None
) -> Calibration:
    """The calibration of ``speed`` from the measured waits (real seconds): the first wait
    (asked :data:`WARMUP_S`) then one per :data:`ASKED_S`, or those four alone.

    ``announced_s``: the delays the agent printed it would wait (its seconds), one per wait,
    where it prints them (Claude Code's ``api_retry.retry_delay_ms``). An agent may wait longer
    than ``Retry-After`` on purpose (its own backoff, jitter); that choice runs on its clock, so
    the overhead is measured against what it announced rather than against what was asked."""
    warm = len(waits_s) == len(ASKED_S) + 1
    if not warm and len(waits_s) != len(ASKED_S):
        return Calibration(
            speed,
            waits_s,
            reason=f"{len(waits_s)} waits measured, {len(ASKED_S) + 1} expected: the agent did "
            "not retry the calibration's 429s as asked",
        )
    announced = announced_s is not None and len(announced_s) == len(waits_s)
    asked: list[float] = (
        [float(a) for a in announced_s]
        if announced and announced_s
        else [float(a) for a in ((WARMUP_S,) if warm else ()) + ASKED_S]
    )
    # The speed from the four last waits only (the first may carry the agent's one-off work).
    timed, timed_asked = (waits_s[1:], asked[1:]) if warm else (waits_s, asked)
    short = [i for i, a in enumerate(ASKED_S) if a == min(ASKED_S)]
    long = [i for i, a in enumerate(ASKED_S) if a == max(ASKED_S)]
    diff = statistics.fmean(timed[i] for i in long) - statistics.fmean(timed[i] for i in short)
    span = statistics.fmean(timed_asked[i] for i in long) - statistics.fmean(
        timed_asked[i] for i in short
    )
    effective = span / diff if diff > 0 and span > 0 else None
    overheads = [w - a / speed for w, a in zip(waits_s, asked, strict=True)]
    overhead, spread = statistics.fmean(overheads), max(overheads) - min(overheads)
    measured = Calibration(
        speed, waits_s, effective, overhead, spread, asked_s=asked if announced else []
    )
    if effective is None or abs(effective / speed - 1) > SPEED_BOUND:
        shown = "none" if effective is None else f"x{effective:.1f}"
        why = f"effective speed {shown} is off x{speed:g} by more than {SPEED_BOUND:.0%}"
        return replace(measured, reason=why)
    if spread * speed > SPREAD_LIMIT_S:
        why = (
            f"the agent's own time between attempts varies by {spread * 1000:.0f} ms real, "
            f"{spread * speed:.2f} s at x{speed:g}: more than the {SPREAD_LIMIT_S:g} s a wait "
            "may be judged loose by: not fit for timing"
        )
        return replace(measured, accepted=True, reason=why)
    return replace(measured, accepted=True, timing_ok=True, reason="accepted")


def _announced(entry: Mapping[str, Any]) -> list[float] | None:
    """The delays the agent printed before its retries (``retry`` events with ``delay_s``),
    or None when it printed none for some retry."""
    delays = [e.get("delay_s") for e in entry.get("events") or [] if e.get("type") == "retry"]
    if not delays or any(not isinstance(d, (int, float)) for d in delays):
        return None
    return [float(d) for d in delays]


def _waits(entry: Mapping[str, Any]) -> list[float]:
    """Real seconds from each failed response's end to the next request."""
    journal = entry.get("journal") or {}
    chat = [e for e in journal.get("entries") or [] if e.get("kind") == "chat"]
    waits = []
    for before, after in zip(chat, chat[1:], strict=False):
        resp = before.get("response") or {}
        end = resp.get("t_end_ns") or resp.get("t_headers_ns")
        if resp.get("status") == 429 and end is not None:
            waits.append((int(after["t_arrival_ns"]) - int(end)) / 1e9)
    return waits


def _measure(
    gateway: GatewayHandle,
    adapter: Adapter,
    clock: FastClock,
    scenario: Scenario,
    dialect: str,
    speed: float,
) -> Calibration:
    """One calibration run at ``speed``."""
    clock.try_speed(speed)
    entry, _ = run_scenario(gateway, adapter, scenario, dialect=dialect)
    if entry["status"] != "ran":
        why = f"the calibration run ended {entry['status']}: {entry.get('error') or ''}"
        return Calibration(speed, reason=why.strip())
    return judge(speed, _waits(entry), _announced(entry))


@dataclass(frozen=True)
class ClockChoice:
    """What a calibration chose: the speed for every scenario and the one for scenarios resting
    on timing (None: real time), the accepted calibrations by speed, and why."""

    speed: float | None
    timing_speed: float | None
    accepted: dict[float, Calibration]
    note: str

    def adopt(self, clock: FastClock) -> None:
        """Put ``clock`` on this choice (another process of the run made it, or an earlier run
        kept it). Its speeds are asked for first: that readies the warp in this process, or
        says why it is refused here (then it stays in real time, its ``warp_note`` saying
        why)."""
        if clock.warp_speeds():
            clock.use_clock(self.speed, self.timing_speed, dict(self.accepted), self.note)

    def as_json(self) -> dict[str, Any]:
        """A JSON object :meth:`from_json` reads back (the run's other processes use it)."""
        return {
            "speed": self.speed,
            "timing_speed": self.timing_speed,
            "accepted": [asdict(c) for c in self.accepted.values()],
            "note": self.note,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ClockChoice:
        accepted = [Calibration(**c) for c in doc["accepted"]]
        return cls(doc["speed"], doc["timing_speed"], {c.speed: c for c in accepted}, doc["note"])


def choose_clock(gateway: GatewayHandle, adapter: Adapter, dialect: str) -> ClockChoice | None:
    """Calibrate every speed of the adapter's fast clock; put it on the fastest accepted (for
    scenarios resting on timing: the fastest whose spread fits, else real time). Returns the
    choice it applied (None: the adapter has no fast clock)."""
    clock = adapter.fast_clock
    if clock is None:
        return None
    scenario = Scenario.from_dict(SCENARIO, source="<clock calibration>")
    accepted: dict[float, Calibration] = {}
    notes = []
    speeds = clock.warp_speeds()
    try:
        for speed in speeds:
            cal = _measure(gateway, adapter, clock, scenario, dialect, speed)
            if cal.waits_s and not cal.timing_ok:
                # Five waits on a loaded machine: one hiccup decides the spread, or the speed.
                # Measured once more; an accepted speed is kept over a refused one, and of two
                # accepted the steadier.
                again = _measure(gateway, adapter, clock, scenario, dialect, speed)
                if again.accepted and (not cal.accepted or again.spread_s < cal.spread_s):
                    cal = again
            if cal.accepted:
                accepted[speed] = cal
            notes.append(f"x{speed:g}: {cal.reason}")
    finally:
        clock.try_speed(None)
    fast = max(accepted, default=None)
    timing = max((s for s, c in accepted.items() if c.timing_ok), default=None)
    capped = timing is None and fast is not None
    if capped:
        # No speed steady enough: timing on the slowest accepted, its slack widened by no more
        # than SPREAD_LIMIT_S (FastClock.overhead); a failure there is confirmed on a rerun
        # (conformance.verify.judged).
        timing = min(accepted)
    if fast is None:
        note = "real time: " + "; ".join(notes)
    else:
        cal = accepted[fast]
        note = (
            f"time warp x{fast:g} (effective x{cal.effective_speed:.1f}, overhead "
            f"{cal.overhead_s * 1000:.0f} ms, spread {cal.spread_s * 1000:.0f} ms real per wait); "
            + f"timing at x{timing:g}"
            + (f", slack widened by at most {SPREAD_LIMIT_S:g} s" if capped else "")
            + " (calibration: "
            + "; ".join(notes)
            + ")"
        )
    choice = ClockChoice(fast, timing, accepted, note)
    if speeds:
        clock.use_clock(fast, timing, dict(accepted), note)
    return choice


def machine() -> dict[str, Any]:
    """The machine a calibration was measured on: its name, cores and system."""
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def _key(identity: Mapping[str, Any], dialect: str) -> dict[str, Any]:
    return {"clock": dict(identity), "dialect": dialect, "machine": machine()}


def kept_choice(
    identity: Mapping[str, Any] | None, dialect: str, now: float | None = None
) -> ClockChoice | None:
    """The choice kept for this agent, dialect and machine, its note saying how old it is; None
    when none is kept, it is older than :data:`KEEP_S`, or it cannot be read."""
    if identity is None:
        return None
    doc = read_entry(_KIND, _key(identity, dialect))
    if doc is None:
        return None
    try:
        age = (time.time() if now is None else now) - float(doc["measured_at"])
        choice = ClockChoice.from_json(doc["choice"])
    except (KeyError, TypeError, ValueError):
        return None
    if not 0 <= age <= KEEP_S or not _sound(choice):
        return None
    when = (
        f"calibrated {_age_words(age)} ago on this machine and kept (--recalibrate, under "
        "pytest --conformance-recalibrate, measures again)"
    )
    return replace(choice, note=f"{choice.note}; {when}")


def _sound(choice: ClockChoice) -> bool:
    """Whether a choice read back is one :func:`choose_clock` could have made (a hand-edited
    entry is measured again rather than run on)."""

    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    cals = choice.accepted.values()
    return (
        number(choice.speed)
        and choice.speed in choice.accepted
        and (choice.timing_speed is None or choice.timing_speed in choice.accepted)
        and isinstance(choice.note, str)
        and all(number(c.speed) and number(c.overhead_s) and number(c.spread_s) for c in cals)
    )


def keep_choice(
    identity: Mapping[str, Any] | None,
    dialect: str,
    choice: ClockChoice,
    now: float | None = None,
) -> None:
    """Keep ``choice`` for the next runs (only one that accepted a speed)."""
    if identity is None or choice.speed is None:
        return
    measured_at = time.time() if now is None else now
    write_entry(
        _KIND, _key(identity, dialect), {"measured_at": measured_at, "choice": choice.as_json()}
    )


def _age_words(seconds: float) -> str:
    """``seconds`` as a person says an age: "40 s", "12 min", "3 h 5 min", "2 days"."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    if seconds < 86400:
        return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
    days = seconds // 86400
    return f"{days:.0f} day" + ("s" if days > 1 else "")


def measure_reaction(
    gateway: GatewayHandle,
    adapter: Adapter,
    *,
    scale: float,
    dialect: str,
    tool_transport: str,
) -> Reaction:
    """Run the reaction scenario (``conformance.judging.reaction``) for ``adapter``; judge its gaps."""
    tools = "tools" in adapter.capabilities()
    sc = Scenario.from_dict(reaction_scenario(tools), source="<agent reaction>")
    entry, _ = run_scenario(
        gateway, adapter, sc, time_scale=scale, dialect=dialect, tool_transport=tool_transport
    )
    if entry["status"] != "ran":
        why = entry.get("error") or entry["status"]
        return Reaction(note=f"not measured: the reaction run ended {entry['status']}: {why}")
    return judge_reaction(reaction_gaps(entry), scale)
