"""Bad requests get clear 4xx replies and are journaled; other sessions keep working."""

from __future__ import annotations

import json
import socket
import ssl
from urllib.parse import urlsplit

import httpx
import pytest
from gw_wire import full_stream, post, scenario

from fakes.server import MAX_BODY_BYTES

REPLY = {"text": "x" * 400, "chunk_chars": 10}


def _raw_post(client, url: str, content: bytes):
    return client.post(url, content=content, headers={"content-type": "application/json"})


def test_invalid_json_is_400_and_journaled(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    r = _raw_post(client, s.base_url + "/chat/completions", b"{not json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    (e,) = s.journal()["entries"]
    assert e["body"] is None and e["body_error"].startswith("invalid JSON")
    assert e["response"]["status"] == 400 and e["step"] is None


def test_wrong_types_are_400(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    for body, word in [
        ([], "JSON object"),
        ({"messages": "x"}, "messages"),
        ({"messages": [], "stream": "yes"}, "stream"),
        ({"messages": [], "model": 3}, "model"),
    ]:
        r = client.post(s.base_url + "/chat/completions", json=body)
        assert r.status_code == 400 and word in r.json()["error"]["message"]
    assert post(client, s.base_url).status == 200  # the step was not consumed by bad requests


def test_huge_body_is_413(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    r = _raw_post(client, s.base_url + "/chat/completions", b" " * (MAX_BODY_BYTES + 1))
    assert r.status_code == 413 and str(MAX_BODY_BYTES) in r.json()["error"]["message"]
    assert s.journal()["entries"][0]["body_error"]


def test_unknown_session_and_endpoint(gateway_session, gw, client):
    r = client.post(gw.base_url + "/s/nope/v1/chat/completions", json={"messages": []})
    assert r.status_code == 404 and "unknown session" in r.json()["error"]["message"]
    s = gateway_session(scenario({"reply": REPLY}))
    r = client.get(s.base_url + "/embeddings")
    assert r.status_code == 404
    assert s.journal()["entries"][0]["kind"] == "unknown"


def test_client_vanishing_mid_stream_is_journaled_and_server_keeps_serving(
    gateway_session, client, gw
):
    s = gateway_session(
        scenario({"reply": REPLY, "fault": {"stall": {"after_events": 1, "seconds": 20}}}),
        time_scale=0.005,
    )
    other = gateway_session(scenario({"reply": REPLY}))
    u = urlsplit(s.base_url)
    body = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
    raw = socket.create_connection((u.hostname, u.port))
    if gw.ca_file:
        raw = ssl.create_default_context(cafile=gw.ca_file).wrap_socket(
            raw, server_hostname=u.hostname
        )
    with raw as sock:
        sock.sendall(
            b"POST "
            + u.path.encode()
            + b"/chat/completions HTTP/1.1\r\nHost: "
            + u.netloc.encode()
            + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        sock.recv(100)  # headers have started; vanish now
    j = s.wait_for(lambda j: j["entries"][0]["response"]["t_end_ns"] is not None, timeout=3)
    assert j["entries"][0]["response"]["end"] == "client_gone"
    assert post(client, other.base_url).body == full_stream(REPLY)


def test_authorization_redacted_everywhere(gateway_session, gw, client):
    s = gateway_session(scenario({"reply": REPLY}))
    client.post(
        s.base_url + "/chat/completions",
        json={"messages": []},
        headers={"Authorization": "Bearer sk-SECRET", "x-api-key": "sk-SECRET2"},
    )
    j = s.journal()
    http_j = client.get(f"{gw.base_url}/_control/sessions/{s.id}/journal").text
    for text in (json.dumps(j), http_j):
        assert "sk-SECRET" not in text
    h = j["entries"][0]["headers"]
    assert h["authorization"] == "[REDACTED]" and h["x-api-key"] == "[REDACTED]"


def test_control_api_create_journal_drop(gw, client, tmp_path):
    base = gw.base_url + "/_control/sessions"
    r = client.post(base, json={**scenario({"reply": {"text": "hi"}}), "time_scale": 0.01})
    info = r.json()
    assert r.status_code == 200 and info["base_url"].endswith(f"/s/{info['session']}/v1")
    assert post(client, info["base_url"]).status == 200
    j = client.get(f"{base}/{info['session']}/journal").json()
    assert j["time_scale"] == 0.01 and len(j["entries"]) == 1
    p = tmp_path / "fromfile.yaml"
    p.write_text("id: fromfile\ncriteria: [STR-01]\nprompt: p\nscript: [{reply: {text: a}}]\n")
    assert client.post(base, json={"path": str(p)}).status_code == 200
    bad = client.post(base, json={"id": "x", "criteria": [], "prompt": "p", "script": []})
    assert bad.status_code == 400 and "script" in bad.json()["error"]["message"]
    assert client.delete(f"{base}/{info['session']}").status_code == 200
    assert client.get(f"{base}/{info['session']}/journal").status_code == 404


def test_tool_host_behaviours_in_order_last_repeats(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": REPLY},
            tool_host={
                "w": [
                    {"output": "ok"},
                    {"error": {"message": "disk full"}},
                    {"permission_denied": {"reason": "ro"}},
                    {"transient": {"message": "busy"}},
                    {"hang": 10},
                    {"large_output": {"bytes": 1000}},
                ]
            },
        ),
        time_scale=0.001,
    )
    url = s.tool_endpoint + "/w"
    got = [client.post(url, json={"call_id": "c", "arguments": {}}) for _ in range(7)]
    assert got[0].json() == {"output": "ok"}
    assert got[1].json() == {"error": {"type": "execution_error", "message": "disk full"}}
    assert got[2].json()["error"] == {"type": "permission_denied", "message": "ro"}
    assert got[3].status_code == 503 and got[3].json()["error"]["type"] == "transient"
    assert got[4].status_code == 504 and got[4].json()["error"]["type"] == "timeout"
    for r in got[5:]:
        out = r.json()["output"]
        assert len(out) == 1000 and out.startswith("line 00001 ")
    behaviours = [e["behaviour"] for e in s.journal()["entries"]]
    assert behaviours[-2:] == ["large_output", "large_output"]
    assert client.post(s.tool_endpoint + "/nope", json={}).status_code == 500


def test_a_client_hanging_up_on_a_hung_tool_is_journaled_when_it_left(gateway_session, gw):
    # An agent stops a tool at its limit by hanging up: the journal keeps that moment (TOL-04
    # reads it as the stop), not the end of the hang, which no one is waiting for any more.
    s = gateway_session(scenario({"reply": REPLY}, tool_host={"w": [{"hang": 600}]}))
    verify = ssl.create_default_context(cafile=gw.ca_file) if gw.ca_file else True
    with httpx.Client(timeout=0.2, verify=verify) as c, pytest.raises(httpx.ReadTimeout):
        c.post(s.tool_endpoint + "/w", json={"call_id": "c", "arguments": {}})
    j = s.wait_for(lambda j: j["entries"][0]["response"] is not None, timeout=5)
    e = j["entries"][0]
    assert e["behaviour"] == "hang"
    r = e["response"]
    assert (r["status"], r["end"], r["sent_bytes"]) == (None, "client_gone", 0)
    assert 0.15 < (r["t_end_ns"] - e["t_arrival_ns"]) / 1e9 < 5  # its timeout, not the 600 s


def test_stop_does_not_wait_for_a_held_request():
    """A request held by a long delay_headers does not keep the gateway from stopping."""
    import threading
    import time

    import httpx

    from fakes import Gateway

    gw = Gateway.running()
    sync = gw.__enter__()
    s = sync.create_session(
        scenario({"reply": REPLY, "fault": {"delay_headers": {"seconds": 600}}}), time_scale=1.0
    )
    outcome: list[object] = []

    def client() -> None:
        try:
            httpx.post(s.base_url + "/chat/completions", json={"messages": []}, timeout=30)
        except httpx.HTTPError as exc:
            outcome.append(exc)

    t = threading.Thread(target=client, daemon=True)
    t.start()
    s.wait_for(lambda j: len(j["entries"]) == 1, timeout=10)
    t0 = time.monotonic()
    gw.__exit__(None, None, None)
    # Far below the 600 s hold and aiohttp's 60 s default grace; generous for a loaded machine.
    assert time.monotonic() - t0 < 10
    t.join(timeout=10)
    assert not t.is_alive() and outcome, "the held client was released with an error"
