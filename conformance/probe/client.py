"""The HTTP side of the probe: send the requests in order, within a budget and a rate.

Nothing is retried and nothing is judged here: each answer is kept as an :class:`Exchange`
(status, headers, the raw body chunks, how the body ended). Only the two answers that make the
rest pointless stop the probe, and only on its first request: the gateway unreachable, or the
key refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from conformance.probe.exchange import Exchange, ProbeError
from conformance.probe.probes import PROBES, ProbeRequest
from conformance.probe.redact import safe_url, scrub

__all__ = ["Probe"]


class Probe:
    """Sends the probe requests within a budget and a rate; clock and sleep are injectable."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
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
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
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
            for req in probes[: self.max_requests]:
                ex = self.send(req)
                out.append(ex)
                if ex.end == "unreachable" and len(out) == 1:
                    raise ProbeError(f"gateway unreachable at {safe_url(self.url)}: {ex.error}")
                if ex.status in (401, 403) and len(out) == 1:
                    raise ProbeError(
                        f"gateway refused the key ({ex.status}) at {safe_url(self.url)}: "
                        f"{scrub(ex.body.decode('utf-8', 'replace')[:300], self.api_key)}"
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
        body = req.body(self.model, self.max_tokens)
        ex = Exchange(req.name, req.stream, body)
        headers = {"Accept-Encoding": "identity"}  # raw bytes are the wire bytes
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if req.stream:
            headers["Accept"] = "text/event-stream"
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
