"""Public handles on a running fake gateway: async (`async with Gateway()`) and thread-backed
(`with Gateway.running() as gw`) for synchronous harness code."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import trustme
from aiohttp import web

from fakes.errors import FakesError
from fakes.handles import GatewayHandle, SessionHandle
from fakes.journal import Journal
from fakes.retention import Retention
from fakes.scenario import Scenario
from fakes.server import GatewayApp

__all__ = ["Gateway", "Session", "SyncGateway"]

T = TypeVar("T")


def poll_journal(
    sid: str, journal: Callable[[], Journal], pred: Callable[[Journal], bool], timeout: float
) -> Journal:
    """Read ``journal()`` until ``pred`` holds of it; FakesError naming the session on timeout."""
    end = time.monotonic() + timeout
    while True:
        j = journal()
        if pred(j):
            return j
        if time.monotonic() > end:
            raise FakesError(f"session {sid}: condition not met within {timeout}s")
        time.sleep(0.005)


class Session:
    """A session as seen by the harness: URLs and a redacted journal."""

    def __init__(self, gw: Gateway | SyncGateway, sid: str) -> None:
        self._gw = gw
        self.id = sid
        urls = gw.app.urls(sid)
        self.base_url: str = urls["base_url"]
        self.tool_endpoint: str = urls["tool_endpoint"]
        self.mcp_endpoint: str = urls["mcp_endpoint"]
        self.credential_url: str = urls["credential_url"]

    def journal(self) -> Journal:
        """Contracts §2 journal (a snapshot copy)."""
        return self._gw._call(lambda: self._gw.app.sessions[self.id].journal())

    def wait_headers(self, step: int, timeout: float) -> bool:
        """Whether the response served by script step ``step`` has its headers out, waiting
        up to ``timeout`` s for it."""
        end = time.monotonic() + timeout
        while not self._gw._call(lambda: self._gw.app.sessions[self.id].headers_out(step)):
            if time.monotonic() >= end:
                return False
            time.sleep(0.002)
        return True

    def set_agent_clock(self, origin: float, speed: float) -> None:
        """The agent runs on a clock ``speed`` times as fast as the real one from real wall time
        ``origin``: the HTTP-dates this session renders are in that clock."""
        if not speed > 0:
            raise ValueError(f"agent clock speed must be > 0, got {speed!r}")

        def put() -> None:
            self._gw.app.sessions[self.id].agent_clock = (float(origin), float(speed))

        self._gw._call(put)

    def wait_for(self, pred: Callable[[Journal], bool], timeout: float = 2.0) -> Journal:
        """Poll the journal until ``pred(journal)`` is true; raise FakesError on timeout."""
        return poll_journal(self.id, self.journal, pred, timeout)

    def restart(self) -> int:
        """Start the scenario over, same id and URLs (``POST
        /_control/sessions/<sid>/restart``); the entries the journal had journaled. FakesError
        for a session that refuses connections on a port of its own."""

        def go() -> int:
            st = self._gw.app.sessions[self.id]
            if st.refused is not None:
                raise FakesError(
                    f"session {self.id!r} refuses connections on a port of its own, whose "
                    "window cannot be replayed: drop it and create a new session"
                )
            return st.restart()

        return self._gw._call(go)


class Gateway:
    """The gateway on the current event loop: ``async with Gateway() as gw``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        *,
        retention: Retention | None = None,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        """``retention``: how much of each session's journal to keep (default: everything);
        ``allowed_hosts``: names a request may carry in ``Host`` / ``Origin`` besides the
        loopback ones and ``host`` (``*``: any), see ``fakes.loopback``."""
        self.host, self.port, self.tls = host, port, tls
        self.app = GatewayApp(retention, allowed_hosts=allowed_hosts, bind_host=host)
        self.ca_file: str | None = None
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        """A trustme CA and a server certificate for 127.0.0.1/localhost/the host."""
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost", self.host)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(ctx)
        self._tmp = tempfile.TemporaryDirectory(prefix="fake-gateway-ca-")
        path = Path(self._tmp.name) / "ca.pem"
        ca.cert_pem.write_to_path(str(path))
        self.ca_file = str(path)
        return ctx

    def _call(self, fn: Callable[[], T]) -> T:
        return fn()

    async def start(self) -> None:
        # A fault gateway owes no grace to requests it is holding (a 600 s delay_headers, a
        # stall): shutting down cancels them at once instead of waiting aiohttp's default 60 s.
        self._runner = web.AppRunner(
            self.app.app, access_log=None, handle_signals=False, shutdown_timeout=0.1
        )
        await self._runner.setup()
        ctx = self._ssl_context() if self.tls else None
        self.app.host, self.app.runner, self.app.ssl_context = self.host, self._runner, ctx
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ctx)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.port = port
        self.base_url = f"{'https' if self.tls else 'http'}://{self.host}:{port}"
        self.app.base_url = self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            await self.app.close_ports()
            await self._runner.cleanup()
            self._runner = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def create_session(
        self, scenario: Scenario | dict[str, Any], time_scale: float = 1.0
    ) -> Session:
        """Register a session (validates dict scenarios; raises ScenarioError)."""
        st = self.app.add_session(scenario, time_scale)
        return Session(self, st.id)

    def drop_session(self, sid: str) -> None:
        self.app.drop(sid)

    def serve_at_root(self, sid: str) -> str:
        """Serve session ``sid`` at the root ``/v1`` too; returns that base URL."""
        self.app.serve_at_root(sid)
        return f"{self.base_url}/v1"

    @classmethod
    @contextlib.contextmanager
    def running(
        cls,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        *,
        retention: Retention | None = None,
        allowed_hosts: Iterable[str] = (),
    ) -> Iterator[SyncGateway]:
        """Start the gateway on its own thread and event loop for synchronous callers."""
        gw = SyncGateway(cls(host, port, tls, retention=retention, allowed_hosts=allowed_hosts))
        gw.start()
        try:
            yield gw
        finally:
            gw.stop()


