"""A session port that refuses connections for a while, then serves the gateway.

Theory of operation: "connection refused" is the kernel's answer (an RST to the SYN) when nothing
listens on a port, so it cannot be produced per request by a server that listens. A session whose
scenario has ``refuse_connections: {seconds: N}`` therefore gets a port of its own: a socket bound
at once (no other program can take the port) but not listening, so every connection attempt is
refused; after N scaled seconds the socket starts listening and serves the same application as
the main port. Refused attempts never reach the gateway: the journal records when the window
opened and closed, and the first request it journals is the first attempt after the window.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time

from aiohttp import web

from fakes.journal import Refused

__all__ = ["RefusingPort"]


class RefusingPort:
    """A bound, not yet listening port on ``host`` that starts serving after a delay."""

    def __init__(self, host: str, seconds: float) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.bind((host, 0))
        except OSError:
            self._sock.close()
            raise
        self.port: int = self._sock.getsockname()[1]
        self.seconds = seconds  # nominal (unscaled), as the scenario says
        self.t_start_ns = time.monotonic_ns()
        self.t_listen_ns: int | None = None
        self._site: web.SockSite | None = None
        self._task: asyncio.Task[None] | None = None

    def open_after(
        self, delay: float, runner: web.AppRunner, ssl_context: ssl.SSLContext | None
    ) -> None:
        """Start listening ``delay`` real seconds from now (call on the gateway's loop)."""
        self._task = asyncio.get_running_loop().create_task(
            self._open(delay, runner, ssl_context), name=f"refusing-port-{self.port}"
        )

    async def _open(
        self, delay: float, runner: web.AppRunner, ssl_context: ssl.SSLContext | None
    ) -> None:
        try:
            await asyncio.sleep(delay)
            site = web.SockSite(runner, self._sock, ssl_context=ssl_context)
            await site.start()
        except BaseException:
            self._sock.close()  # never listened: nobody else owns the socket
            raise
        self._site = site
        self.t_listen_ns = time.monotonic_ns()

    async def close(self) -> None:
        """Stop the window or the listening site; the port is released either way."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._site is not None:
            await self._site.stop()
            self._site = None
        self._sock.close()

    def record(self) -> Refused:
        """The journal's ``refused`` record (contracts §2)."""
        return {
            "port": self.port,
            "seconds": self.seconds,
            "t_start_ns": self.t_start_ns,
            "t_listen_ns": self.t_listen_ns,
        }
