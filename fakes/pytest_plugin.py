"""pytest fixtures: ``fake_gateway`` (session-scoped) and ``gateway_session`` (factory)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fakes.gateway import Gateway, Session, SyncGateway

__all__ = ["fake_gateway", "gateway_session"]


@pytest.fixture(scope="session")
def fake_gateway() -> Iterator[SyncGateway]:
    """A gateway on 127.0.0.1:0, shared by the whole test session."""
    with Gateway.running() as gw:
        yield gw


def sessions_on(gw: SyncGateway) -> Iterator[Callable[..., Session]]:
    """Yield a session factory on ``gw``; drop every session it made afterwards."""
    made: list[Session] = []

    def make(scenario: Any, time_scale: float = 0.001) -> Session:
        s = gw.create_session(scenario, time_scale=time_scale)
        made.append(s)
        return s

    yield make
    for s in made:
        gw.drop_session(s.id)


@pytest.fixture
def gateway_session(fake_gateway: SyncGateway) -> Iterator[Callable[..., Session]]:
    """Factory: ``gateway_session(scenario, time_scale=0.001)`` -> fresh Session."""
    yield from sessions_on(fake_gateway)
