"""The gateway in a process of its own, and the handle a harness holds on it.

Theory of operation: :meth:`GatewayProcess.running` starts ``python -m fakes.remote``, which
serves one gateway (:class:`fakes.gateway.Gateway`) on its own event loop, prints where on one
JSON line and lives until its stdin closes: the harness holds that pipe, so the gateway ends
with the harness however the harness ends, and terminal signals (Ctrl-C) reach the harness
alone, which then closes the pipe. Sessions are created, read and dropped over the control API
(``docs/gateway.md``), so the harness's own work (reading an agent's events, judging, rendering
a report) never delays the gateway's timestamps or its scheduled faults.

:class:`GatewayProcess` and :class:`RemoteSession` are the handles of ``fakes.handles``, as
:class:`fakes.SyncGateway` and :class:`fakes.Session` are (mypy checks both). Journal timestamps are
``time.monotonic_ns()`` in the gateway's process: the system-wide monotonic clock, the one the
harness stamps an agent's events with.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from fakes.errors import FakesError, ScenarioError
from fakes.gateway import Gateway, poll_journal
from fakes.handles import GatewayHandle, SessionHandle
from fakes.journal import Journal
from fakes.scenario import Scenario

__all__ = ["GatewayProcess", "RemoteSession", "main"]

_START_TIMEOUT_S = 30.0  # a cold interpreter importing aiohttp on a busy machine
_CALL_TIMEOUT_S = 30.0


class RemoteSession:
    """A session of a :class:`GatewayProcess`: URLs, journal, the abort watcher's wait."""

    def __init__(self, gw: GatewayProcess, urls: dict[str, str]) -> None:
        self._gw = gw
        self.id: str = urls["session"]
        self.base_url: str = urls["base_url"]
        self.tool_endpoint: str = urls["tool_endpoint"]
        self.mcp_endpoint: str = urls["mcp_endpoint"]
        self.credential_url: str = urls["credential_url"]

    def journal(self) -> Journal:
        """Contracts §2 journal."""
        journal: Journal = self._gw.call("GET", f"/_control/sessions/{quote(self.id)}/journal")
        return journal

    def wait_headers(self, step: int, timeout: float) -> bool:
        """Whether the response served by script step ``step`` has its headers out, waiting
        up to ``timeout`` s for it (on the gateway's side: no polling over the wire)."""
        path = f"/_control/sessions/{quote(self.id)}/headers/{int(step)}?timeout={timeout:g}"
        return bool(self._gw.call("GET", path)["sent"])

    def set_agent_clock(self, origin: float, speed: float) -> None:
        """The agent runs on a clock ``speed`` times as fast as the real one from real wall time
        ``origin``: the HTTP-dates this session renders are in that clock."""
        if not speed > 0:
            raise ValueError(f"agent clock speed must be > 0, got {speed!r}")
        path = f"/_control/sessions/{quote(self.id)}/agent_clock"
        self._gw.call("PUT", path, {"origin": float(origin), "speed": float(speed)})

    def wait_for(self, pred: Callable[[Journal], bool], timeout: float = 2.0) -> Journal:
        """Poll the journal until ``pred(journal)`` is true; raise FakesError on timeout."""
        return poll_journal(self.id, self.journal, pred, timeout)

    def restart(self) -> int:
        """Start the scenario over, same id and URLs; the entries the journal had journaled.
        FakesError for a session that refuses connections on a port of its own."""
        answer = self._gw.call("POST", f"/_control/sessions/{quote(self.id)}/restart", {})
        return int(answer["dropped_entries"])


