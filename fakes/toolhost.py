"""The tool host's replies: what one scripted tool behaviour (contracts §5) answers."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["large_text", "tool_reply"]


async def tool_reply(behaviour: dict[str, Any], time_scale: float) -> tuple[int, Any]:
    """The HTTP status and JSON payload of ``behaviour`` (a one-key mapping); ``hang`` waits its
    scaled seconds first."""
    kind, val = next(iter(behaviour.items()))
    if kind == "output":
        return 200, {"output": val}
    if kind == "error":
        return 200, {
            "error": {"type": val.get("type", "execution_error"), "message": val["message"]}
        }
    if kind == "permission_denied":
        reason = (val or {}).get("reason", "permission denied")
        return 200, {"error": {"type": "permission_denied", "message": reason}}
    if kind == "transient":
        message = (val or {}).get("message", "transient failure")
        return 503, {"error": {"type": "transient", "message": message}}
    if kind == "hang":
        await asyncio.sleep(float(val) * time_scale)
        return 504, {"error": {"type": "timeout", "message": "tool timed out"}}
    if kind == "large_output":
        return 200, {"output": large_text(int(val["bytes"]))}
    return 200, None  # the loader admits no other kind


def large_text(n: int) -> str:
    """Deterministic ASCII text of exactly ``n`` bytes, lines ``line 00001 xxxx…``."""
    out, i = [], 1
    total = 0
    while total < n:
        line = f"line {i:05d} " + "x" * 52 + "\n"
        out.append(line)
        total += len(line)
        i += 1
    return "".join(out)[:n]
