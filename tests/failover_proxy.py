"""A tiny gateway-under-test for the failover probe's own tests, with switchable bugs.

It reads the config the probe writes (``conformance.probe.failover_config.proxy_config``),
serves ``POST /v1/chat/completions`` on 127.0.0.1:0 and routes by the request's model to the
case's primary, then its secondary. Healthy, it buffers each upstream reply whole and passes
it on only when it is whole (a finish reason, every chunk JSON, no error event, the body ended
properly); anything else is a failed attempt: retried up to ``retries`` times (a status only
when in ``retry_on``, after the 429's ``Retry-After``), then failed over (a status only when in
``fallback_on``); a status in neither is passed on as it came. Times (the attempt timeout,
Retry-After) are scaled by ``time_scale``, as the fake upstreams' are.

Bugs, each switchable: ``retry_400`` (400 is retried), ``swallow_cut`` (a stream cut mid-body
is passed on as far as it got, then given a finish reason and ``[DONE]``), ``ignore_retry_after``
(retries at once), ``never_fallback`` (the secondary is never tried).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from conformance.probe.failover import GatewayRequest
from conformance.probe.failover_cases import Policy
from conformance.probe.failover_config import Route, proxy_config

BUGS = ("retry_400", "swallow_cut", "ignore_retry_after", "never_fallback")


@dataclass
class Attempt:
    status: int | None
    headers: dict[str, str]
    body: bytes
    ok: bool
    cut: bool = False  # the body broke off after headers


def _whole(body: bytes) -> bool:
    finish = False
    for block in body.decode("utf-8", "replace").split("\n\n"):
        data = "".join(ln[5:].strip() for ln in block.splitlines() if ln.startswith("data:"))
        if not data or data == "[DONE]":
            continue
        try:
            j = json.loads(data)
        except ValueError:
            return False
        if not isinstance(j, dict) or "error" in j:
            return False
        finish = finish or any(c.get("finish_reason") for c in j.get("choices") or [])
    return finish


class Proxy:
    def __init__(self, config: str, bugs: set[str], time_scale: float) -> None:
        cfg = json.loads(config)
        self.policy, self.routes = cfg["policy"], cfg["routes"]
        self.bugs, self.scale = bugs, time_scale
        self.client = httpx.Client(timeout=httpx.Timeout(self.policy["timeout_s"] * time_scale))

    def attempt(self, url: str, body: bytes, headers: dict[str, str]) -> Attempt:
        try:
            with self.client.stream(
                "POST", url + "/chat/completions", content=body, headers=headers
            ) as r:
                got: list[bytes] = []
                hdrs = {k.lower(): v for k, v in r.headers.items()}
                try:
                    for chunk in r.iter_raw():
                        got.append(chunk)
                except httpx.HTTPError:
                    return Attempt(r.status_code, hdrs, b"".join(got), False, cut=True)
                data = b"".join(got)
                ok = r.status_code == 200 and _whole(data)
                return Attempt(r.status_code, hdrs, data, ok)
        except httpx.HTTPError:
            return Attempt(None, {}, b"", False)

    def serve(self, model: str, body: bytes, headers: dict[str, str]) -> Attempt:
        pol = self.policy
        retry_on = set(pol["retry_on"]) | ({400} if "retry_400" in self.bugs else set())
        ups = self.routes[model][:1] if "never_fallback" in self.bugs else self.routes[model]
        last = Attempt(None, {}, b"", False)
        for url in ups:
            for n in range(pol["retries"] + 1):
                a = last = self.attempt(url, body, headers)
                if a.ok:
                    return a
                if a.cut and a.status == 200 and "swallow_cut" in self.bugs:
                    fin = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                    tail = f"data: {json.dumps(fin)}\n\ndata: [DONE]\n\n".encode()
                    return Attempt(200, a.headers, a.body + tail, True)
                if a.status not in (None, 200) and a.status not in retry_on:
                    break  # not retryable: no further attempt here
                ra = a.headers.get("retry-after")
                honour = pol["honour_retry_after"] and "ignore_retry_after" not in self.bugs
                if ra and honour and n < pol["retries"]:
                    time.sleep(float(ra) * self.scale)  # Retry-After, on the scaled clock
            if last.status not in (None, 200) and last.status not in pol["fallback_on"]:
                return last  # passed on as it came
        if last.status not in (None, 200):
            return last
        return Attempt(502, {}, b'{"error": {"message": "no upstream answered whole"}}', False)


def _handler(proxy: Proxy) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            model = json.loads(body)["model"]
            fwd = {"content-type": "application/json", "authorization": "Bearer upstream"}
            a = proxy.serve(model, body, fwd)
            out = a.body
            if a.status != 200 and not out:
                out = b'{"error": {"message": "upstream failed", "type": "proxy_error"}}'
            self.send_response(a.status or 502)
            ctype = a.headers.get("content-type", "application/json")
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    return H


@dataclass
class ProxyTarget:
    """The proxy as a failover probe :class:`~conformance.probe.failover.Target`."""

    bugs: set[str] = field(default_factory=set)
    time_scale: float = 1.0
    name: str = "test-proxy"
    version: str = "0"
    key: str | None = "sk-failover-test-proxy-key"
    secrets: list[str] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    config: str = ""
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self, routes: dict[str, Route]) -> str:
        self.config = proxy_config(self.policy, routes)
        self._proxy = Proxy(self.config, self.bugs, self.time_scale)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self._proxy))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.config

    def request(self, case_id: str) -> GatewayRequest:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return GatewayRequest(f"http://{host!s}:{port}/v1", case_id)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._proxy.client.close()
            self._server = None


def serve_forever(config: str, port: int, bugs: set[str], time_scale: float) -> None:
    """Run the proxy in this process until it is terminated (``__main__``)."""
    proxy = Proxy(config, bugs, time_scale)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(proxy))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    finally:
        server.server_close()


@contextmanager
def proxy_target(**kw: Any) -> Iterator[ProxyTarget]:
    t = ProxyTarget(**kw)
    try:
        yield t
    finally:
        t.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="the failover probe's test proxy")
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--bug", action="append", default=[], choices=BUGS)
    a = ap.parse_args()
    serve_forever(a.config.read_text("utf-8"), a.port, set(a.bug), a.time_scale)