class GatewayProcess:
    """A gateway served by a child process: a ``fakes.GatewayHandle``, as ``SyncGateway`` is."""

    def __init__(self, host: str = "127.0.0.1", tls: bool = False) -> None:
        self.host, self.tls = host, tls
        self.base_url = ""
        self.ca_file: str | None = None
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._idle: list[http.client.HTTPConnection] = []  # kept-alive, for any thread
        self._lock = threading.Lock()
        self._ssl: ssl.SSLContext | None = None

    # --- lifetime ------------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def running(cls, host: str = "127.0.0.1", tls: bool = False) -> Iterator[GatewayProcess]:
        """Start the gateway's process; stop it on leaving."""
        gw = cls(host, tls)
        gw.start()
        try:
            yield gw
        finally:
            gw.stop()

    def start(self) -> None:
        """Start the child process (unless :meth:`launch` did) and wait until it serves."""
        self.launch()
        assert self._proc is not None
        line = _read_line(self._proc, _START_TIMEOUT_S)
        try:
            hello = json.loads(line)
            self.base_url, self.ca_file = hello["base_url"], hello.get("ca_file")
        except (ValueError, KeyError, TypeError) as exc:
            self.stop()
            raise FakesError(f"the gateway process did not start: {line!r}") from exc
        self.pid = self._proc.pid
        if self.ca_file:
            self._ssl = ssl.create_default_context(cafile=self.ca_file)

    def launch(self) -> None:
        """Start the child process without waiting for it: it imports and binds while the
        caller goes on with its own start; :meth:`start` then waits for it."""
        if self._proc is not None:
            return
        root = str(Path(__file__).resolve().parent.parent)  # where ``fakes`` is imported from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "fakes.remote", "--host", self.host]
        if self.tls:
            cmd.append("--tls")
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # Ctrl-C is the harness's to handle
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()  # the child's cue to stop
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # --- control API ---------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        u = urlsplit(self.base_url)
        host, port = u.hostname or self.host, u.port or 80
        if u.scheme == "https":
            return http.client.HTTPSConnection(
                host, port, timeout=_CALL_TIMEOUT_S, context=self._ssl
            )
        return http.client.HTTPConnection(host, port, timeout=_CALL_TIMEOUT_S)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One control request; its JSON answer. ScenarioError for a refused scenario (400),
        FakesError when the gateway's process is gone or answers otherwise."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                # A kept-alive connection the server closed meanwhile: one fresh try.
                if attempt == 2 or not self.alive():
                    raise FakesError(
                        f"the gateway process ({self._describe()}) did not answer "
                        f"{method} {path}: {exc}"
                    ) from exc
                continue
            with self._lock:
                self._idle.append(conn)
            break
        try:
            answer = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise FakesError(f"{method} {path}: not JSON: {raw[:200]!r}") from exc
        if resp.status == 400 and method == "POST":
            raise ScenarioError(_message(answer))
        if resp.status >= 400:
            raise FakesError(f"{method} {path}: HTTP {resp.status}: {_message(answer)}")
        return answer

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _describe(self) -> str:
        if self._proc is None:
            return "stopped"
        rc = self._proc.poll()
        return f"pid {self._proc.pid}, " + ("running" if rc is None else f"exited {rc}")

    def create_session(
        self, scenario: Scenario | dict[str, Any], time_scale: float = 1.0
    ) -> RemoteSession:
        """Register a session; raises ScenarioError for an invalid scenario."""
        raw = scenario.raw if isinstance(scenario, Scenario) else scenario
        urls = self.call("POST", "/_control/sessions", {"scenario": raw, "time_scale": time_scale})
        return RemoteSession(self, urls)

    def drop_session(self, sid: str) -> None:
        self.call("DELETE", f"/_control/sessions/{quote(sid)}")

    def overshoot(self, seconds: float) -> dict[str, float | int]:
        """The gateway loop's timer overshoot over ``seconds`` (``fakes.clock.overshoot``)."""
        figures: dict[str, float | int] = self.call("GET", f"/_control/calibrate?seconds={seconds}")
        return figures


# mypy checks here that the gateway process and its sessions are the handles harness code types
# them as (fakes.handles).
_GATEWAY_PROCESS: type[GatewayHandle] = GatewayProcess
_REMOTE_SESSION: type[SessionHandle] = RemoteSession


def _message(answer: Any) -> str:
    err = answer.get("error") if isinstance(answer, dict) else None
    msg = err.get("message") if isinstance(err, dict) else None
    return str(msg) if msg else json.dumps(answer)[:500]


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The child's first stdout line, or FakesError when none comes within ``timeout`` s."""
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.append(proc.stdout.readline() if proc.stdout else b""), daemon=True
    )
    reader.start()
    reader.join(timeout)
    if not got or not got[0]:
        proc.kill()
        proc.wait(timeout=10)
        why = "no answer" if not got else f"exit {proc.returncode}"
        raise FakesError(f"the gateway process did not start within {timeout:g} s ({why})")
    return got[0].decode("utf-8", "replace").strip()


# --- the child's side -----------------------------------------------------------------------------


async def _serve(host: str, tls: bool) -> None:
    async with Gateway(host, 0, tls=tls) as gw:
        loop = asyncio.get_running_loop()
        closed = asyncio.Event()

        def wait_for_eof() -> None:
            with contextlib.suppress(OSError, ValueError):
                sys.stdin.buffer.read()
            loop.call_soon_threadsafe(closed.set)

        threading.Thread(target=wait_for_eof, name="stdin-eof", daemon=True).start()
        hello = {"base_url": gw.base_url, "ca_file": gw.ca_file, "pid": os.getpid()}
        print(json.dumps(hello), flush=True)
        await closed.wait()


def main(argv: list[str] | None = None) -> int:
    """Serve one gateway until stdin closes (the parent's end of the pipe)."""
    p = argparse.ArgumentParser(prog="python -m fakes.remote", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tls", action="store_true")
    args = p.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this ends
    asyncio.run(_serve(args.host, args.tls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
