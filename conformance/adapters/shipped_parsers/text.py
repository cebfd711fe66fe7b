"""Plain text output: the whole stdout is the agent's final answer."""

from __future__ import annotations

from typing import Any

__all__ = ["parse_text"]


def parse_text(stdout: str) -> list[dict[str, Any]]:
    """One assistant ``message`` with the stripped stdout; none when it printed nothing."""
    text = stdout.strip()
    return (
        [{"type": "message", "id": "a0", "role": "assistant", "text": text, "tool_calls": []}]
        if text
        else []
    )
