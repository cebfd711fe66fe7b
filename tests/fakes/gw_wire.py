"""Helpers to drive the gateway with a real HTTP client and keep what arrived."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import httpx

from fakes.dialects import openai_chat as oc

__all__ = [
    "Got",
    "Writes",
    "post",
    "post_raw",
    "full_stream",
    "events",
    "last_json",
    "scenario",
]


@dataclass
class Got:
    status: int | None
    headers: dict[str, str]
    body: bytes
    error: BaseException | None


def post(client: httpx.Client, base_url: str, stream: bool = True, **extra: Any) -> Got:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    body.update(extra)
    buf = bytearray()
    try:
        with client.stream("POST", base_url + "/chat/completions", json=body) as r:
            try:
                for chunk in r.iter_raw():
                    buf += chunk
            except httpx.HTTPError as e:
                return Got(r.status_code, dict(r.headers), bytes(buf), e)
            return Got(r.status_code, dict(r.headers), bytes(buf), None)
    except httpx.HTTPError as e:
        return Got(None, {}, b"", e)


@dataclass
class Writes:
    """A response read off a plain socket: its status and the HTTP chunks of its body as they
    were framed on the wire, one per write of the server (with the monotonic ns each was read
    whole, as the headers); ``ended`` whether the final zero-length chunk came."""

    status: int
    t_headers_ns: int = 0  # when the headers were read
    chunks: list[bytes] = field(default_factory=list)
    t_ns: list[int] = field(default_factory=list)
    ended: bool = False

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


def post_raw(base_url: str, stream: bool = True, path: str = "/chat/completions") -> Writes:
    """POST a chat request over a plain socket (HTTP only) and keep the chunk framing that
    HTTP clients take away: where the server's writes fell, whatever TCP did with them."""
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    ).encode()
    url = urllib.parse.urlsplit(base_url + path)
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(head.encode() + body)
        f = sock.makefile("rb")
        got = Writes(int(f.readline().split()[1]))
        headers: dict[str, str] = {}
        while (line := f.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        got.t_headers_ns = time.monotonic_ns()
        if "content-length" in headers:
            got.chunks.append(f.read(int(headers["content-length"])))
            got.t_ns.append(time.monotonic_ns())
            return got
        try:
            while size_line := f.readline():
                size = int(size_line.strip(), 16)
                if size == 0:
                    got.ended = True
                    break
                data = f.read(size)
                got.chunks.append(data)
                got.t_ns.append(time.monotonic_ns())
                if len(data) < size or f.read(2) != b"\r\n":
                    break
        except ConnectionError:
            pass  # a reset: what came before it is kept
    return got


def full_stream(reply: dict[str, Any], model: str = "m", done: bool = True) -> bytes:
    return b"".join(oc.frame(*e) for e in oc.stream_events(reply, model, terminal=done))


def events(raw: bytes) -> list[str]:
    """The data payloads of an SSE body (simple split; the bodies here are well-formed)."""
    return [e[len("data: ") :] for e in raw.decode().split("\n\n") if e.startswith("data: ")]


def last_json(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(e) for e in events(raw) if e != "[DONE]"]


def scenario(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A minimal valid scenario dict around ``steps``."""
    return {"id": "t", "criteria": ["STR-01"], "prompt": "p", "script": list(steps), **extra}


# --- Hypothesis strategies shared by the property tests of every dialect ----------------------
from hypothesis import strategies as st  # noqa: E402


def reply_strategy(max_text: int = 40, json_arguments: bool = False) -> st.SearchStrategy[dict]:
    """Scripted replies: any text and reasoning, piece size, optional tool calls.

    ``json_arguments`` wraps the arguments in a JSON object, for clients (the official SDKs)
    that parse tool input as JSON.
    """
    texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=max_text)
    args = (
        texts.map(lambda t: json.dumps({"v": t}, ensure_ascii=False)) if json_arguments else texts
    )
    return st.fixed_dictionaries(
        {"text": texts, "reasoning": texts, "chunk_chars": st.integers(1, 20)},
        optional={
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {"name": st.from_regex(r"[a-z_]{1,8}", fullmatch=True), "arguments": args}
                ),
                max_size=2,
            )
        },
    )
