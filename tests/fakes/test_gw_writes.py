"""Where the gateway's writes fall, read off the wire: every byte that is due goes out in one
write, a boundary falls only at a timed point, a flush or the end, and the bytes are those of the
plan whatever the boundaries. Each write is one HTTP chunk, so the chunk framing a raw socket
reads shows the writes exactly, whatever TCP did with them (plain HTTP only)."""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.parse
from collections.abc import Callable, Iterator

import pytest
from gw_wire import full_stream, post_raw, scenario

from fakes import Session, SyncGateway
from fakes.dialects import openai_chat as oc
from fakes.pytest_plugin import sessions_on

REPLY = {"text": "hello wide world, and more", "chunk_chars": 5, "usage": {"prompt_tokens": 3}}
FULL = full_stream(REPLY)
BLOCKS = [b + b"\n\n" for b in FULL.split(b"\n\n")[:-1]]


def oc_frames(reply: dict) -> list[bytes]:
    return [oc.frame(*e) for e in oc.stream_events(reply, "m")]


@pytest.fixture
def http_session(fake_gateway: SyncGateway) -> Iterator[Callable[..., Session]]:
    yield from sessions_on(fake_gateway)


def test_a_plain_stream_goes_out_in_one_write(http_session):
    s = http_session(scenario({"times": 2, "reply": REPLY}))
    w = post_raw(s.base_url)
    assert w.status == 200 and w.ended and w.chunks == [FULL]
    r = s.journal()["entries"][0]["response"]
    assert r["sent"].encode() == FULL and r["sent_bytes"] == r["full_bytes"] == len(FULL)
    assert r["events_sent"] == len(BLOCKS) and r["end"] == "complete"
    body = post_raw(s.base_url, stream=False).body  # a JSON body: as it was
    assert json.loads(body)["choices"][0]["message"]["content"] == REPLY["text"]


def test_a_stall_is_the_only_boundary_and_keeps_its_time(http_session):
    # 100 ms: well above the few ms a client thread may wait for the GIL in this process.
    scale = 0.025
    s = http_session(
        scenario({"reply": REPLY, "fault": {"stall": {"after_events": 2, "seconds": 4}}}),
        time_scale=scale,
    )
    w = post_raw(s.base_url)
    assert w.chunks == [b"".join(BLOCKS[:2]), b"".join(BLOCKS[2:])] and w.ended
    assert w.t_ns[1] - w.t_ns[0] >= 4 * scale * 1e9 * 0.9  # as the client saw it


def test_keepalives_and_a_dribble_each_go_out_on_their_own(http_session):
    s = http_session(
        scenario(
            {"reply": REPLY, "fault": {"stall": {"after_events": 1, "seconds": 4, "keepalive": 1}}},
            {"reply": REPLY, "fault": {"slow_dribble": {"interval": 0.5}}},
        )
    )
    ka = b": keep-alive\n\n"
    assert post_raw(s.base_url).chunks == [BLOCKS[0], ka, ka, ka, b"".join(BLOCKS[1:])]
    assert post_raw(s.base_url).chunks == BLOCKS


def test_a_cut_writes_what_comes_before_it_at_once(http_session):
    s = http_session(
        scenario(
            {"reply": REPLY, "fault": {"cut": {"after_events": 3, "mode": "reset"}}},
            {"reply": REPLY, "fault": {"cut": {"at_byte": 50, "mode": "close"}}},
            {"reply": REPLY, "fault": {"cut": {"at_byte": 0, "mode": "reset"}}},
        )
    )
    reset, close, nothing = post_raw(s.base_url), post_raw(s.base_url), post_raw(s.base_url)
    assert reset.chunks == [b"".join(BLOCKS[:3])] and not reset.ended
    assert close.chunks == [FULL[:50]] and not close.ended
    assert nothing.status == 200 and nothing.chunks == [] and not nothing.ended
    r = [e["response"] for e in s.journal()["entries"]]
    assert [x["sent_bytes"] for x in r] == [len(b"".join(BLOCKS[:3])), 50, 0]
    assert [x["events_sent"] for x in r] == [3, 0, 0]
    assert [x["end"] for x in r] == ["reset", "close", "reset"]


def test_the_headers_go_out_before_a_stall_at_the_start(http_session):
    scale = 0.025
    s = http_session(
        scenario({"reply": REPLY, "fault": {"stall": {"after_events": 0, "seconds": 4}}}),
        time_scale=scale,
    )
    w = post_raw(s.base_url)
    assert w.chunks == [FULL] and w.t_ns[0] - w.t_headers_ns >= 4 * scale * 1e9 * 0.9
    r = s.journal()["entries"][0]["response"]
    assert r["t_end_ns"] - r["t_headers_ns"] >= 4 * scale * 1e9 * 0.9


def test_the_journal_is_exact_while_a_stall_holds_the_rest(http_session):
    s = http_session(
        scenario({"reply": REPLY, "fault": {"stall": {"after_events": 2, "seconds": 600}}}),
        time_scale=1.0,
    )
    url = urllib.parse.urlsplit(s.base_url + "/chat/completions")
    body = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        seen = b""
        while seen.count(b"\n\n") < 2:  # two events (the headers end in CRLF CRLF)
            seen += sock.recv(65536)
        j = s.wait_for(
            lambda j: bool(j["entries"]) and (j["entries"][0]["response"] or {}).get("sent_bytes")
        )
        r = j["entries"][0]["response"]
        assert r["sent_bytes"] == len(b"".join(BLOCKS[:2])) and r["events_sent"] == 2
        assert r["t_headers_ns"] is not None and r["t_end_ns"] is None


def test_a_cut_stays_byte_exact_for_a_client_that_reads_late(http_session):
    # A megabyte before the cut: more than the socket buffers hold while the client does not
    # read. An RST discards what the kernel still holds, so it waits until the bytes left.
    big = {"text": "y" * 400_000, "chunk_chars": 100}
    s = http_session(scenario({"reply": big, "fault": {"cut": {"after_events": 3500}}}))
    want = b"".join(oc_frames(big)[:3500])
    url = urllib.parse.urlsplit(s.base_url + "/chat/completions")
    body = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        sock.connect((url.hostname, url.port))
        sock.sendall(
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        # Everything is handed to the connection before the client reads a byte.
        s.wait_for(lambda j: bool(j["entries"]) and j["entries"][0]["response"]["sent_bytes"] > 0)
        got = b""
        with contextlib.suppress(ConnectionResetError):
            while data := sock.recv(1 << 16):
                got += data
    payload = got.split(b"\r\n\r\n", 1)[1]
    assert _unchunk(payload) == want
    assert s.journal()["entries"][0]["response"]["end"] == "reset"


def _unchunk(raw: bytes) -> bytes:
    out, pos = b"", 0
    while pos < len(raw):
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol], 16)
        out += raw[eol + 2 : eol + 2 + size]
        pos = eol + 2 + size + 2
    return out


def test_a_replay_writes_as_recorded_and_a_fault_finds_events_one_read_brought(http_session):
    one_read = "".join(b.decode() for b in BLOCKS[:4])  # four events a client read at once
    rest = "".join(b.decode() for b in BLOCKS[4:])
    rp = {"headers": {"Content-Type": "text/event-stream"}, "chunks": [one_read, rest]}
    s = http_session(
        scenario(
            {"replay": rp},
            {"replay": rp, "fault": {"cut": {"after_events": 2, "mode": "close"}}},
        )
    )
    assert post_raw(s.base_url).chunks == [one_read.encode(), rest.encode()]
    assert post_raw(s.base_url).chunks == [b"".join(BLOCKS[:2])]
