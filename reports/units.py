"""One unit with the other beside it: scenario seconds, and what they were in real time.

Theory of operation: the criteria speak in scenario seconds (a scenario's times as its script
states them); a run scales them by its time scale (real = scenario x scale), so a 2 s backoff
at scale 0.02 is 40 ms on the wall clock. Every time the report prints is given in scenario
seconds first and in real time beside it: ``2.169 s (43.4 ms real)``; a figure measured in real
time (a timing allowance) is converted the other way and printed the same way. :func:`annotate`
does this for the verdict texts the checks write, whose measured scenario seconds have three
decimals (``2.169s``, ``1.460 s``); other figures there (nominal backoffs, unscaled limits) are
left as written.
"""

from __future__ import annotations

import re

__all__ = ["annotate", "real", "scenario_and_real", "scenario_from_real"]

# A check's measured scenario seconds: three decimals, then "s" (not "ms").
_MEASURED = re.compile(r"(?<![\w.])(\d+\.\d{3})\s?s(?![\w(])(?! \(\S+ m?s real\))")


def real(seconds: float) -> str:
    """A real duration, in ms below a second (``43.4 ms real``), else in s (``1.045 s real``)."""
    if abs(seconds) < 1:
        return f"{seconds * 1000:.1f} ms real"
    return f"{seconds:.3f} s real"


def _scale(time_scale: float | None) -> float | None:
    return time_scale if time_scale and time_scale > 0 else None


def scenario_and_real(scenario_s: float, time_scale: float | None) -> str:
    """``2.169 s (43.4 ms real)``; without a time scale, the scenario figure alone."""
    scale = _scale(time_scale)
    text = f"{scenario_s:.3f} s"
    return text if scale is None else f"{text} ({real(scenario_s * scale)})"


def scenario_from_real(real_s: float, time_scale: float | None) -> str:
    """A real duration said as the scenario seconds it stands for, the real figure beside:
    ``1.365 s (27.3 ms real)``; without a time scale, the real figure alone."""
    scale = _scale(time_scale)
    if scale is None:
        return real(real_s)
    return f"{real_s / scale:.3f} s ({real(real_s)})"


def annotate(text: str, time_scale: float | None) -> str:
    """``text`` with each measured scenario-second figure given its real equivalent."""
    scale = _scale(time_scale)
    if scale is None or not text:
        return text
    return _MEASURED.sub(lambda m: scenario_and_real(float(m.group(1)), scale), text)
