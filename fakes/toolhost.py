"""The tool host's replies: what one scripted tool behaviour (contracts §5) answers."""

from __future__ import annotations

from typing import Any

from fakes.errors import FakesError
from fakes.hold import hold_headers

__all__ = ["ClientGone", "large_text", "tool_reply"]


class ClientGone(FakesError):
    """The client hung up on a ``hang`` before the tool answered; ``left_ns`` is when
    (monotonic). An agent that stops a tool at its limit does so by hanging up: that moment is
    the stop on the wire, whenever its next request comes."""

    def __init__(self, left_ns: int) -> None:
        super().__init__(f"the client left at {left_ns} ns, before the tool answered")
        self.left_ns = left_ns


async def tool_reply(
    behaviour: dict[str, Any], time_scale: float, transport: Any
) -> tuple[int, Any]:
    """The HTTP status and JSON payload of ``behaviour`` (a one-key mapping); ``hang`` waits its
    scaled seconds first, on ``transport`` (the request's), and raises ClientGone if the client
    leaves meanwhile."""
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
        left = await hold_headers(transport, float(val) * time_scale)
        if left is not None:
            raise ClientGone(left)
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
