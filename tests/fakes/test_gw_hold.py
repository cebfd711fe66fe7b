"""Delayed headers: a client that gives up while they are held is journaled when it left."""

from __future__ import annotations

import ssl
import threading

import httpx
from gw_wire import full_stream, post, scenario

REPLY = {"text": "hello there", "chunk_chars": 4}
# 60 s at this scale is 30 s real: far longer than any of these tests may take.
HELD = scenario({"reply": REPLY, "fault": {"delay_headers": {"seconds": 60}}}, {"reply": REPLY})
SCALE = 0.5
CLIENT_WAIT_S = 0.05  # the client's own request timeout, real seconds


def _client(gw, timeout: float) -> httpx.Client:
    verify = ssl.create_default_context(cafile=gw.ca_file) if gw.ca_file else True
    return httpx.Client(timeout=timeout, verify=verify)


def test_a_client_leaving_during_delayed_headers_ends_the_attempt_when_it_left(gateway_session, gw):
    s = gateway_session(HELD, time_scale=SCALE)
    with _client(gw, CLIENT_WAIT_S) as impatient:
        got = post(impatient, s.base_url)
    assert isinstance(got.error, httpx.TimeoutException), got
    j = s.wait_for(lambda j: j["entries"][0]["response"]["t_end_ns"] is not None, timeout=3)
    (e,) = j["entries"]
    r = e["response"]
    assert r["end"] == "client_gone"
    # Nothing was written: no status, no headers, no bytes (a failure before headers).
    assert r["status"] is None and r["t_headers_ns"] is None and r["sent_bytes"] == 0
    held_s = (r["t_end_ns"] - e["t_arrival_ns"]) / 1e9
    # Ended when the client left (its 50 ms), not after the 30 s delay.
    assert CLIENT_WAIT_S * 0.5 <= held_s < 5, held_s
    # The next request is served at once, by the next step.
    with _client(gw, 5) as patient:
        assert post(patient, s.base_url).body == full_stream(REPLY)


def test_held_headers_have_no_status_until_they_are_written(gateway_session, gw):
    s = gateway_session(HELD, time_scale=0.004)  # 240 ms held
    got: list = []
    with _client(gw, 5) as patient:
        t = threading.Thread(target=lambda: got.append(post(patient, s.base_url)))
        t.start()
        # The entry is journaled as the request arrives, its response record a moment later.
        held = s.wait_for(
            lambda j: len(j["entries"]) == 1 and j["entries"][0]["response"] is not None,
            timeout=3,
        )["entries"][0]["response"]
        t.join(5)
        # A second request, on the connection the client keeps: it still serves after a hold.
        again = post(patient, s.base_url)
    assert held["status"] is None and held["t_headers_ns"] is None and held["t_end_ns"] is None
    assert got[0].status == 200 and got[0].body == full_stream(REPLY)
    assert again.status == 200 and again.body == full_stream(REPLY)
    first, second = s.journal()["entries"]
    r = first["response"]
    assert r["status"] == 200 and r["end"] == "complete"
    assert r["t_headers_ns"] - first["t_arrival_ns"] >= 240e6 * 0.9
    assert second["response"]["end"] == "complete"
