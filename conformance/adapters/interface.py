"""The adapter interface: what the runner hands an adapter, what it gets back, and redaction.

Adapters import these names from here, and this module imports no adapter (the lookup from a
spec to an adapter is `conformance.adapters.registry`), so no adapter can close an import cycle
through it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, cast

__all__ = [
    "CONFIRM_SLOWER",
    "REDACTED",
    "STATUSES",
    "Adapter",
    "AdapterBase",
    "as_status",
    "key_marker",
    "AgentTraits",
    "DEFAULT_TRAITS",
    "FastClock",
    "RunOutcome",
    "RunRequest",
    "redact",
    "redact_obj",
    "run_time_scale",
]

REDACTED = "[REDACTED]"
STATUSES = ("ran", "error", "timeout", "unsupported")
Status = Literal["ran", "error", "timeout", "unsupported"]


def as_status(value: str) -> Status:
    """``value`` as a run status; ValueError for anything else (an adapter's own bug)."""
    if value not in STATUSES:
        raise ValueError(f"unknown run status {value!r}; known: {', '.join(STATUSES)}")
    return cast(Status, value)


@dataclass
class RunRequest:
    """Everything an adapter needs to run one scenario."""

    start: dict[str, Any]  # the start message (no secrets in it)
    base_url: str  # .../s/<sid>/v1
    api_key: str  # the run's secret; never logged
    ca_file: str | None  # CA bundle when TLS
    workdir: Path  # a fresh temporary working directory
    deadline_s: float  # real seconds
    abort: threading.Event = field(default_factory=threading.Event)
    # An adapter that puts its agent on a fast clock says so here, as it starts the agent:
    # (real wall time the agent's clock starts from, its speed). The runner tells the gateway,
    # which renders HTTP-dates in the agent's clock.
    agent_clock: Callable[[float, float], None] | None = None


@dataclass
class RunOutcome:
    """What one run produced, as the agent wrote it: the runner judges DBG-02 on it, then
    redacts the run's secret from everything it keeps."""

    status: Status
    events: list[dict[str, Any]]  # each with "t_ns" (time.monotonic_ns() on arrival)
    hello: dict[str, Any] | None
    log: str  # the agent's stderr / log, capped in size (not redacted)
    error: str | None  # what went wrong, for error/timeout/unsupported
    # The agent ended on its own before its turn did: it exited (or died of a signal) with no
    # turn_end, the harness neither stopping nor killing it. ERR-05 ("never crash") is then a
    # FAIL, not an ERROR of the run.
    crashed: bool = False
    # What the loopback guard saw the agent try to reach beyond loopback (None: not guarded).
    outside_attempts: list[dict[str, Any]] | None = None
    # The format of the agent's own debug files in the run's debug directory, when they are not
    # the harness's (contracts §5): named by the adapter, never by the agent (the judge reads
    # them through that format's reader, conformance.judging.debug_formats).
    debug_format: str | None = None


@dataclass(frozen=True)
class AgentTraits:
    """What an adapter says of its agent beyond its capabilities; the defaults are those of an
    agent driven through the adapter protocol, which is given everything a scenario sets."""

    # False: the agent starts a new conversation (a CLI run as it ships), so a scenario's
    # ``history`` cannot be given to it.
    takes_history: bool = True
    # Keys of a scenario's ``config`` that reach no setting of the agent (its profile says so).
    config_ignored: frozenset[str] = frozenset()


DEFAULT_TRAITS = AgentTraits()


class FastClock(Protocol):
    """An agent put on a fast clock by its adapter (``conformance.adapters.warp``): calibrated
    by ``conformance.calibration`` before its first scenario in a process."""

    warp_note: str  # the clock it runs on, and why

    def needs_calibration(self) -> bool: ...

    def clock_identity(self) -> dict[str, Any] | None:
        """What a calibration of this agent's clock depends on (its version, its executable,
        the speeds asked), for a calibration kept between runs; None: never kept."""
        ...

    def warp_speeds(self) -> list[float]: ...

    def try_speed(self, speed: float | None) -> None: ...

    def use_clock(
        self,
        speed: float | None,
        timing_speed: float | None,
        calibrations: dict[float, Any],
        note: str,
    ) -> None: ...

    def fixed_time_scale(self, timing: bool = False, confirm: bool = False) -> float | None: ...

    def overhead(self, time_scale: float = 1.0) -> tuple[float, float]: ...

    def clock_info(self, time_scale: float = 1.0) -> dict[str, Any] | None: ...


class Adapter(Protocol):
    """An agent under test, driven through the adapter protocol."""

    name: str

    @property
    def traits(self) -> AgentTraits: ...

    @property
    def fast_clock(self) -> FastClock | None:
        """None: the agent runs on the run's clock."""
        ...

    @property
    def overlap(self) -> bool:
        """True: two of its runs may be in flight at once in one process of the run
        (``conformance.ahead``): its runs share nothing and mostly wait."""
        ...

    def capabilities(self) -> set[str]: ...

    def run(self, req: RunRequest) -> RunOutcome: ...

    def typical_durations(self) -> dict[str, float]:
        """{scenario id: seconds} its runs of the bundled scenarios took when measured: the order
        of a first run (``conformance.durations``); empty when unknown."""
        ...


class AdapterBase:
    """The defaults of :class:`Adapter`'s traits: an adapter class inherits them and overrides
    what differs for its agent."""

    traits: AgentTraits = DEFAULT_TRAITS
    # One run at a time: an agent in a process of its own spends CPU the other run would take.
    overlap: bool = False

    @property
    def fast_clock(self) -> FastClock | None:
        return None

    def typical_durations(self) -> dict[str, float]:
        return {}


# A failed timing verdict is confirmed on a clock this many times slower (up to real time): a
# wrong wait is wrong in scenario seconds at any scale, while a real millisecond of load or of the
# agent's own time weighs this many times less.
CONFIRM_SLOWER = 5.0


def run_time_scale(
    adapter: Adapter, asked: float, timing: bool = False, confirm: bool = False
) -> float:
    """The time scale a run of ``adapter`` gets: its own when it fixes one (an agent on a fast
    clock: ``fixed_time_scale(timing, confirm)``, where ``timing`` says the scenario's verdicts
    rest on measured waits and ``confirm`` asks for the clock that confirms a failed timing
    verdict), else ``asked`` when it declares ``time_scale`` (``CONFIRM_SLOWER`` times slower,
    up to real time, to confirm), else real time."""
    clock = adapter.fast_clock
    scale = clock.fixed_time_scale(timing, confirm) if clock is not None else None
    if scale is not None:
        return float(scale)
    if "time_scale" not in adapter.capabilities():
        return 1.0
    return min(1.0, asked * CONFIRM_SLOWER) if confirm else asked


def key_marker(secret: str) -> str:
    """What a run's key becomes in what the harness keeps: ``[REDACTED:`` and 8 hex digits of
    its sha256, so that a saved record tells the key's places apart from an agent's own
    ``[REDACTED]`` (``conformance rejudge`` looks for the marker as DBG-02 looked for the key).
    32 bits of the digest of a 128-bit random key give nothing of the key away."""
    return f"[REDACTED:{hashlib.sha256(secret.encode()).hexdigest()[:8]}]"


def redact(text: str, secret: str | None, marker: str = REDACTED) -> str:
    """Replace every occurrence of `secret` in `text` by ``marker`` ([REDACTED])."""
    if not secret or not isinstance(text, str):
        return text
    return text.replace(secret, marker)


def redact_obj(obj: Any, secret: str | None, marker: str = REDACTED) -> Any:
    """Redact every string (keys included) inside a JSON-like value."""
    if not secret:
        return obj
    if isinstance(obj, str):
        return redact(obj, secret, marker)
    if isinstance(obj, dict):
        return {
            redact_obj(k, secret, marker): redact_obj(v, secret, marker) for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [redact_obj(v, secret, marker) for v in obj]
    return obj
