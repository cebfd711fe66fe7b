"""Host and Origin validation: every listener of the gateway answers loopback names only.

Theory of operation: a gateway left running on 127.0.0.1 can still be reached from a web page in
the user's browser by DNS rebinding (a name of the attacker's that resolves to 127.0.0.1): the
browser then sends the attacker's name in ``Host`` and the page's origin in ``Origin``. The MCP
specification makes refusing such requests a MUST for local servers; the model endpoints, the
tool host and the control API (which loads scenario files by path) need it as much. So an aiohttp
middleware refuses, before any route, a request whose ``Host`` or ``Origin`` names a host that is
not a loopback name (``localhost``, ``127.0.0.1``, ``::1``, any port) nor one allowed on purpose
(``allowed_hosts``; the address the gateway binds, when it is one, is allowed too). A request
without ``Host`` (HTTP/1.0) or without ``Origin`` (every non-browser client) is not refused on
that account. The refusal is a 403 whose body names the header, its value and the option that
allows more hosts, in the endpoint's error shape (JSON-RPC on the MCP endpoint); it never
reaches a session, so it is not journaled.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

__all__ = ["LOOPBACK_NAMES", "HostCheck", "host_check_middleware"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# What a bind address that listens everywhere is called: no name a client sends.
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
HINT = "allow more with --allow-host NAME (python -m fakes serve) or allowed_hosts=[...]"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _normal(name: str) -> str:
    """``name`` as compared: lower case, no brackets around an IPv6 address, no final dot."""
    name = name.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".") if name not in ("", ".") else name


def _host_of_authority(value: str) -> str | None:
    """The host of ``host[:port]`` (IPv6 in brackets), or None when it is not one."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        host, port = value[1:end], value[end + 2 :]
    else:
        host, _, port = value.partition(":")
        if ":" in port:  # a bare IPv6 address is no Host header
            return None
    if port and not port.isdigit():
        return None
    return _normal(host) if host else None


def _host_of_origin(value: str) -> str | None:
    """The host of an ``Origin`` (``scheme://host[:port]``), or None (``null``, garbage)."""
    try:
        parts = urlsplit(value.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a port that is not one
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    return _normal(host)


class HostCheck:
    """Which hosts a request may name in ``Host`` and ``Origin``.

    ``allowed_hosts``: names or addresses allowed besides the loopback ones (``*``: any host,
    the check off); ``bind_host``: the address the gateway listens on, allowed when it names
    one address (not a wildcard)."""

    def __init__(self, allowed_hosts: Iterable[str] = (), bind_host: str = "127.0.0.1") -> None:
        extra = [str(h) for h in allowed_hosts]
        self.any_host = "*" in extra
        self.allowed = set(LOOPBACK_NAMES) | {_normal(h) for h in extra if h != "*"}
        if _normal(bind_host) not in _WILDCARDS:
            self.allowed.add(_normal(bind_host))

    def allows(self, host: str) -> bool:
        if self.any_host or host in self.allowed:
            return True
        try:  # the whole 127.0.0.0/8 is this machine's loopback
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def problem(self, host_header: str | None, origin: str | None) -> tuple[str, str] | None:
        """``(header, value)`` of the first header that names a host not allowed, or None."""
        if self.any_host:
            return None
        if host_header is not None:
            host = _host_of_authority(host_header)
            if host is None or not self.allows(host):
                return "Host", host_header
        if origin is not None:
            host = _host_of_origin(origin)
            if host is None or not self.allows(host):
                return "Origin", origin
        return None

    def message(self, header: str, value: str) -> str:
        """What a refused request is told: the header, its value, what is allowed, the option."""
        names = ", ".join(sorted(self.allowed - LOOPBACK_NAMES))
        return (
            f"forbidden {header} header {value!r}: this gateway answers requests that name a "
            f"loopback host only (localhost, 127.0.0.1, [::1], any port)"
            f"{f' or {names}' if names else ''}, against DNS rebinding; {HINT}"
        )


def host_check_middleware(
    check: HostCheck, body: Callable[[web.Request, str], dict[str, Any]]
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware refusing what ``check`` refuses, before any route runs, with a 403
    whose JSON body is ``body(request, message)`` (the endpoint's error shape)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        bad = check.problem(request.headers.get("Host"), request.headers.get("Origin"))
        if bad is not None:
            return web.json_response(body(request, check.message(*bad)), status=403)
        return await handler(request)

    return middleware
