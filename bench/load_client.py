"""The load client and the bare baseline of the gateway benchmarks, each run as its own process
(as a user runs a load tool against a server). Not a test.

    python bench/load_client.py bare
        serve the baseline, a bare aiohttp handler writing the benchmark's SSE one awaited event
        at a time; prints ``url: http://127.0.0.1:PORT/v1``
    python bench/load_client.py stream URL --concurrency C (--requests N | --seconds S)
        stream chat requests to URL, C at a time; prints one JSON line of totals (with
        --seconds, a progress line every --every seconds before it); --verify checks every body
        against the benchmark's rendering byte for byte
    python bench/load_client.py fidelity STALL_URL RETRY_URL
        the gap a client sees across a 200 ms stall (and the stall as the gateway's journal
        stamps it), and the gap the journal records between a 429 with ``Retry-After: 1`` and a
        retry sent 1 s after it, against the client's own

The streaming load goes through aiohttp's client. The fidelity timing does not: it speaks
HTTP/1.1 through h11 over plain asyncio streams (one keep-alive connection, opened before any timed point;
requests built beforehand) and stamps ``time.monotonic_ns()`` as ``reader.read`` returns the
bytes of interest and right before ``writer.write`` of the retry, which it sends at the due time
(a sleep to 2 ms short of it, then a spin). A client library's parsing, buffering, request
building and pool would otherwise land in the figures, which are meant to be the gateway's error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fakes.dialects import openai_chat as oc  # noqa: E402

# One 503-event stream per request: role, 500 text pieces of 4 characters, finish, [DONE].
REPLY = {"text": "x" * 2000, "chunk_chars": 4, "finish_reason": "stop"}
MODEL = "m"
BODY = json.dumps(
    {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "bench"}]}
).encode()
FRAMES = [oc.frame(*e) for e in oc.stream_events(REPLY, MODEL)]
SSE = b"".join(FRAMES)
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}


async def _bare() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for f in FRAMES:
            await resp.write(f)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"url: http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


@dataclass
class Totals:
    requests: int = 0
    events: int = 0
    bytes: int = 0
    reads: int = 0
    seconds: float = 0.0


async def _one(http: ClientSession, url: str, t: Totals, verify: bool) -> None:
    parts: list[bytes] = []
    async with http.post(url, data=BODY, headers=HEADERS) as r:
        if r.status != 200:
            raise SystemExit(f"{url}: status {r.status}")
        async for chunk in r.content.iter_any():
            parts.append(chunk)
    data = b"".join(parts)
    if verify and data != SSE:
        raise SystemExit(f"{url}: the body is not the benchmark's rendering")
    if not data.endswith(b"data: [DONE]\n\n"):
        raise SystemExit(f"{url}: the stream did not end with [DONE]")
    t.requests += 1
    t.events += data.count(b"\n\n")
    t.bytes += len(data)
    t.reads += len(parts)


async def _stream(args: argparse.Namespace) -> None:
    url = args.url + "/chat/completions"
    t = Totals()
    timeout = ClientTimeout(total=60)
    async with ClientSession(connector=TCPConnector(limit=args.concurrency), timeout=timeout) as h:
        warm = Totals()
        await asyncio.gather(*(_one(h, url, warm, args.verify) for _ in range(args.concurrency)))
        t0 = time.perf_counter()
        end = t0 + args.seconds if args.seconds else None
        left = args.requests

        async def worker() -> None:
            nonlocal left
            while True:
                if end is not None:
                    if time.perf_counter() >= end:
                        return
                elif left <= 0:
                    return
                else:
                    left -= 1
                await _one(h, url, t, args.verify)

        async def progress() -> None:
            while True:
                await asyncio.sleep(args.every)
                line = {"t": round(time.perf_counter() - t0, 1), "requests": t.requests}
                print(json.dumps(line), flush=True)

        ticker = asyncio.create_task(progress()) if end is not None else None
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        t.seconds = time.perf_counter() - t0
        if ticker is not None:
            ticker.cancel()
    print(json.dumps({"totals": asdict(t)}), flush=True)


class _Raw:
    """One keep-alive HTTP/1.1 connection on plain asyncio streams, parsed by h11: every event
    comes with the moment the ``reader.read`` that completed it returned (see the docstring)."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        assert u.hostname is not None and u.port is not None, url
        self.host, self.port = u.hostname, u.port
        self.path = u.path + "/chat/completions"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.h = h11.Connection(h11.CLIENT)
        self.t = -1  # stamp of the last read

    async def prepare(self) -> bytes:
        """The bytes of the next request, rendered beforehand on a connection opened beforehand
        (a connection the gateway closed is reopened here, never at a timed point)."""
        if self.h.our_state is h11.DONE and self.h.their_state is h11.DONE:
            self.h.start_next_cycle()
        if self.writer is None or self.h.our_state is not h11.IDLE:
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.h = h11.Connection(h11.CLIENT)
        headers = [("Host", f"{self.host}:{self.port}"), ("Content-Length", str(len(BODY)))]
        headers += list(HEADERS.items())
        req = h11.Request(method="POST", target=self.path, headers=headers)
        return b"".join(
            self.h.send(e) or b"" for e in (req, h11.Data(data=BODY), h11.EndOfMessage())
        )

    def send(self, data: bytes) -> None:
        assert self.writer is not None
        self.writer.write(data)

    async def response(self) -> AsyncIterator[tuple[int, Any]]:
        """The events of one response (``h11.Response``, ``h11.Data``, ``h11.EndOfMessage``),
        each with its read's stamp."""
        assert self.reader is not None
        while True:
            ev = self.h.next_event()
            if ev is h11.NEED_DATA:
                data = await self.reader.read(65536)
                self.t = time.monotonic_ns()
                self.h.receive_data(data)  # b"" is the end: h11 raises if that is mid-response
                continue
            yield self.t, ev
            if isinstance(ev, h11.EndOfMessage):
                return

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


