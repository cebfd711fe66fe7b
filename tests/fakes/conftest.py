"""Fixtures for the fake gateway tests."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fakes.pytest_plugin import fake_gateway, gateway_session

__all__ = ["fake_gateway", "gateway_session", "client"]


@pytest.fixture
def client() -> Any:
    with httpx.Client(timeout=5.0) as c:
        yield c
