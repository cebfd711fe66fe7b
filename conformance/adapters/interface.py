"""The adapter interface: what the runner hands an adapter, what it gets back, and redaction.

Adapters import these names from here, and this module imports no adapter (the lookup from a
spec to an adapter is `conformance.adapters.registry`), so no adapter can close an import cycle
through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "REDACTED",
    "STATUSES",
    "Adapter",
    "RunOutcome",
    "RunRequest",
    "redact",
    "redact_obj",
    "run_time_scale",
]

REDACTED = "[REDACTED]"
STATUSES = ("ran", "error", "timeout", "unsupported")


@dataclass
class RunRequest:
    """Everything an adapter needs to run one scenario."""

    start: dict  # the start message (no secrets in it)
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

    status: str  # "ran" | "error" | "timeout" | "unsupported"
    events: list[dict]  # each with "t_ns" (time.monotonic_ns() on arrival)
    hello: dict | None
    log: str  # the agent's stderr / log, capped in size (not redacted)
    error: str | None  # what went wrong, for error/timeout/unsupported
    # The agent ended on its own before its turn did: it exited (or died of a signal) with no
    # turn_end, the harness neither stopping nor killing it. ERR-05 ("never crash") is then a
    # FAIL, not an ERROR of the run.
    crashed: bool = False


class Adapter(Protocol):
    """An agent under test, driven through the adapter protocol."""

    name: str

    def capabilities(self) -> set[str]: ...

    def run(self, req: RunRequest) -> RunOutcome: ...


def run_time_scale(
    adapter: Adapter, asked: float, timing: bool = False, confirm: bool = False
) -> float:
    """The time scale a run of ``adapter`` gets: its own when it fixes one (an agent on a fast
    clock: ``fixed_time_scale(timing, confirm)``, where ``timing`` says the scenario's verdicts
    rest on measured waits and ``confirm`` asks for the clock that confirms a failed timing
    verdict), else ``asked`` when it declares ``time_scale``, else real time."""
    fixed = getattr(adapter, "fixed_time_scale", None)
    scale = fixed(timing, confirm) if callable(fixed) else None
    if scale is not None:
        return float(scale)
    return asked if "time_scale" in adapter.capabilities() else 1.0


def redact(text: str, secret: str | None) -> str:
    """Replace every occurrence of `secret` in `text` by [REDACTED]."""
    if not secret or not isinstance(text, str):
        return text
    return text.replace(secret, REDACTED)


def redact_obj(obj: Any, secret: str | None) -> Any:
    """Redact every string (keys included) inside a JSON-like value."""
    if not secret:
        return obj
    if isinstance(obj, str):
        return redact(obj, secret)
    if isinstance(obj, dict):
        return {redact_obj(k, secret): redact_obj(v, secret) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(v, secret) for v in obj]
    return obj
