"""How late this process's event loop wakes: the timer overshoot a timing verdict must allow.

A run measures it at its start, in the gateway's process and in the harness's, while the run's
other processes start too: the loop lag that delays a timestamp or an agent's scheduled retry
on this machine, under this run's own load.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["overshoot", "summary"]

# Sleeps of a few milliseconds, the size of a scaled retry wait's last step.
_SLEEPS_S = (0.001, 0.002, 0.005, 0.003)


def summary(samples_ms: list[float]) -> dict[str, float | int]:
    """Count, median, 90th and 99th percentile and maximum of ``samples_ms`` (ms, 3 decimals)."""
    xs = sorted(samples_ms)
    if not xs:
        return {"n": 0, "p50_ms": 0.0, "p90_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}

    def q(p: float) -> float:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3)

    return {
        "n": len(xs),
        "p50_ms": q(0.5),
        "p90_ms": q(0.9),
        "p99_ms": q(0.99),
        "max_ms": round(xs[-1], 3),
    }


async def overshoot(seconds: float) -> dict[str, float | int]:
    """Sleep short timers for about ``seconds`` on the running loop; how much later than asked
    each one woke (:func:`summary` of the overshoots, in ms)."""
    samples: list[float] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        asked = _SLEEPS_S[i % len(_SLEEPS_S)]
        t0 = time.monotonic_ns()
        await asyncio.sleep(asked)
        samples.append(max(0.0, (time.monotonic_ns() - t0) / 1e6 - asked * 1e3))
        i += 1
    return summary(samples)
