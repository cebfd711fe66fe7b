"""Carry out a plan's chunks on the wire: every byte that is due goes out in one write.

Theory of operation: a ``Plan`` (``fakes.response``) is a list of chunks, each due ``delay``
scaled seconds after the one before it. The writer joins every chunk that is due at the same
moment into one buffer and writes it once; a write boundary falls only at a timed point (a chunk
with a ``delay``: a stall, a dribble, a pace), after a chunk with ``flush`` (``rechunk``) and at
the end (a complete reply goes out with the stream's final chunk, a cut before its RST or close).
The bytes are those of the plan whatever the boundaries: only the HTTP chunk framing (one HTTP
chunk per write) and the number of reads a client needs change.

The headers go out with the first write (``BurstResponse`` holds them back until then), or
alone at the first boundary reached before any body byte, so a pause never starts before them.

Timing: each chunk is due ``delay`` after the previous one was due, so a pace keeps its rate
whatever the loop's wake-up lag (a late wake-up writes what is due at once). At every boundary
what was written is flushed first: out of the transport's buffer and, on Linux, out of the
kernel's send queue (a client that does not read holds it there). When a flush had to wait, the
schedule restarts from its end, so a stall as the client sees it is never shorter than scripted;
and an RST, which discards what the kernel still holds, goes out only after the bytes before a
cut did, so the cut stays byte-exact. A flush waits at most ``FLUSH_LIMIT_S`` for a client that
never reads.

The journal's counters (``sent_bytes``, ``events_sent``) count the bytes handed to the
connection and are updated before every await, so whoever reads the journal meanwhile sees them
exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from fakes.journal import Response as ResponseRecord
from fakes.response import Plan
from fakes.session import redact_headers

__all__ = [
    "FLUSH_LIMIT_S",
    "RESET_SETTLE_S",
    "BurstResponse",
    "PlanWriter",
    "reset_connection",
    "sleep_until",
]

FLUSH_LIMIT_S = 5.0
# Real seconds between the last body bytes and a cut's RST. A client whose HTTP stack reads the
# bytes and the reset in one turn of its loop may drop the bytes for the error (a fetch body
# stream errored discards what it had queued): the agent would never see the events the cut
# came after, and whether it saw them would depend on how fast the gateway ran (measured:
# Claude Code 2.1.332 resent a finished stream when the reset followed within a millisecond, and
# took it as finished when it followed 7 ms later). Real, not scaled: it is the client's loop's
# time, whatever its clock.
RESET_SETTLE_S = 0.05
# The loop's selector sleeps in whole milliseconds, rounded up (epoll): a timer wakes up to 1 ms
# late. A long wait (a stall, not a pace's gaps, so the loop seldom spins) ends instead with a
# spin of the loop, each turn serving the other connections, for its last ``SPIN_S``.
SPIN_FROM_S = 0.1
SPIN_S = 0.0015
_SIOCOUTQNSD = 0x894B  # Linux: the bytes of a socket's send queue not sent yet


def _unsent(sock: Any) -> int:
    """Bytes the kernel holds for ``sock`` and has not sent (0 where it cannot tell)."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQNSD, b"\0" * 4))[0])
    except (OSError, ValueError):
        return 0


async def sleep_until(loop: asyncio.AbstractEventLoop, due: float) -> None:
    """Return at ``due`` (``loop.time()``), never before; a long wait's last ``SPIN_S`` spun."""
    wait = due - loop.time()
    if wait <= 0:
        return
    if wait < SPIN_FROM_S:
        await asyncio.sleep(wait)
        return
    await asyncio.sleep(wait - SPIN_S)
    while loop.time() < due:
        await asyncio.sleep(0)


def reset_connection(transport: Any) -> None:
    """End the connection with an RST (SO_LINGER 0, then abort)."""
    sock = transport.get_extra_info("socket") if transport else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if transport is not None:
        transport.abort()


class BurstResponse(web.StreamResponse):
    """A streamed response whose headers wait for its first body write: one write for both.

    (aiohttp's own ``web.Response`` holds its headers the same way; a ``StreamResponse`` sends
    them at ``prepare`` unless told otherwise.)
    """

    _send_headers_immediately = False


