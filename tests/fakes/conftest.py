"""Fixtures for the fake gateway tests: every wire test runs over HTTP and HTTPS."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from fakes import Gateway, Session, SyncGateway
from fakes.pytest_plugin import fake_gateway, sessions_on  # noqa: F401 (fixture)

__all__ = ["fake_gateway", "tls_gateway", "gw", "gateway_session", "client"]


@pytest.fixture(scope="session")
def tls_gateway() -> Iterator[SyncGateway]:
    with Gateway.running(tls=True) as g:
        yield g


@pytest.fixture(params=["http", "https"])
def gw(request: Any, fake_gateway: SyncGateway, tls_gateway: SyncGateway) -> SyncGateway:
    return fake_gateway if request.param == "http" else tls_gateway


@pytest.fixture
def gateway_session(gw: SyncGateway) -> Iterator[Callable[..., Session]]:
    yield from sessions_on(gw)


@pytest.fixture
def client(gw: SyncGateway) -> Iterator[httpx.Client]:
    with httpx.Client(
        timeout=5.0, verify=ssl.create_default_context(cafile=gw.ca_file) if gw.ca_file else True
    ) as c:
        yield c
