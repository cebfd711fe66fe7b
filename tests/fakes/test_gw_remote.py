"""The gateway in a process of its own (fakes.remote): sessions over the control API, stamps on
the machine's one monotonic clock, the abort watcher's wait, and a process that ends with its
parent's pipe."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from fakes import Gateway, GatewayHandle, ScenarioError, SessionHandle
from fakes.remote import GatewayProcess
from tests.fakes.gw_wire import post, scenario

FAIL_THEN_REPLY = scenario(
    {"fault": {"http_error": {"status": 429}}},
    {"reply": {"text": "Hello!", "finish_reason": "stop"}},
)


@pytest.fixture(scope="module")
def remote() -> Iterator[GatewayProcess]:
    with GatewayProcess.running() as gw:
        yield gw


def test_a_session_over_the_control_api_serves_and_journals(remote):
    s = remote.create_session(FAIL_THEN_REPLY, time_scale=0.01)
    assert s.base_url.startswith(remote.base_url) and s.base_url.endswith("/v1")
    with httpx.Client(timeout=5) as c:
        first, second = post(c, s.base_url, stream=False), post(c, s.base_url, stream=False)
    assert (first.status, second.status) == (429, 200)
    entries = s.journal()["entries"]
    assert [e["response"]["status"] for e in entries] == [429, 200]
    assert entries[0]["fault"] == "http_error" and entries[0]["step"] == 0
    remote.drop_session(s.id)


def test_its_stamps_bracket_what_the_client_saw(remote):
    # Both processes read the machine's one monotonic clock: the gateway's stamps fall between
    # the client's sending and its having read the whole reply.
    s = remote.create_session(FAIL_THEN_REPLY, time_scale=0.01)
    with httpx.Client(timeout=5) as c:
        before = time.monotonic_ns()
        post(c, s.base_url, stream=False)
        after = time.monotonic_ns()
    (e,) = s.journal()["entries"]
    resp = e["response"]
    assert before <= e["t_arrival_ns"] <= resp["t_headers_ns"] <= resp["t_end_ns"] <= after


def test_a_bad_scenario_is_refused_with_its_reason(remote):
    with pytest.raises(ScenarioError, match="script"):
        remote.create_session({"id": "t", "criteria": ["STR-01"], "prompt": "p"})


def test_wait_headers_answers_when_the_step_has_its_headers(remote):
    held = scenario({"fault": {"delay_headers": {"seconds": 20}}, "reply": {"text": "late"}})
    s = remote.create_session(held, time_scale=0.01)
    assert s.wait_headers(0, 0.01) is False  # nothing asked yet
    got: list[object] = []
    t = threading.Thread(
        target=lambda: got.append(post(httpx.Client(timeout=5), s.base_url)), daemon=True
    )
    t.start()
    began = time.monotonic()
    assert s.wait_headers(0, 3.0) is True
    waited = time.monotonic() - began
    t.join(5)
    assert 0.1 < waited < 2.0  # the 0.2 s hold, not the 3 s timeout
    assert got and got[0].status == 200


def test_the_in_process_session_waits_for_headers_too():
    with Gateway.running() as gw:
        s = gw.create_session(FAIL_THEN_REPLY, time_scale=0.01)
        assert s.wait_headers(0, 0.01) is False
        with httpx.Client(timeout=5) as c:
            post(c, s.base_url)
        assert s.wait_headers(0, 0.01) is True


def test_the_calibration_endpoint_measures_the_gateways_loop(remote):
    figures = remote.overshoot(0.05)
    assert set(figures) == {"n", "p50_ms", "p90_ms", "p99_ms", "max_ms"}
    assert figures["n"] > 3 and 0 <= figures["p50_ms"] <= figures["max_ms"]


def test_over_https_the_control_api_uses_the_gateways_ca():
    with GatewayProcess.running(tls=True) as gw:
        assert gw.base_url.startswith("https://") and gw.ca_file
        s = gw.create_session(FAIL_THEN_REPLY, time_scale=0.01)
        ctx = ssl.create_default_context(cafile=gw.ca_file)
        with httpx.Client(timeout=5, verify=ctx) as c:
            assert post(c, s.base_url).status == 429
        assert len(s.journal()["entries"]) == 1


def test_the_process_ends_when_its_parent_lets_go():
    gw = GatewayProcess()
    gw.start()
    proc = gw._proc
    assert proc is not None and proc.poll() is None
    gw.stop()
    assert proc.poll() is not None  # stdin closed: it stopped by itself
    assert not gw.alive()
    with pytest.raises(Exception, match="gateway process"):
        gw.create_session(FAIL_THEN_REPLY)


def test_the_agents_fast_clock_is_set_over_the_control_api(remote):
    dated = scenario({"fault": {"http_error": {"status": 429, "retry_after_date": 3}}})
    s = remote.create_session(dated, time_scale=0.01)
    origin = time.time() - 100.0
    s.set_agent_clock(origin, 10.0)
    with httpx.Client(timeout=5) as c:
        post(c, s.base_url, stream=False)
    (e,) = s.journal()["entries"]
    resp = e["response"]
    wall = resp["t_wall_headers"]
    assert resp["t_agent_wall_headers"] == pytest.approx(origin + (wall - origin) * 10, abs=1e-3)
    with pytest.raises(ValueError, match="speed must be > 0"):
        s.set_agent_clock(origin, 0)
    with pytest.raises(Exception, match="unknown session"):
        remote.call("PUT", "/_control/sessions/nope/agent_clock", {"origin": 0, "speed": 2})


def _one_session_through_the_handle(gw: GatewayHandle) -> tuple[list[int], bool]:
    # Only what fakes.GatewayHandle / fakes.SessionHandle declare: the runner's view of either.
    s: SessionHandle = gw.create_session(FAIL_THEN_REPLY, time_scale=0.01)
    assert s.base_url.startswith(gw.base_url) and s.base_url.endswith("/v1")
    assert s.id in s.tool_endpoint and s.id in s.mcp_endpoint
    s.set_agent_clock(time.time(), 2.0)
    with httpx.Client(timeout=5) as c:
        post(c, s.base_url, stream=False)
    seen = s.wait_for(lambda j: len(j["entries"]) == 1, timeout=5)
    headers = s.wait_headers(0, 0.5)
    gw.drop_session(s.id)
    return [e["response"]["status"] for e in seen["entries"]], headers


def test_both_gateways_serve_through_the_one_handle(remote):
    with Gateway.running() as here:
        assert _one_session_through_the_handle(here) == ([429], True)
        assert here.overshoot(0.01) is None  # measured as the caller's own process
    assert _one_session_through_the_handle(remote) == ([429], True)
