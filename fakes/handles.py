"""What a harness holds on a running gateway and on one of its sessions, wherever it runs.

Two gateways implement these: :class:`fakes.SyncGateway` (on a thread of the harness's process,
sessions :class:`fakes.Session`) and :class:`fakes.remote.GatewayProcess` (in a process of its
own, sessions :class:`fakes.remote.RemoteSession`). Code that drives an agent against a gateway
types it as :class:`GatewayHandle` and never asks which one it has; mypy checks that both
implement these (the assignments at the end of ``fakes.gateway`` and ``fakes.remote``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from fakes.journal import Journal
from fakes.scenario import Scenario

__all__ = ["GatewayHandle", "SessionHandle"]


class SessionHandle(Protocol):
    """One session of a gateway: where the agent is pointed, and its journal."""

    @property
    def id(self) -> str:
        """The session id (the path segment of its URLs)."""
        ...

    @property
    def base_url(self) -> str:
        """The model API's base URL for this session (ends in ``/v1``)."""
        ...

    @property
    def tool_endpoint(self) -> str:
        """The session's HTTP tool host."""
        ...

    @property
    def mcp_endpoint(self) -> str:
        """The session's MCP tool host (streamable HTTP)."""
        ...

    @property
    def credential_url(self) -> str:
        """The session's credential source: ``GET`` gives the key a refresh gets (RTY-10)."""
        ...

    def journal(self) -> Journal:
        """Contracts §2 journal: a snapshot, headers already redacted."""
        ...

    def wait_for(self, pred: Callable[[Journal], bool], timeout: float = 2.0) -> Journal:
        """The journal once ``pred`` holds of it; ``FakesError`` naming the session after
        ``timeout`` s."""
        ...

    def wait_headers(self, step: int, timeout: float) -> bool:
        """Whether the response served by script step ``step`` has its headers out, waiting
        up to ``timeout`` s for it."""
        ...

    def set_agent_clock(self, origin: float, speed: float) -> None:
        """The agent runs on a clock ``speed`` times as fast as the real one from real wall
        time ``origin``: the HTTP-dates this session renders are in that clock. ``ValueError``
        unless ``speed > 0``."""
        ...


class GatewayHandle(Protocol):
    """A running gateway: sessions are created on it, and dropped when their run is over."""

    @property
    def base_url(self) -> str:
        """Scheme, host and port the gateway serves on."""
        ...

    @property
    def ca_file(self) -> str | None:
        """The CA bundle an agent trusts the gateway's TLS with (None without TLS)."""
        ...

    def create_session(
        self, scenario: Scenario | dict[str, Any], time_scale: float = 1.0
    ) -> SessionHandle:
        """Register a session serving ``scenario``; ``ScenarioError`` for an invalid one."""
        ...

    def drop_session(self, sid: str) -> None:
        """Forget session ``sid``, ending whatever it still serves."""
        ...

    def overshoot(self, seconds: float) -> dict[str, float | int] | None:
        """The gateway loop's timer overshoot over about ``seconds`` (``fakes.clock.summary``
        figures), or None when the gateway runs in the caller's process and is measured as
        that process."""
        ...
