"""Exact strings the seeds prescribe; checks compare against them exactly."""

from __future__ import annotations

__all__ = ["CONTINUATION_TEXT", "TRUNCATION_HINT"]

# seed 000, 截断时自动继续, scenario 1 (note the em dash, U+2014).
CONTINUATION_TEXT = (
    "Output token limit hit. Resume directly \u2014 no apology, no recap of what you were doing. "
    "Pick up mid-thought if that is where the cut happened. "
    "Break remaining work into smaller pieces."
)
# seed 000, 处理格式错误的工具参数.
TRUNCATION_HINT = "(output truncated, please reduce your output)"