class PlanWriter:
    """Writes ``plan``'s chunks on a prepared ``BurstResponse``, recording into ``r``."""

    def __init__(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        plan: Plan,
        r: ResponseRecord,
        scale: float,
        clock: Callable[[float], float] | None = None,
        on_headers: Callable[[], None] | None = None,
    ) -> None:
        self.request, self.resp, self.plan, self.r, self.scale = request, resp, plan, r, scale
        self.clock = clock  # the agent's wall clock when it runs on a fast one
        self.on_headers = on_headers  # told when the headers go out (the abort watch waits)
        self.parts: list[bytes] = []  # every write, in order: the bytes handed to the client
        self.nbytes = self.events = 0
        self.headers_out = False
        self.writer: AbstractStreamWriter | None = None

    @property
    def data(self) -> bytes:
        """The body bytes written so far."""
        return b"".join(self.parts)

    def _handed(self, buf: bytes, events: int) -> None:
        """Count ``buf`` as written and stamp the headers if these are the first bytes."""
        transport = self.request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client left")
        if not self.headers_out:
            self.headers_out = True
            wall = time.time()
            self.r["t_headers_ns"], self.r["t_wall_headers"] = time.monotonic_ns(), wall
            if self.clock is not None:  # the same moment in the agent's clock
                self.r["t_agent_wall_headers"] = self.clock(wall)
            if self.on_headers is not None:
                self.on_headers()
        if buf:
            self.parts.append(buf)
            self.nbytes += len(buf)
        self.events += events
        self.r["sent_bytes"], self.r["events_sent"] = self.nbytes, self.events

    async def _write(self, buf: bytes, events: int) -> None:
        if buf or not self.headers_out:  # an empty write sends the held headers alone
            self._handed(buf, events)
            await self.resp.write(buf)

    async def _flush(self) -> bool:
        """Wait until every byte written has left: handed to the kernel and sent by it (up to
        ``FLUSH_LIMIT_S``); True if that took a wait (the client was not reading)."""
        transport = self.request.transport
        if transport is None:
            return False
        waited = False
        if transport.get_write_buffer_size():
            waited = True
            low, high = transport.get_write_buffer_limits()
            transport.set_write_buffer_limits(high=0, low=0)  # paused until the buffer is empty
            try:
                if self.writer is not None:
                    await self.writer.drain()
            finally:
                if not transport.is_closing():
                    transport.set_write_buffer_limits(high=high, low=low)
        sock = transport.get_extra_info("socket")
        if sock is not None and _unsent(sock):
            waited = True
            loop = asyncio.get_running_loop()
            give_up = loop.time() + FLUSH_LIMIT_S
            while _unsent(sock) and not transport.is_closing() and loop.time() < give_up:
                await asyncio.sleep(0.0005)
        return waited

    async def run(self) -> None:
        """Prepare the response, write every chunk on schedule and end the connection as the
        plan says."""
        self.writer = await self.resp.prepare(self.request)
        self.r["headers"] = redact_headers(self.resp.headers)
        loop = asyncio.get_running_loop()
        due = loop.time()
        pending: list[bytes] = []
        events = 0
        for c in self.plan.chunks:
            if c.delay:
                await self._write(b"".join(pending), events)
                pending, events = [], 0
                if await self._flush():
                    due = loop.time()
                due += c.delay * self.scale
                await sleep_until(loop, due)
            if c.data:
                pending.append(c.data)
            events += c.event
            if c.flush:
                await self._write(b"".join(pending), events)
                pending, events = [], 0
                if await self._flush():
                    due = loop.time()
        await self._end(b"".join(pending), events)

    async def _end(self, buf: bytes, events: int) -> None:
        transport = self.request.transport
        ending = self.plan.ending
        if ending == "complete":
            self._handed(buf, events)
            # Stamped as the last byte is handed over, before the client can have it: a retry's
            # wait starts here.
            self.r["t_end_ns"] = time.monotonic_ns()
            await self.resp.write_eof(buf)  # with the final HTTP chunk: one write
            return
        await self._write(buf, events)
        if ending == "reset":
            await self._flush()  # the bytes before the cut leave before the RST discards them
            if self.nbytes and not (transport is None or transport.is_closing()):
                await asyncio.sleep(RESET_SETTLE_S)  # ... and the client reads them first
            self.r["t_end_ns"], self.r["end"] = time.monotonic_ns(), "reset"
            reset_connection(transport)
        else:  # close: the transport flushes what it holds, then closes
            self.r["t_end_ns"], self.r["end"] = time.monotonic_ns(), "close"
            if transport is not None:
                transport.close()
