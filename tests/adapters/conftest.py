"""Fixtures shared by the adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import Gateway, SyncGateway


@pytest.fixture
def gateway() -> Iterator[SyncGateway]:
    """A fake gateway of this test's own, on 127.0.0.1, port 0."""
    gw = SyncGateway(Gateway())
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()
