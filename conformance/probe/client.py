"""The HTTP side of the probe: send the requests in order, within a budget and a rate.

Nothing is retried and nothing is judged here: each answer is kept as an :class:`Exchange`
(status, headers, the raw body chunks, how the body ended). Only the two answers that make the
rest pointless stop the probe, and only on its first request: the gateway unreachable, or the
key refused. Requests go to the dialect's endpoint (``wire``) with the extra headers and query
parameters given; their values, like the key, are secrets (``secrets``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from conformance.probe.exchange import Exchange, ProbeError
from conformance.probe.probes import PROBES, ProbeRequest
from conformance.probe.redact import safe_url, scrub
from conformance.probe.wire import request_url, wire_for

__all__ = ["Probe"]


class Probe:
    """Sends the probe requests within a budget and a rate; clock and sleep are injectable."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dialect: str = "openai_chat",
        headers: Mapping[str, str] | None = None,
        query: Sequence[tuple[str, str]] = (),
        max_requests: int = len(PROBES),
        rate: float = 1.0,
        timeout: float = 60.0,
        max_tokens: int = 256,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        verify: Any = True,
    ) -> None:
        if max_requests < 0:
            raise ProbeError(f"--max-requests must be >= 0, got {max_requests}")
        if not rate > 0:
            raise ProbeError(f"--rate must be > 0 requests per second, got {rate}")
        self.wire = wire_for(dialect)
        self.url = request_url(base_url, self.wire.path, query)
        self.model, self.api_key = model, api_key
        self.extra_headers = dict(headers or {})
        # Everything that may be a credential: masked wherever it would be written or printed.
        self.secrets = [api_key or "", *self.extra_headers.values(), *(v for _, v in query)]
        self.max_requests, self.min_gap = max_requests, 1.0 / rate
        self.max_tokens = max_tokens
        self.clock, self.sleep = clock, sleep
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=transport,
            verify=verify,
        )
        self.sent_at: list[float] = []
        self.exchanges: list[Exchange] = []  # what was seen, even when the probe stops early

    def run(self, probes: Sequence[ProbeRequest] = PROBES) -> list[Exchange]:
        out: list[Exchange] = []
        self.exchanges = out
        try:
            todo = [p for p in probes if p.name not in self.wire.skip]
            for req in todo[: self.max_requests]:
                ex = self.send(req)
                out.append(ex)
                if ex.end == "unreachable" and len(out) == 1:
                    raise ProbeError(f"gateway unreachable at {safe_url(self.url)}: {ex.error}")
                if ex.status in (401, 403) and len(out) == 1:
                    raise ProbeError(
                        f"gateway refused the key ({ex.status}) at {safe_url(self.url)}: "
                        f"{scrub(ex.body.decode('utf-8', 'replace')[:300], self.secrets)}"
                    )
        finally:
            self.client.close()
        return out

    def _pace(self) -> None:
        """Never start two requests closer than ``1 / rate`` seconds."""
        if self.sent_at:
            wait = self.sent_at[-1] + self.min_gap - self.clock()
            if wait > 0:
                self.sleep(wait)
        self.sent_at.append(self.clock())

    def send(self, req: ProbeRequest) -> Exchange:
        body = self.wire.body(req, self.model, self.max_tokens)
        ex = Exchange(req.name, req.stream, body)
        headers = httpx.Headers({"Accept-Encoding": "identity"})  # raw bytes are the wire bytes
        headers.update(self.wire.headers(self.api_key))
        if req.stream:
            headers["Accept"] = "text/event-stream"
        headers.update(self.extra_headers)  # given on the command line: they win, by any case
        self._pace()
        t0 = time.monotonic()
        try:
            with self.client.stream("POST", self.url, json=body, headers=headers) as resp:
                ex.status = resp.status_code
                ex.headers = {k.lower(): v for k, v in resp.headers.items()}
                try:
                    for chunk in resp.iter_raw():
                        ex.chunks.append(chunk)
                except httpx.RemoteProtocolError as e:
                    ex.end, ex.error = "incomplete", f"{type(e).__name__}: {e}"
                except httpx.ReadTimeout as e:
                    ex.end, ex.error = "timeout", f"{type(e).__name__}: {e}"
                except httpx.TransportError as e:
                    ex.end, ex.error = "reset", f"{type(e).__name__}: {e}"
        except httpx.ConnectError as e:
            ex.end, ex.error = "unreachable", f"{type(e).__name__}: {e}"
        except httpx.TimeoutException as e:
            ex.end, ex.error = "timeout", f"{type(e).__name__}: {e}"
        except httpx.TransportError as e:
            ex.end, ex.error = "reset", f"{type(e).__name__}: {e}"
        ex.elapsed_ms = round((time.monotonic() - t0) * 1000, 1)
        return ex
