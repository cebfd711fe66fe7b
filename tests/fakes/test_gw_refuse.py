"""`refuse_connections`: a session port that refuses connections (bound, not listening) for a
window, then serves the session; the journal records the window."""

from __future__ import annotations

import errno
import socket
from urllib.parse import urlsplit

import pytest
from gw_wire import post, scenario

from fakes import Gateway, ScenarioError
from fakes.errors import FakesError
from fakes.scenario import Scenario
from fakes.server import GatewayApp

REPLY = {"reply": {"text": "hello"}}


def connect_errno(url: str) -> int:
    """0 when a TCP connection to ``url``'s port succeeds, else the errno."""
    parts = urlsplit(url)
    with socket.socket() as s:
        return s.connect_ex((parts.hostname, parts.port))


def test_refused_for_the_window(fake_gateway):
    # A window of 600 s real: the checks below happen well inside it.
    s = fake_gateway.create_session(
        scenario(REPLY, refuse_connections={"seconds": 600}), time_scale=1.0
    )
    try:
        assert urlsplit(s.base_url).port != urlsplit(fake_gateway.base_url).port
        assert connect_errno(s.base_url) == errno.ECONNREFUSED
        refused = s.journal()["refused"]
        assert refused["seconds"] == 600 and refused["t_listen_ns"] is None
        assert refused["port"] == urlsplit(s.base_url).port
        assert s.journal()["entries"] == []  # a refused attempt never reaches the gateway
    finally:
        fake_gateway.drop_session(s.id)
    # Dropped inside the window: the port is released and never listened.
    with socket.socket() as again:
        again.bind(("127.0.0.1", refused["port"]))


def test_serves_the_session_once_the_window_closes(gateway_session, client):
    s = gateway_session(scenario(REPLY, refuse_connections={"seconds": 5}), time_scale=0.001)
    j = s.wait_for(lambda j: j["refused"]["t_listen_ns"] is not None)
    got = post(client, s.base_url)  # over HTTPS too: the port serves the gateway's TLS
    assert got.status == 200 and b"hello" in got.body
    j = s.journal()
    window = j["refused"]["t_listen_ns"] - j["refused"]["t_start_ns"]
    assert window >= 5 * 0.001 * 1e9
    (e,) = j["entries"]
    assert e["step"] == 0 and e["t_arrival_ns"] > j["refused"]["t_listen_ns"]


def test_scenarios_without_it_have_no_record(gateway_session):
    s = gateway_session(scenario(REPLY))
    assert "refused" not in s.journal()


@pytest.mark.parametrize("value", [{}, {"seconds": 0}, {"seconds": 1, "extra": 2}, 3])
def test_schema_rejects_a_bad_window(value):
    with pytest.raises(ScenarioError, match="refuse_connections"):
        Scenario.from_dict(scenario(REPLY, refuse_connections=value))


def test_needs_a_running_gateway():
    sc = Scenario.from_dict(scenario(REPLY, refuse_connections={"seconds": 1}))
    with pytest.raises(FakesError, match="refuse_connections needs a running gateway"):
        GatewayApp().add_session(sc)


async def test_stopping_the_gateway_inside_the_window_releases_the_port():
    async with Gateway() as gw:
        s = gw.create_session(scenario(REPLY, refuse_connections={"seconds": 600}))
        port = urlsplit(s.base_url).port
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # free again: the bound socket was closed
