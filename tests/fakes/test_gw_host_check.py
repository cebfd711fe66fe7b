"""Host and Origin validation (``fakes.loopback``): every endpoint of every listener refuses a
request that names a foreign host, over HTTP and HTTPS, and serves the loopback names.

A DNS-rebinding page sends the attacker's name in ``Host`` and its origin in ``Origin``; the
gateway must answer neither (403, the header and value named), and must answer the harness's
own clients, which name 127.0.0.1, localhost or [::1] with any port.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from gw_wire import scenario
from mcp import Client

from fakes import Gateway, SyncGateway
from fakes.loopback import HostCheck

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
SCENARIO = scenario(
    {"reply": {"text": "x"}},
    otherwise={"reply": {"text": "x"}},
    tools=[{"name": "w", "description": "the w tool"}],
    tool_host={"w": [{"output": "ok"}]},
)
FOREIGN = ("evil.example.com", "evil.example.com:8080", "127.0.0.1.evil.example", "[::2]:80")


@dataclass
class Served:
    gw: SyncGateway
    sid: str  # the session served at the root too
    refusing: str  # a session on a port of its own (refuse_connections, already listening)


@pytest.fixture(scope="module", params=["http", "https"])
def served(request: Any) -> Iterator[Served]:
    with Gateway.running(tls=request.param == "https") as gw:
        s = gw.create_session(SCENARIO)
        gw.serve_at_root(s.id)
        r = gw.create_session({**SCENARIO, "refuse_connections": {"seconds": 1}}, 0.001)
        yield Served(gw, s.id, r.base_url.removesuffix("/v1"))


def _client(gw: SyncGateway) -> httpx.Client:
    ca = gw.ca_file
    return httpx.Client(timeout=5, verify=ssl.create_default_context(cafile=ca) if ca else True)


def endpoints(sv: Served) -> list[tuple[str, str, Any]]:
    """(method, URL, JSON body) of every endpoint kind, on every listener."""
    base, s = sv.gw.base_url, f"{sv.gw.base_url}/s/{sv.sid}"
    return [
        ("GET", f"{base}/", None),
        ("GET", f"{base}/nowhere", None),
        ("POST", f"{base}/_control/sessions", SCENARIO),
        ("GET", f"{base}/_control/sessions/{sv.sid}/journal", None),
        ("GET", f"{base}/_control/calibrate?seconds=0.01", None),
        ("POST", f"{s}/v1/chat/completions", CHAT),
        ("POST", f"{s}/v1/messages", MESSAGES),
        ("POST", f"{s}/v1/messages/count_tokens", MESSAGES),
        ("POST", f"{s}/v1/responses", {"model": "m", "input": "hi"}),
        ("GET", f"{s}/v1/models", None),
        ("POST", f"{s}/tools/w", {"call_id": "c", "arguments": {}}),
        ("POST", f"{s}/mcp", INITIALIZE),
        ("POST", f"{base}/v1/chat/completions", CHAT),
        ("POST", f"{base}/v1/messages", MESSAGES),
        ("POST", f"{base}/v1/responses", {"model": "m", "input": "hi"}),
        ("GET", f"{base}/v1/models", None),
        ("POST", f"{sv.refusing}/v1/chat/completions", CHAT),
        ("POST", f"{sv.refusing}/mcp", INITIALIZE),
    ]


def _send(c: httpx.Client, method: str, url: str, body: Any, **headers: str) -> httpx.Response:
    return c.request(method, url, json=body, headers=headers)


def _message(r: httpx.Response) -> str:
    body = r.json()
    return str(body["error"]["message"])


def test_a_foreign_host_is_refused_on_every_endpoint(served):
    with _client(served.gw) as c:
        for method, url, body in endpoints(served):
            for host in FOREIGN:
                r = _send(c, method, url, body, Host=host)
                assert r.status_code == 403, (method, url, host, r.status_code, r.text)
                assert f"forbidden Host header {host!r}" in _message(r), (url, r.text)
                assert "--allow-host" in _message(r)


def test_a_foreign_origin_is_refused_on_every_endpoint(served):
    with _client(served.gw) as c:
        for method, url, body in endpoints(served):
            for origin in ("http://evil.example.com", "https://localhost.evil.example", "null"):
                r = _send(c, method, url, body, Origin=origin)
                assert r.status_code == 403, (method, url, origin, r.status_code, r.text)
                assert f"forbidden Origin header {origin!r}" in _message(r), (url, r.text)


def test_loopback_names_are_served_on_every_endpoint(served):
    """The same answer with any loopback Host and Origin as with the client's own headers."""
    with _client(served.gw) as c:
        for method, url, body in endpoints(served):
            port = urlsplit(url).port
            usual = _send(c, method, url, body).status_code
            assert usual != 403, (url, usual)
            for host, origin in (
                (f"localhost:{port}", "http://localhost:3000"),
                (f"127.0.0.1:{port}", f"https://127.0.0.1:{port}"),
                (f"[::1]:{port}", "http://[::1]"),
                ("LOCALHOST", "http://127.0.0.2:9"),
                (f"127.0.0.1:{port}", None),
            ):
                headers = {"Host": host, **({"Origin": origin} if origin else {})}
                r = _send(c, method, url, body, **headers)
                assert r.status_code == usual, (method, url, headers, r.status_code, r.text)


