"""Hold a response's headers back for a while, noticing the moment the client leaves.

Theory of operation: aiohttp does not cancel a handler whose client went away (and cancelling
every handler would change how every other fault ends); the handler only learns of it at its
next write, which for ``delay_headers`` comes after the whole delay. A client that gives up
waiting (its request timeout) would then seem to leave after the delay, later than its own
retry. So while the headers are held, a thin protocol stands in front of the connection's own:
it passes every callback on unchanged and notes the monotonic time of ``connection_lost``.
The connection's own protocol is put back when the delay ends.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["hold_headers"]


class _LeaveWatch(asyncio.Protocol):
    """Forwards every protocol callback to ``inner``; ``left`` gets the time the client left."""

    def __init__(self, inner: Any, left: asyncio.Future[int]) -> None:
        self.inner = inner
        self.left = left

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        keep_open: bool | None = self.inner.eof_received()
        return keep_open

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.left.done():
            self.left.set_result(time.monotonic_ns())
        self.inner.connection_lost(exc)


async def hold_headers(transport: Any, seconds: float) -> int | None:
    """Wait ``seconds`` (real) before the headers go out; the monotonic ns at which the client
    left if it left meanwhile (at once when it is already gone), else None."""
    if transport is None or transport.is_closing():
        return time.monotonic_ns()
    left: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    inner = transport.get_protocol()
    transport.set_protocol(_LeaveWatch(inner, left))
    try:
        return await asyncio.wait_for(left, seconds)
    except TimeoutError:
        return None
    finally:
        if not transport.is_closing():  # a connection that ended keeps no protocol to restore
            transport.set_protocol(inner)
