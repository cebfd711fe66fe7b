"""The timing allowances of a run: measured on the machine at the run's start, carried to every
timing check.

Theory of operation: a retry's wait is measured on the wire, from the moment the gateway handed
the failed response's last byte to its transport to the moment the retry arrived. A correct
agent's wait comes out late by its own timer's overshoot, the time it takes to send the request
and the gateway's loop lag in stamping it; on a busy machine all three grow. So before the first
scenario, each process that runs scenarios measures the timer overshoot of its own event loop
and, at the same time, of its gateway's (``fakes.clock``), for ``CALIBRATION_S``: on a ``-n N``
run the N processes do so together, under the run's own parallelism. From the figures:

- ``late_slack_s``: how late an attempt may come beyond its band (RTY-01/02/03/05/06/13/14/16,
  STR-10, TOL-04): ``LATE_FLOOR_S`` plus ``LATE_FACTOR`` times the sum of the two 99th
  percentiles, at most ``LATE_CAP_S``. An idle machine gets about the floor.
- ``noise_s``: the per-attempt timing noise RTY-08 tells jitter from (``conformance.jitter``):
  ``NOISE_FLOOR_S`` plus ``NOISE_FACTOR`` times the sum of the two 90th percentiles, at most
  ``NOISE_CAP_S``.
- ``early_slack_s``: how early an attempt may come, a constant (``EARLY_SLACK_S``): a wait is
  cut short only by the few microseconds between a byte going out and its stamp.
- ``wakeup_s``: how much earlier still after an attempt that ended with the client gone (a
  request the agent timed out): that end is stamped when the gateway's loop noticed it, so it
  is late by the gateway's lag and the wait after it reads short: ``WAKEUP_FACTOR`` times the
  gateway's 99th percentile, at most ``WAKEUP_CAP_S``.

Without a calibration (a single scenario run by a test, the golden pins) the floors apply.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from dataclasses import asdict, dataclass
from typing import Any

from fakes.clock import overshoot
from fakes.handles import GatewayHandle

__all__ = [
    "BEYOND_LOAD_S",
    "CALIBRATION_S",
    "DEFAULT_TIMING",
    "EARLY_SLACK_S",
    "LATE_CAP_S",
    "LATE_FLOOR_S",
    "NOISE_CAP_S",
    "NOISE_FLOOR_S",
    "Timing",
    "measure",
    "run_timing",
    "timing_from",
]

EARLY_SLACK_S = 0.005
LATE_FLOOR_S = 0.025
LATE_FACTOR = 2.0
LATE_CAP_S = 0.1
NOISE_FLOOR_S = 0.004
NOISE_FACTOR = 2.0
NOISE_CAP_S = 0.02
WAKEUP_FACTOR = 2.0
WAKEUP_CAP_S = 0.02
CALIBRATION_S = 0.3
# How late, in real seconds, a loaded machine is taken to make an agent act at most: a margin
# past a limit wider than this, in which the agent did nothing, is the agent's (STR-10's silence
# past its idle limit; ``conformance.verify`` then confirms nothing), and a wait late by less may
# be the run's own load (``verify.LOAD_LATE_S``). Measured: 6-110 ms, once 469 ms.
BEYOND_LOAD_S = 1.0


@dataclass(frozen=True)
class Timing:
    """The allowances timing checks judge with, in real seconds, and what they came from."""

    early_slack_s: float = EARLY_SLACK_S
    late_slack_s: float = LATE_FLOOR_S
    noise_s: float = NOISE_FLOOR_S
    wakeup_s: float = 0.0
    # The figures measured (``fakes.clock.summary`` of the harness's and the gateway's loop),
    # None when nothing was measured.
    harness: dict[str, Any] | None = None
    gateway: dict[str, Any] | None = None
    process: str = ""  # which of the run's processes measured it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_TIMING = Timing()


def timing_from(harness: dict[str, Any], gateway: dict[str, Any] | None) -> Timing:
    """The allowances for the measured overshoots (``fakes.clock.summary``, in ms)."""
    g = gateway or {}
    p99 = (float(harness.get("p99_ms", 0)) + float(g.get("p99_ms", 0))) / 1000
    p90 = (float(harness.get("p90_ms", 0)) + float(g.get("p90_ms", 0))) / 1000
    late = min(LATE_CAP_S, LATE_FLOOR_S + LATE_FACTOR * p99)
    noise = min(NOISE_CAP_S, NOISE_FLOOR_S + NOISE_FACTOR * p90)
    wakeup = min(WAKEUP_CAP_S, WAKEUP_FACTOR * float(g.get("p99_ms", 0)) / 1000)
    return Timing(
        EARLY_SLACK_S, round(late, 4), round(noise, 4), round(wakeup, 4), harness, gateway
    )


def measure(gateway: GatewayHandle, seconds: float = CALIBRATION_S, process: str = "") -> Timing:
    """Measure this process's loop and ``gateway``'s at the same time; the allowances. A gateway
    on a thread of this process (its ``overshoot`` is None) is measured as this process."""
    found: dict[str, Any] = {}

    def measure_here() -> None:
        found["harness"] = asyncio.run(overshoot(seconds))

    here = threading.Thread(target=measure_here, name="measure-timing", daemon=True)
    here.start()
    there = gateway.overshoot(seconds)
    here.join(seconds + 30)
    return dataclasses.replace(timing_from(found.get("harness") or {}, there), process=process)


def run_timing(calibrations: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The results document's ``run.timing``: the largest allowances any of the run's processes
    judged with, and every process's calibration (None when none calibrated)."""
    if not calibrations:
        return None
    keys = ("early_slack_s", "late_slack_s", "noise_s", "wakeup_s")
    out: dict[str, Any] = {k: max(float(c.get(k, 0.0)) for c in calibrations) for k in keys}
    out["calibrations"] = sorted(calibrations, key=lambda c: str(c.get("process")))
    return out