def test_a_refused_request_never_reaches_its_session(served):
    gw = served.gw
    with _client(gw) as c:
        before = _send(c, "GET", f"{gw.base_url}/_control/sessions/{served.sid}/journal", None)
        n = len(before.json()["entries"])
        r = _send(c, "POST", f"{gw.base_url}/s/{served.sid}/tools/w", {}, Host="evil.example")
        assert r.status_code == 403
        after = _send(c, "GET", f"{gw.base_url}/_control/sessions/{served.sid}/journal", None)
        assert len(after.json()["entries"]) == n


def test_each_endpoint_refuses_in_its_own_error_shape(served):
    base = f"{served.gw.base_url}/s/{served.sid}"
    with _client(served.gw) as c:
        mcp = _send(c, "POST", f"{base}/mcp", INITIALIZE, Host="evil.example").json()
        assert mcp["jsonrpc"] == "2.0" and mcp["error"]["code"] == -32000
        anthropic = _send(c, "POST", f"{base}/v1/messages", MESSAGES, Origin="http://x.example")
        assert anthropic.json()["type"] == "error"
        assert anthropic.json()["error"]["type"] == "permission_error"
        chat = _send(c, "POST", f"{base}/v1/chat/completions", CHAT, Host="evil.example")
        assert chat.json()["error"]["type"] == "forbidden_host"


def test_the_openai_sdk_reads_the_refusal_as_permission_denied(fake_gateway):
    s = fake_gateway.create_session(SCENARIO)
    try:
        client = openai.OpenAI(
            base_url=s.base_url,
            api_key="sk-t",
            max_retries=0,
            timeout=5,
            default_headers={"Host": "rebound.example"},
        )
        with pytest.raises(openai.PermissionDeniedError, match="forbidden Host header"):
            client.chat.completions.create(model="m", messages=CHAT["messages"])  # type: ignore[arg-type]
        assert s.journal()["entries"] == []
    finally:
        fake_gateway.drop_session(s.id)


def test_the_official_mcp_client_is_served(fake_gateway):
    """The harness's own MCP client (the reference agent's) names 127.0.0.1: it is served."""
    import asyncio

    s = fake_gateway.create_session(SCENARIO)

    async def go() -> str:
        async with Client(s.mcp_endpoint) as cl:
            result = await cl.call_tool("w", {})
            return str(result.content[0].text)  # type: ignore[union-attr]

    try:
        assert asyncio.run(go()) == "ok"
    finally:
        fake_gateway.drop_session(s.id)


def test_allowed_hosts_and_the_bound_address_are_served():
    with (
        Gateway.running(allowed_hosts=["gw.internal", "[fd00::1]"]) as gw,
        httpx.Client(timeout=5) as c,
    ):
        s = gw.create_session(SCENARIO)
        url = f"{s.base_url}/chat/completions"
        for host in ("gw.internal:8080", "GW.INTERNAL", "[fd00::1]:80"):
            assert c.post(url, json=CHAT, headers={"Host": host}).status_code == 200, host
        assert c.post(url, json=CHAT, headers={"Origin": "http://gw.internal"}).status_code == 200
        r = c.post(url, json=CHAT, headers={"Host": "other.internal"})
        assert r.status_code == 403
        assert "or fd00::1, gw.internal" in r.json()["error"]["message"]
    with Gateway.running(allowed_hosts=["*"]) as gw, httpx.Client(timeout=5) as c:
        s = gw.create_session(SCENARIO)
        r = c.post(f"{s.base_url}/chat/completions", json=CHAT, headers={"Host": "any.example"})
        assert r.status_code == 200


@pytest.mark.parametrize(
    ("host", "origin", "refused"),
    [
        ("localhost", None, None),
        ("localhost.:80", None, None),
        ("127.9.9.9:1", None, None),  # all of 127.0.0.0/8 is loopback
        ("[::1]", "http://[::1]:8080", None),
        (None, None, None),  # HTTP/1.0, no Host: not a browser
        ("::1", None, "Host"),  # an IPv6 address needs its brackets in Host
        ("[::1", None, "Host"),
        ("localhost:port", None, "Host"),
        ("", None, "Host"),
        ("localhost", "", "Origin"),
        ("localhost", "localhost", "Origin"),  # not an origin: no scheme
        ("localhost", "http://localhost:99999", "Origin"),
        ("localhost", "http://user@evil.example", "Origin"),
        ("10.0.0.5", None, None),  # the bound address below
    ],
)
def test_header_parsing(host, origin, refused):
    bad = HostCheck(bind_host="10.0.0.5").problem(host, origin)
    assert (bad[0] if bad else None) == refused, bad


def test_a_wildcard_bind_allows_no_host_of_its_own():
    assert HostCheck(bind_host="0.0.0.0").problem("0.0.0.0:80", None) == ("Host", "0.0.0.0:80")
    assert HostCheck(bind_host="::").problem("evil.example", None) == ("Host", "evil.example")
