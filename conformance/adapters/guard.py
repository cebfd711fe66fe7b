"""The loopback guard: nothing a shipped agent does may leave the machine.

Theory of operation, two layers:

1. **Proxy variables.** The agent's environment points ``HTTP(S)_PROXY`` / ``ALL_PROXY`` (both
   cases) at a proxy on 127.0.0.1 that answers every request and every ``CONNECT`` with 403 and
   logs the target (host, port, time), with ``NO_PROXY=127.0.0.1,localhost`` so that the gateway
   is reached directly. Agents built on Node or Python HTTP stacks honour these variables, so the
   log names the host they tried.
2. **A loopback-only network namespace** (Linux, needs CAP_SYS_ADMIN). A dedicated thread calls
   ``unshare(CLONE_NEWNET)``, which moves only that thread into a fresh namespace whose sole
   interface is ``lo``; every socket the thread creates and every process it starts live there.
   In it the guard adds ``local 0.0.0.0/0 dev lo``, so that every IPv4 address is local: a direct
   connection to an outside address lands on loopback instead of failing with "network
   unreachable". Traps listen on the usual ports (TCP 80, 443, 8080, 8443, 22, 9418; UDP and TCP
   53 for DNS, which logs the name asked for) and log the address the agent dialled; other ports
   are refused by the kernel (blocked, but not logged). The gateway is reached through a
   forwarder listening on the gateway's own 127.0.0.1 port inside the namespace, which relays
   bytes to the real gateway from the harness's namespace, resets included (a reset from the
   gateway is passed on as a reset, an orderly close as a half-close), so faults keep their
   shape.

Where the namespace cannot be made (not root, no ``ip``), layer 1 alone runs and the result says
so (``netns: false`` with the reason). Every attempt is an *outside attempt*: reported in the
results and, in certification mode, failing the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.errors import ConformanceError

__all__ = [
    "GuardError",
    "GuardedProcess",
    "LoopbackGuard",
    "RefusingProxy",
    "TRAP_TCP_PORTS",
    "certify_problems",
    "netns_available",
    "proxy_env",
]

TRAP_TCP_PORTS = (80, 443, 8080, 8443, 22, 9418, 53)
_CLONE_NEWNET = 0x40000000
_NO_PROXY = "127.0.0.1,localhost,::1"
_HEAD_MAX = 16384  # a request head larger than this is logged as unreadable


class GuardError(ConformanceError, RuntimeError):
    """The loopback guard cannot confine an agent as asked (no network namespace)."""


def proxy_env(proxy_url: str) -> dict[str, str]:
    """The proxy variables (both cases) pointing at `proxy_url`, loopback exempted."""
    env: dict[str, str] = {}
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy_url
    env["NO_PROXY"] = env["no_proxy"] = _NO_PROXY
    return env


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class _Log:
    """A thread-safe list of outside attempts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def add(self, **item: Any) -> None:
        with self._lock:
            self._items.append({"time": _now(), **item})

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(i) for i in self._items]