def _spin_until(due_ns: int) -> int:
    """Busy-wait to ``due_ns``; the moment it returns."""
    while (now := time.monotonic_ns()) < due_ns:
        pass
    return now


async def _fidelity(args: argparse.Namespace) -> None:
    stall: list[float] = []
    conn = _Raw(args.stall_url)
    for _ in range(args.n):
        conn.send(await conn.prepare())
        seen, t_two, gap = b"", None, None
        async for t, ev in conn.response():
            if isinstance(ev, h11.Response) and ev.status_code != 200:
                raise SystemExit(f"{args.stall_url}: status {ev.status_code}")
            if not isinstance(ev, h11.Data) or gap is not None:
                continue  # read the rest, so that the connection can serve the next one
            seen += ev.data
            events = seen.count(b"\n\n")
            if t_two is None and events >= 2:
                t_two = t
                if events > 2:  # the third event came with the second: no stall at all
                    gap = -200.0
            elif t_two is not None and events > 2:
                gap = (t - t_two) / 1e6 - 200
        if gap is None:
            raise SystemExit(f"{args.stall_url}: the stream ended before its third event")
        stall.append(gap)
    await conn.close()
    sent: list[tuple[int, int]] = []  # (429's headers read, retry written), monotonic ns
    conn = _Raw(args.retry_url)
    for _ in range(args.pairs):
        conn.send(await conn.prepare())
        async for t, ev in conn.response():
            if isinstance(ev, h11.Response):
                if ev.status_code != 429:
                    raise SystemExit(f"{args.retry_url}: status {ev.status_code}, not 429")
                t_headers = t
                wait = float(dict(ev.headers)[b"retry-after"])
        due = t_headers + round(wait * 1e9)
        req = await conn.prepare()
        # Sleep to just short of the due time, then spin to it: a timer's overshoot is the
        # client's, not the gateway's.
        await asyncio.sleep(max(0.0, (due - time.monotonic_ns()) / 1e9 - 0.002))
        t_sent = _spin_until(due)
        conn.send(req)
        async for _ in conn.response():
            pass
        sent.append((t_headers, t_sent))
    await conn.close()
    root, _, sid = args.retry_url.removesuffix("/v1").rpartition("/s/")
    async with ClientSession() as http:
        async with http.get(f"{root}/_control/sessions/{sid}/journal") as r:
            entries = (await r.json())["entries"][-2 * args.pairs :]
        # The same stalls as the gateway wrote them: from the headers (with the first two
        # events) to the last byte, in its own journal stamps.
        _, _, stall_sid = args.stall_url.removesuffix("/v1").rpartition("/s/")
        async with http.get(f"{root}/_control/sessions/{stall_sid}/journal") as r:
            stalls = (await r.json())["entries"][-args.n :]
    server = [
        (e["response"]["t_end_ns"] - e["response"]["t_headers_ns"]) / 1e6 - 200 for e in stalls
    ]
    client, nominal = [], []
    for (t_headers, t_sent), a, b in zip(sent, entries[0::2], entries[1::2], strict=True):
        gap = b["t_arrival_ns"] - a["response"]["t_headers_ns"]
        client.append((gap - (t_sent - t_headers)) / 1e6)
        nominal.append(gap / 1e6 - 1000)
    # Signed errors in ms: a stall longer than 200 ms as the client saw it is positive; a gap in
    # the journal longer than the client's own (or than 1 s) is positive.
    out = {
        "stall": stall,
        "stall_server": server,
        "retry_vs_client": client,
        "retry_vs_nominal": nominal,
    }
    print(json.dumps(out), flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench/load_client.py")
    sub = p.add_subparsers(dest="role", required=True)
    sub.add_parser("bare")
    s = sub.add_parser("stream")
    s.add_argument("url")
    s.add_argument("--concurrency", type=int, default=1)
    s.add_argument("--requests", type=int, default=100)
    s.add_argument("--seconds", type=float, default=0.0)
    s.add_argument("--every", type=float, default=10.0)
    s.add_argument("--verify", action="store_true")
    f = sub.add_parser("fidelity")
    f.add_argument("stall_url")
    f.add_argument("retry_url")
    f.add_argument("--n", type=int, default=20)
    f.add_argument("--pairs", type=int, default=10)
    args = p.parse_args(argv)
    role = {"bare": lambda: _bare(), "stream": lambda: _stream(args)}
    role["fidelity"] = lambda: _fidelity(args)
    asyncio.run(role[args.role]())


if __name__ == "__main__":
    main()