class SyncGateway:
    """Thread-backed handle; every state access runs on the gateway's loop."""

    def __init__(self, inner: Gateway) -> None:
        self._inner = inner
        self.app = inner.app
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fake-gateway", daemon=True
        )

    @property
    def base_url(self) -> str:
        return self._inner.base_url

    @property
    def ca_file(self) -> str | None:
        return self._inner.ca_file

    def _call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._inner.start(), self._loop).result(timeout=10)

    async def _stop_all(self) -> None:
        await self._inner.stop()
        # The loop is ours alone: handlers still holding a request (a long stall) are
        # cancelled and awaited, so nothing is left pending when the loop closes.
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop).result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def create_session(
        self, scenario: Scenario | dict[str, Any], time_scale: float = 1.0
    ) -> Session:
        """Register a session; raises ScenarioError for an invalid dict scenario."""
        st = self._call(lambda: self.app.add_session(scenario, time_scale))
        return Session(self, st.id)

    def drop_session(self, sid: str) -> None:
        asyncio.run_coroutine_threadsafe(self.app.drop_now(sid), self._loop).result(timeout=10)

    def serve_at_root(self, sid: str) -> str:
        """Serve session ``sid`` at the root ``/v1`` too; returns that base URL."""
        self._call(lambda: self.app.serve_at_root(sid))
        return f"{self.base_url}/v1"

    def overshoot(self, seconds: float) -> None:
        """None: this gateway's loop is a thread of the caller's process, which measures its
        own loop lag for both (``conformance.judging.timing.measure``)."""
        del seconds
        return None


# mypy checks here that the thread-backed gateway and its sessions are the handles harness code
# types them as (fakes.handles).
_SYNC_GATEWAY: type[GatewayHandle] = SyncGateway
_SESSION: type[SessionHandle] = Session