class _Acceptor:
    """Accepts on listening sockets in a daemon thread and hands each connection to a handler."""

    def __init__(self) -> None:
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def serve(self, sock: socket.socket, handler: Callable[[socket.socket, Any], None]) -> None:
        sock.settimeout(0.1)
        self._socks.append(sock)

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    conn, addr = sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                conn.settimeout(None)
                threading.Thread(target=handler, args=(conn, addr), daemon=True).start()

        self._start(loop)

    def serve_udp(
        self, sock: socket.socket, handler: Callable[[bytes, Any, socket.socket], None]
    ) -> None:
        sock.settimeout(0.1)
        self._socks.append(sock)

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    data, addr = sock.recvfrom(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                handler(data, addr, sock)

        self._start(loop)

    def _start(self, loop: Callable[[], None]) -> None:
        t = threading.Thread(target=loop, daemon=True)
        self._threads.append(t)
        t.start()

    def close(self) -> None:
        self._stop.set()
        for s in self._socks:
            # shutdown wakes a thread blocked on the socket; close alone would leave the
            # listener open until that thread's poll times out.
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        for t in self._threads:
            t.join(1)


def _read_head(conn: socket.socket) -> bytes:
    conn.settimeout(5)
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in data and len(data) < _HEAD_MAX:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    return data


def _split_target(method: str, target: str, head: bytes) -> tuple[str, int]:
    """Host and port an HTTP proxy request is aimed at."""
    from urllib.parse import urlsplit

    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return host.strip("[]") or target, int(port) if port.isdigit() else 443
    parts = urlsplit(target)
    if parts.hostname:
        return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(b"host:"):
            host, _, port = line[5:].decode("latin-1").strip().rpartition(":")
            return (host, int(port)) if port.isdigit() else (line[5:].decode().strip(), 80)
    return "", 0


class RefusingProxy:
    """An HTTP proxy on 127.0.0.1 that refuses (403) and logs every request and CONNECT."""

    def __init__(self, log: _Log | None = None, sock: socket.socket | None = None) -> None:
        self.log = log or _Log()
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._acceptor = _Acceptor()
        self._acceptor.serve(sock, self._handle)

    def _handle(self, conn: socket.socket, _addr: Any) -> None:
        with conn:
            head = _read_head(conn)
            line = head.split(b"\r\n", 1)[0].decode("latin-1", errors="replace")
            parts = line.split()
            if len(parts) >= 2:
                method, target = parts[0].upper(), parts[1]
                host, port = _split_target(method, target, head)
            else:
                method, host, port = "?", "", 0
            self.log.add(via="proxy", method=method, host=host, port=port)
            with contextlib.suppress(OSError):
                conn.sendall(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: 38\r\nConnection: close\r\n\r\n"
                    b"outside connections refused by guard\r\n"
                )

    def attempts(self) -> list[dict[str, Any]]:
        return self.log.items()

    def close(self) -> None:
        self._acceptor.close()


def _dns_name(packet: bytes) -> str:
    """The first question's name of a DNS query (best effort)."""
    labels, i = [], 12
    with contextlib.suppress(IndexError):
        while i < len(packet) and packet[i]:
            n = packet[i]
            labels.append(packet[i + 1 : i + 1 + n].decode("ascii", errors="replace"))
            i += 1 + n
    return ".".join(labels)


def _dns_refused(query: bytes) -> bytes:
    """A REFUSED answer echoing the query's id and question."""
    if len(query) < 12:
        return b""
    flags = struct.pack(">H", 0x8000 | (query[2] & 0x79) << 8 | 5)  # QR, opcode, RD; RCODE 5
    return query[:2] + flags + query[4:6] + b"\0\0\0\0\0\0" + query[12:]


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Relay both ways on one thread: a reset on one side becomes a reset on the other, an EOF
    a half-close. One thread, so that the closing side is never held open by a blocked reader."""
    import selectors

    sel = selectors.DefaultSelector()
    peer = {a: b, b: a}
    open_reads = {a, b}
    for s in (a, b):
        sel.register(s, selectors.EVENT_READ)
    try:
        while open_reads:
            for key, _ in sel.select():
                src = key.fileobj
                dst = peer[src]  # type: ignore[index]
                try:
                    data = src.recv(65536)  # type: ignore[union-attr]
                except ConnectionResetError:
                    _reset(dst)
                    return
                except OSError:
                    return
                if not data:
                    sel.unregister(src)
                    open_reads.discard(src)
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    continue
                try:
                    dst.sendall(data)
                except OSError:
                    _reset(src)  # type: ignore[arg-type]
                    return
    finally:
        sel.close()
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.close()


@dataclass
class GuardedProcess:
    """A process started under the guard, and how it was guarded."""

    proc: subprocess.Popen[bytes]  # byte pipes: the guard's callers read raw output
    netns: bool
    netns_note: str
    env_added: dict[str, str] = field(default_factory=dict)


def netns_available() -> tuple[bool, str]:
    """Whether a loopback-only network namespace can be made here, and why not."""
    out: dict[str, str] = {}

    def probe() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNET) != 0:
            out["why"] = f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}"
        elif not (shutil.which("ip") or os.path.exists("/usr/sbin/ip")):
            out["why"] = "no `ip` command to bring lo up"

    t = threading.Thread(target=probe, daemon=True)  # the thread's namespace dies with it
    t.start()
    t.join()
    return ("why" not in out, out.get("why", ""))


class LoopbackGuard:
    """Starts agents with outside connections refused and logged; see the module docstring.

    `use_netns`: True requires the namespace (an error if it cannot be made), False disables it,
    None uses it when it can be made. `forward_ports` are the 127.0.0.1 ports (the gateway's)
    that the namespace must still reach.
    """

    def __init__(self, *, use_netns: bool | None = None, forward_ports: tuple[int, ...] = ()):
        self.use_netns = use_netns
        self.forward_ports = tuple(forward_ports)
        self.log = _Log()
        self._acceptor = _Acceptor()
        self.proxy: RefusingProxy | None = None
        self.netns = False
        self.netns_note = ""

    # -- the namespace ------------------------------------------------------------------

    def _in_new_netns(
        self, spawn: Callable[[], subprocess.Popen[bytes]]
    ) -> subprocess.Popen[bytes]:
        """Run the setup and `spawn` on a thread moved into a fresh loopback-only netns."""
        procs: list[subprocess.Popen[bytes]] = []
        errors: list[BaseException] = []

        def body() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.unshare(_CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
                ip = shutil.which("ip") or "/usr/sbin/ip"
                subprocess.run([ip, "link", "set", "lo", "up"], check=True, capture_output=True)
                # Every IPv4 address becomes local, so direct dials reach the traps.
                subprocess.run(
                    [ip, "route", "add", "local", "0.0.0.0/0", "dev", "lo"],
                    check=True,
                    capture_output=True,
                )
                self._setup_inside()
                procs.append(spawn())
            except BaseException as exc:  # reported to the caller's thread
                errors.append(exc)

        self._pending: list[tuple[socket.socket, Any]] = []
        t = threading.Thread(target=body, name="guard-netns", daemon=True)
        t.start()
        t.join()
        # Serve only now, from this thread: threads inherit their creator's namespace, and the
        # forwarders must dial the gateway from the harness's namespace, not from inside.
        if errors:
            for sock, _ in self._pending:
                sock.close()
            if self.proxy:
                self.proxy.close()
            raise errors[0]
        for sock, handler in self._pending:
            self._acceptor.serve(sock, handler)
        return procs[0]

    def _setup_inside(self) -> None:
        """Sockets made on the namespace thread: forwarders, proxy, traps."""
        for port in self.forward_ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(64)
            self._pending.append((s, self._forwarder(port)))
        psock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        psock.bind(("127.0.0.1", 0))
        self.proxy = RefusingProxy(self.log, psock)  # its threads may live inside: no dialling
        for port in TRAP_TCP_PORTS:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", port))
            s.listen(64)
            self._acceptor.serve(s, self._trap)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("0.0.0.0", 53))
        self._acceptor.serve_udp(u, self._dns_trap)

    def _forwarder(self, port: int) -> Callable[[socket.socket, Any], None]:
        def handle(conn: socket.socket, _addr: Any) -> None:
            # Runs on an acceptor thread, which lives in the harness's own namespace.
            try:
                up = socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError:
                conn.close()
                return
            up.settimeout(None)
            _pump(conn, up)

        return handle

    def _trap(self, conn: socket.socket, addr: Any) -> None:
        host, port = conn.getsockname()[:2]
        self.log.add(via="direct", method="connect", host=host, port=port)
        with contextlib.suppress(OSError):
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def _dns_trap(self, data: bytes, addr: Any, sock: socket.socket) -> None:
        self.log.add(via="dns", method="query", host=_dns_name(data), port=53)
        with contextlib.suppress(OSError):
            sock.sendto(_dns_refused(data), addr)

    # -- public API ---------------------------------------------------------------------

    def popen(self, argv: list[str], *, env: dict[str, str], **kwargs: Any) -> GuardedProcess:
        """Start `argv` guarded; `env` gets the proxy variables added."""

        def spawn() -> subprocess.Popen[bytes]:
            assert self.proxy is not None
            full = {**env, **proxy_env(self.proxy.url)}
            return subprocess.Popen(argv, env=full, **kwargs)

        if self.use_netns is not False:
            try:
                proc = self._in_new_netns(spawn)
                self.netns = True
                self.netns_note = "loopback-only network namespace"
                assert self.proxy is not None
                return GuardedProcess(proc, True, self.netns_note, proxy_env(self.proxy.url))
            except (OSError, subprocess.CalledProcessError) as exc:
                if self.use_netns:
                    raise GuardError(f"guard: cannot make a network namespace: {exc}") from exc
                self._acceptor.close()
                self._acceptor = _Acceptor()
                self.netns_note = f"no network namespace ({exc}); proxy variables only"
        self.proxy = RefusingProxy(self.log)
        proc = spawn()
        return GuardedProcess(proc, False, self.netns_note, proxy_env(self.proxy.url))

    def attempts(self) -> list[dict[str, Any]]:
        """Every outside attempt seen so far, oldest first."""
        return self.log.items()

    def close(self) -> None:
        self._acceptor.close()
        if self.proxy:
            self.proxy.close()


def certify_problems(results: Mapping[str, Any]) -> list[str]:
    """Certification mode: one line per scenario run in which something tried to leave.

    `results` is the results document (contracts §4). Scenario entries carry
    ``outside_attempts`` when their adapter ran under the guard; an empty list means nothing
    left, a missing key means the adapter was not guarded (SDK and reference agents).
    """
    problems = []
    for agent in results.get("agents", []):
        for sc in agent.get("scenarios", []):
            attempts = sc.get("outside_attempts") or []
            if attempts:
                where = ", ".join(
                    f"{a.get('via')} {a.get('host')}:{a.get('port')}" for a in attempts[:5]
                )
                more = f" (+{len(attempts) - 5} more)" if len(attempts) > 5 else ""
                problems.append(
                    f"{agent.get('name')}: {sc.get('id')}: {len(attempts)} outside "
                    f"connection attempt(s): {where}{more}"
                )
    return problems
