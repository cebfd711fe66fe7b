"""``conformance probe``: check a live gateway's habits against what the reference agent relies on.

Theory of operation: a fixed, small list of chat requests (a short answer, a long reasoning
answer, a tool call, streamed and not; a history whose assistant turn carries only reasoning
plus an explanatory text; a rate-limit sample; a deliberately invalid request) is sent in order,
no more than ``--max-requests`` of them and no faster than ``--rate`` per second. Each answer is
kept as an *exchange*: status, headers, the body's raw chunks exactly as they arrived and how
the body ended. Observations are then pure functions of the exchanges, each with a verdict:

* ``OK``: the habit the reference agent relies on is there;
* ``MISSING``: a habit it relies on is missing (exit status 1);
* ``NOTE``: differs from OpenAI's own habit but the reference agent copes; reported for others;
* ``NOT_SEEN``: nothing in this probe showed it (no 429 came, no reasoning was sent, budget).

The API key is read from the environment, sent only in the ``Authorization`` header and
scrubbed from everything written. ``--record`` saves the exchanges as a scenario of ``replay``
steps that makes the fake gateway send the same bytes again (contracts §1).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import ssl
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from httpx_sse import EventSource, SSEError

from conformance import __version__
from conformance.errors import ConformanceError

__all__ = [
    "PROBES",
    "Exchange",
    "Probe",
    "ProbeRequest",
    "observe",
    "probe_document",
    "recording",
    "execute",
    "main",
]

# The reference agent's explanatory text for a reasoning-only assistant turn (RSN rules).
REASONING_ONLY_CONTENT = (
    "[The previous reply was cut off by the output token limit while still reasoning; "
    "no visible answer was produced yet.]"
)
# Delta / message keys under which gateways are known to send reasoning.
REASONING_KEYS = ("reasoning_content", "reasoning", "reasoning_text", "thinking", "thoughts")
# Response headers that say nothing about the gateway's habits, or are the HTTP framing itself
# (which the fake gateway makes anew on replay).
_FRAMING_HEADERS = {
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "date",
    "server",
    "content-encoding",
    "set-cookie",
}
_SECRET_HEADERS = {"authorization", "x-api-key", "proxy-authorization", "api-key"}
MASK = "[REDACTED]"
VERDICTS = ("OK", "MISSING", "NOTE", "NOT_SEEN")

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}


@dataclass(frozen=True)
class ProbeRequest:
    """One request of the probe; ``marker`` is in the last user message, so a scenario step
    can target it with ``match: {contains: marker}``."""

    name: str
    marker: str
    stream: bool
    prompt: str
    tools: bool = False
    history: bool = False
    invalid: bool = False
    long: bool = False

    def body(self, model: str, max_tokens: int) -> dict[str, Any]:
        text = f"{self.marker} {self.prompt}"
        if self.invalid:
            # Not an array: every OpenAI-compatible gateway must refuse it with a 4xx.
            return {"model": model, "messages": text, "stream": False}
        messages: list[dict[str, Any]] = []
        if self.history:
            messages = [
                {"role": "user", "content": "What is 6 times 7?"},
                {
                    "role": "assistant",
                    "content": REASONING_ONLY_CONTENT,
                    "reasoning_content": "6 times 7: six sevens are 42.",
                },
            ]
        messages.append({"role": "user", "content": text})
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": self.stream,
            "max_tokens": max_tokens * (4 if self.long else 1),
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.tools:
            body["tools"] = [TOOL]
        return body


# In priority order: a smaller budget drops the last ones.
PROBES: tuple[ProbeRequest, ...] = (
    ProbeRequest("short-stream", "probe:short", True, "Reply with the single word: ready."),
    ProbeRequest(
        "reasoning-stream",
        "probe:reasoning",
        True,
        "Think it through step by step before answering: how many prime numbers are there "
        "below 60? Give the count.",
        long=True,
    ),
    ProbeRequest(
        "tool-stream",
        "probe:tool",
        True,
        "What is the weather in Paris in celsius? Use the get_weather tool.",
        tools=True,
    ),
    ProbeRequest("short-json", "probe:short", False, "Reply with the single word: ready."),
    ProbeRequest(
        "tool-json",
        "probe:tool",
        False,
        "What is the weather in Paris in celsius? Use the get_weather tool.",
        tools=True,
    ),
    ProbeRequest("history", "probe:history", False, "Now add 1 to that. Reply with the number."),
    ProbeRequest("bad-request", "probe:bad", False, "An invalid request.", invalid=True),
    ProbeRequest("rate-limit", "probe:rate", False, "Reply with the single word: ready."),
)


@dataclass
class Exchange:
    """One request and what came back, the body as the raw chunks that arrived."""

    name: str
    stream: bool
    request: dict[str, Any]
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    end: str = "complete"  # complete | incomplete | reset | timeout | unreachable
    error: str | None = None
    elapsed_ms: float = 0.0

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def events(self) -> list[dict[str, Any]]:
        """SSE events of the body (``event``, ``data``, ``json`` when the data parses)."""
        if not self.is_sse():
            return []
        resp = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=self.body)
        out = []
        try:
            for ev in EventSource(resp).iter_sse():
                item: dict[str, Any] = {"event": ev.event, "data": ev.data, "json": None}
                with contextlib.suppress(ValueError):
                    item["json"] = json.loads(ev.data)
                out.append(item)
        except SSEError:  # pragma: no cover - content type checked above
            return []
        return out

    def is_sse(self) -> bool:
        return "text/event-stream" in self.headers.get("content-type", "")

    def json_body(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None


class ProbeError(ConformanceError):
    """The probe could not run (bad usage, gateway unreachable, key refused): exit status 2."""


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
        out = self.exchanges = []
        try:
            for req in probes[: self.max_requests]:
                ex = self.send(req)
                out.append(ex)
                if ex.end == "unreachable" and len(out) == 1:
                    raise ProbeError(f"gateway unreachable at {_safe_url(self.url)}: {ex.error}")
                if ex.status in (401, 403) and len(out) == 1:
                    raise ProbeError(
                        f"gateway refused the key ({ex.status}) at {_safe_url(self.url)}: "
                        f"{_scrub(ex.body.decode('utf-8', 'replace')[:300], self.api_key)}"
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


# -- observations ---------------------------------------------------------------------------


def _obs(oid: str, title: str, relied: bool, verdict: str, value: str, evidence: list[str]):
    return {
        "id": oid,
        "title": title,
        "relied_on": relied,
        "verdict": verdict,
        "value": value,
        "evidence": evidence,
    }


def _stream_facts(ex: Exchange) -> dict[str, Any]:
    """What one streamed exchange shows about how streams are framed and how they end."""
    evs = ex.events()
    data = [e for e in evs if e["data"] != "[DONE]"]
    done_at = next((i for i, e in enumerate(evs) if e["data"] == "[DONE]"), None)
    with_choice = [
        e["json"] for e in data if isinstance(e["json"], dict) and e["json"].get("choices")
    ]
    errors = [
        e
        for e in data
        if e["event"] == "error" or (isinstance(e["json"], dict) and "error" in e["json"])
    ]
    finishes = [
        c.get("finish_reason")
        for j in with_choice
        for c in j["choices"]
        if isinstance(c, dict) and c.get("finish_reason")
    ]
    last = with_choice[-1]["choices"][0] if with_choice else {}
    reasoning = sorted(
        {
            k
            for j in with_choice
            for c in j["choices"]
            if isinstance(c, dict)
            for k, v in (c.get("delta") or {}).items()
            if k in REASONING_KEYS and v
        }
    )
    return {
        "events": len(evs),
        "done": done_at is not None,
        "done_last": done_at is not None and done_at == len(evs) - 1,
        "errors": errors,
        "finishes": finishes,
        "last_finish": isinstance(last, dict) and bool(last.get("finish_reason")),
        "after_finish": _after_finish(with_choice),
        "carried": sum(
            bool(v)
            for j in with_choice
            for c in j["choices"]
            if isinstance(c, dict)
            for k, v in (c.get("delta") or {}).items()
            if k in ("content", "tool_calls", "function_call") or k in REASONING_KEYS
        ),
        "usage": any(isinstance(e["json"], dict) and e["json"].get("usage") for e in data),
        "reasoning": reasoning,
        "unparsed": [e["data"][:80] for e in data if e["json"] is None],
    }


def _after_finish(with_choice: list[dict[str, Any]]) -> int:
    """How many chunks with a choice follow the last one that carries finish_reason."""
    marks = [
        i
        for i, j in enumerate(with_choice)
        if any(isinstance(c, dict) and c.get("finish_reason") for c in j["choices"])
    ]
    return len(with_choice) - 1 - marks[-1] if marks else 0


def _tool_fragments(ex: Exchange) -> list[dict[str, Any]]:
    frags = []
    for e in ex.events():
        j = e["json"]
        if not isinstance(j, dict):
            continue
        for c in j.get("choices") or []:
            for tc in (c.get("delta") or {}).get("tool_calls") or [] if isinstance(c, dict) else []:
                fn = tc.get("function") or {}
                frags.append(
                    {
                        "index": tc.get("index"),
                        "id": tc.get("id"),
                        "name": fn.get("name"),
                        "args": fn.get("arguments"),
                    }
                )
    return frags


def _json_message(ex: Exchange) -> tuple[dict[str, Any], Any]:
    j = ex.json_body()
    if not isinstance(j, dict) or not j.get("choices"):
        return {}, None
    ch = j["choices"][0] if isinstance(j["choices"][0], dict) else {}
    return (ch.get("message") or {}), ch.get("finish_reason")


def _by(exchanges: list[Exchange], name: str) -> Exchange | None:
    return next((x for x in exchanges if x.name == name), None)


def _error_shape(ex: Exchange) -> str:
    j = ex.json_body()
    ctype = ex.headers.get("content-type", "").split(";")[0] or "no content type"
    if isinstance(j, dict) and isinstance(j.get("error"), dict):
        return f"{ctype} {{error: {{{', '.join(j['error'])}}}}}"
    if isinstance(j, dict):
        return f"{ctype} {{{', '.join(j)}}}"
    return f"{ctype}, not JSON: {ex.body[:60].decode('utf-8', 'replace')!r}"


def observe(exchanges: list[Exchange]) -> list[dict[str, Any]]:
    """The observations and their verdicts, from the exchanges alone."""
    out = []
    streams = [x for x in exchanges if x.stream and x.status == 200 and x.is_sse()]
    facts = {x.name: _stream_facts(x) for x in streams}
    normal = [x for x in streams if not facts[x.name]["errors"]]
    broken = [x for x in streams if facts[x.name]["errors"]]

    # 1. finish_reason on the last chunk of every normal stream.
    if not normal:
        out.append(
            _obs(
                "stream-finish",
                "The last chunk of a stream carries finish_reason",
                True,
                "NOT_SEEN",
                "no stream was answered normally",
                [x.name for x in streams],
            )
        )
    else:
        # The reference agent keeps a finish_reason from any chunk: a stream without one is
        # MISSING; one whose finish chunk is followed by more choice chunks (usage) is a NOTE,
        # since a client reading only the last chunk would take it for truncated.
        lacking = [x.name for x in normal if not facts[x.name]["finishes"]]
        trailing = [
            x.name for x in normal if facts[x.name]["finishes"] and not facts[x.name]["last_finish"]
        ]
        desc = "; ".join(
            f"{x.name}: {', '.join(facts[x.name]['finishes']) or 'no finish_reason'}"
            + (
                f", then {facts[x.name]['after_finish']} chunk(s) with a choice and no "
                "finish_reason"
                if facts[x.name]["after_finish"]
                else ""
            )
            + ("" if x.end == "complete" else f" (body {x.end})")
            for x in normal
        )
        if lacking:
            verdict = "MISSING"
            value = f"{len(lacking)} of {len(normal)} streams end without finish_reason ({desc})"
        elif trailing:
            verdict = "NOTE"
            value = (
                f"finish_reason is not on the last chunk of {len(trailing)} of {len(normal)} "
                f"streams ({desc})"
            )
        else:
            verdict, value = "OK", f"{len(normal)} of {len(normal)} streams ({desc})"
        out.append(
            _obs(
                "stream-finish",
                "The last chunk of a stream carries finish_reason",
                True,
                verdict,
                value,
                [x.name for x in normal],
            )
        )

    # 2. [DONE] after the finish chunk.
    if not normal:
        out.append(
            _obs(
                "stream-done",
                "[DONE] follows the finish chunk",
                False,
                "NOT_SEEN",
                "no stream was answered normally",
                [],
            )
        )
    else:
        no_done = [x.name for x in normal if not facts[x.name]["done_last"]]
        out.append(
            _obs(
                "stream-done",
                "[DONE] follows the finish chunk",
                False,
                "NOTE" if no_done else "OK",
                (
                    f"no [DONE] at the end of: {', '.join(no_done)} (the reference agent judges "
                    "completion by finish_reason; a client waiting for [DONE] would hang or fail)"
                )
                if no_done
                else f"every stream ends with [DONE] ({len(normal)} of {len(normal)})",
                [x.name for x in normal],
            )
        )

    # 3. Reasoning field name.
    names = sorted({k for x in streams for k in facts[x.name]["reasoning"]})
    for x in exchanges:
        msg, _ = _json_message(x) if not x.stream and x.status == 200 else ({}, None)
        names += [k for k in REASONING_KEYS if msg.get(k) and k not in names]
    if not names:
        verdict, value = "NOT_SEEN", "no reasoning was sent (the model may not reason)"
    elif "reasoning_content" in names:
        verdict, value = "OK", f"reasoning arrives as {', '.join(names)}"
    else:
        verdict = "MISSING"
        value = (
            f"reasoning arrives as {', '.join(names)}, not reasoning_content: the reference "
            "agent would not see it"
        )
    out.append(
        _obs(
            "reasoning-field",
            "Reasoning field name",
            True,
            verdict,
            value,
            [x.name for x in exchanges if x.name.startswith("reasoning")],
        )
    )

    # 4. Usage in streams (asked for with stream_options.include_usage).
    if not normal:
        out.append(
            _obs(
                "stream-usage",
                "Usage is streamed",
                False,
                "NOT_SEEN",
                "no stream was answered normally",
                [],
            )
        )
    else:
        with_usage = [x.name for x in normal if facts[x.name]["usage"]]
        out.append(
            _obs(
                "stream-usage",
                "Usage is streamed",
                False,
                "OK" if len(with_usage) == len(normal) else "NOTE",
                f"usage in {len(with_usage)} of {len(normal)} streams"
                + ("" if with_usage else " (token counts of streamed replies are unknown)"),
                [x.name for x in normal],
            )
        )

    # 5. Tool-call argument chunking.
    tx = _by(exchanges, "tool-stream")
    frags = _tool_fragments(tx) if tx is not None and tx in normal else []
    if not frags:
        out.append(
            _obs(
                "tool-chunking",
                "How tool-call arguments are chunked",
                True,
                "NOT_SEEN",
                "no streamed tool call came back",
                [tx.name] if tx else [],
            )
        )
    else:
        out.append(_tool_observation(frags))

    # 6. finish_reason in non-streamed replies.
    plain = [
        x
        for x in exchanges
        if not x.stream and x.status == 200 and x.name in ("short-json", "tool-json", "history")
    ]
    if not plain:
        out.append(
            _obs(
                "json-finish",
                "A non-streamed reply carries finish_reason",
                True,
                "NOT_SEEN",
                "no non-streamed reply came back",
                [],
            )
        )
    else:
        got = {x.name: _json_message(x)[1] for x in plain}
        lacking = [n for n, f in got.items() if not f]
        out.append(
            _obs(
                "json-finish",
                "A non-streamed reply carries finish_reason",
                True,
                "MISSING" if lacking else "OK",
                "; ".join(f"{n}: {f or 'none'}" for n, f in got.items()),
                list(got),
            )
        )

    # 7. Reasoning-only assistant turn with an explanatory content.
    hx = _by(exchanges, "history")
    if hx is None or hx.status is None:
        out.append(
            _obs(
                "reasoning-history",
                "An assistant turn of reasoning_content plus an explanatory content is accepted",
                True,
                "NOT_SEEN",
                "not sent" if hx is None else f"no answer: {hx.error}",
                [],
            )
        )
    else:
        ok = 200 <= hx.status < 300
        out.append(
            _obs(
                "reasoning-history",
                "An assistant turn of reasoning_content plus an explanatory content is accepted",
                True,
                "OK" if ok else "MISSING",
                f"HTTP {hx.status}" + ("" if ok else f": {_error_shape(hx)}"),
                [hx.name],
            )
        )

    # 8. Error body shape.
    bx = _by(exchanges, "bad-request")
    errs = [x for x in exchanges if x.status is not None and x.status >= 400]
    if bx is None or bx.status is None:
        out.append(
            _obs(
                "error-shape",
                "Shape of error bodies",
                False,
                "NOT_SEEN",
                "not sent" if bx is None else f"no answer: {bx.error}",
                [],
            )
        )
    else:
        j = bx.json_body()
        openai = (
            isinstance(j, dict)
            and isinstance(j.get("error"), dict)
            and isinstance(j["error"].get("message"), str)
        )
        good = 400 <= bx.status < 500 and openai
        shapes = "; ".join(f"{x.name}: HTTP {x.status} {_error_shape(x)}" for x in errs)
        out.append(
            _obs(
                "error-shape",
                "Shape of error bodies",
                False,
                "OK" if good else "NOTE",
                shapes or f"the invalid request got HTTP {bx.status}",
                [x.name for x in errs] or [bx.name],
            )
        )

    # 9b. A stream that "completes" with nothing in it: how some gateways hide an upstream
    # failure. The reference agent re-sends an empty reply a bounded number of times (STR-16).
    empty = [x for x in normal if facts[x.name]["finishes"] and not facts[x.name]["carried"]]
    out.append(
        _obs(
            "empty-stream",
            "No stream completes with nothing in it",
            False,
            "NOTE" if empty else ("OK" if normal else "NOT_SEEN"),
            (
                "finished with "
                + "; ".join(f"{x.name}: {', '.join(facts[x.name]['finishes'])}" for x in empty)
                + " and no content, reasoning or tool call (an upstream failure may have been "
                "turned into an empty, complete-looking reply; the reference agent re-sends "
                "empty replies a bounded number of times)"
            )
            if empty
            else f"{len(normal)} streams carried content, reasoning or a tool call",
            [x.name for x in empty] or [x.name for x in normal],
        )
    )

    # 9. In-band errors inside a 200 stream.
    if not broken:
        out.append(
            _obs(
                "in-band-error",
                "How a stream that fails mid-body ends",
                False,
                "NOT_SEEN",
                "no stream carried an error event",
                [],
            )
        )
    else:
        parts = []
        for x in broken:
            f = facts[x.name]
            err = f["errors"][0]
            shape = "event: error" if err["event"] == "error" else "data: {error: ...}"
            parts.append(
                f"{x.name}: {shape} after {f['events'] - len(f['errors'])} events, then "
                + ("a clean close" if x.end == "complete" else f"body {x.end}")
                + ("; [DONE]" if f["done"] else "; no [DONE]")
                + (
                    f"; finish_reason {', '.join(f['finishes'])}"
                    if f["finishes"]
                    else "; no finish_reason"
                )
            )
        out.append(
            _obs(
                "in-band-error",
                "How a stream that fails mid-body ends",
                False,
                "NOTE",
                " | ".join(parts) + " (the reference agent treats an error event, and "
                "any stream without finish_reason, as a failed attempt)",
                [x.name for x in broken],
            )
        )

    # 10. Retry-After on a 429.
    r429 = [x for x in exchanges if x.status == 429]
    if not r429:
        out.append(
            _obs(
                "retry-after",
                "Retry-After survives on a 429",
                True,
                "NOT_SEEN",
                "no 429 was seen",
                [],
            )
        )
    else:
        lost = [x for x in r429 if not ({"retry-after", "retry-after-ms"} & set(x.headers))]
        hinted = []
        for x in r429:
            hints = {k: v for k, v in x.headers.items() if "retry" in k or "ratelimit-reset" in k}
            hinted.append(
                f"{x.name}: "
                + (
                    ", ".join(f"{k}: {v}" for k, v in sorted(hints.items()))
                    or "no retry hint at all"
                )
            )
        out.append(
            _obs(
                "retry-after",
                "Retry-After survives on a 429",
                True,
                "MISSING" if lost else "OK",
                ("Retry-After missing on " if lost else "") + "; ".join(hinted),
                [x.name for x in r429],
            )
        )
    return out


def _tool_observation(frags: list[dict[str, Any]]) -> dict[str, Any]:
    calls: dict[Any, list[dict[str, Any]]] = {}
    for f in frags:
        calls.setdefault(f["index"] if f["index"] is not None else 0, []).append(f)
    problems, descs = [], []
    for idx, fs in calls.items():
        args = "".join(f["args"] or "" for f in fs)
        ids = [f["id"] for f in fs if f["id"]]
        names = "".join(f["name"] or "" for f in fs)
        sizes = [len(f["args"] or "") for f in fs if f["args"] is not None]
        head = (
            "id and name in the first fragment"
            if fs[0]["id"] and fs[0]["name"]
            else ("id/name not in the first fragment")
        )
        try:
            json.loads(args)
            valid = "valid JSON"
        except ValueError:
            valid = "NOT valid JSON"
            problems.append(f"call {idx}: arguments do not join into JSON")
        if not ids:
            problems.append(f"call {idx}: no id")
        if not names:
            problems.append(f"call {idx}: no name")
        descs.append(
            f"call {idx} ({names or '?'}): {len(fs)} fragments, {head}, argument pieces of "
            f"{sizes} chars, joined: {valid}"
            + ("" if frags[0]["index"] is not None else ", no index field")
        )
    return _obs(
        "tool-chunking",
        "How tool-call arguments are chunked",
        True,
        "MISSING" if problems else "OK",
        "; ".join(descs) + (f" — {'; '.join(problems)}" if problems else ""),
        ["tool-stream"],
    )


# -- documents ----------------------------------------------------------------------------------


def _safe_url(url: str) -> str:
    """The URL without user info, query or fragment (they may hold credentials)."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host += f":{u.port}"
    return urllib.parse.urlunsplit((u.scheme, host, u.path, "", ""))


def _scrub(value: Any, secret: str | None) -> Any:
    if isinstance(value, str):
        return value.replace(secret, MASK) if secret else value
    if isinstance(value, dict):
        return {
            k: (MASK if k.lower() in _SECRET_HEADERS else _scrub(v, secret))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub(v, secret) for v in value]
    return value


def _exchange_doc(ex: Exchange) -> dict[str, Any]:
    body = ex.body.decode("utf-8", "replace")
    return {
        "name": ex.name,
        "stream": ex.stream,
        "request": ex.request,
        "status": ex.status,
        "headers": ex.headers,
        "end": ex.end,
        "error": ex.error,
        "elapsed_ms": ex.elapsed_ms,
        "body_bytes": len(ex.body),
        "chunks": len(ex.chunks),
        "events": len(ex.events()),
        "body": body if len(body) <= 20000 else body[:20000] + "\n[... cut]",
    }


def probe_document(
    exchanges: list[Exchange],
    *,
    base_url: str,
    model: str,
    started: str,
    finished: str,
    max_requests: int,
    rate: float,
    api_key: str | None,
    error: str | None = None,
) -> dict[str, Any]:
    """The JSON probe report (schema ``reports/schemas/probe.schema.json``), key scrubbed."""
    obs = observe(exchanges) if error is None else []
    missing = [o["id"] for o in obs if o["verdict"] == "MISSING"]
    doc = {
        "format": "gateway-probe",
        "version": 1,
        "probe": {
            "base_url": _safe_url(base_url),
            "model": model,
            "started": started,
            "finished": finished,
            "requests_sent": len(exchanges),
            "max_requests": max_requests,
            "rate_per_s": rate,
            "harness_version": __version__,
        },
        "outcome": "error" if error else ("missing" if missing else "ok"),
        "error": error,
        "observations": obs,
        "exchanges": [_exchange_doc(x) for x in exchanges],
    }
    return _scrub(doc, api_key)


def _chunk_strings(chunks: list[bytes]) -> list[str]:
    """Chunks as UTF-8 strings; a chunk ending inside a character is joined to the next."""
    out, pending = [], b""
    for c in chunks:
        pending += c
        try:
            out.append(pending.decode("utf-8"))
            pending = b""
        except UnicodeDecodeError:
            continue
    if pending:
        raise ProbeError("recording: the body is not UTF-8 and cannot be replayed as text")
    return out


def recording(exchanges: list[Exchange], scenario_id: str, api_key: str | None) -> dict[str, Any]:
    """A scenario whose ``replay`` steps make the fake gateway send what was seen."""
    steps = []
    probes = {p.name: p for p in PROBES}
    for ex in exchanges:
        p = probes.get(ex.name)
        if p is None or p.invalid:
            continue  # the fake gateway refuses an invalid body before any step
        step: dict[str, Any] = {"match": {"contains": p.marker, "stream": ex.stream}, "times": 100}
        if ex.status is None:
            step["fault"] = {"reset_before_headers": {}}
        else:
            rp: dict[str, Any] = {
                "status": ex.status,
                "headers": {k: v for k, v in ex.headers.items() if k not in _FRAMING_HEADERS},
                "chunks": _chunk_strings(ex.chunks),
            }
            if ex.end in ("incomplete", "reset"):
                rp["end"] = "close" if ex.end == "incomplete" else "reset"
            step["replay"] = rp
        steps.append(step)
    if not steps:
        raise ProbeError("recording: no exchange can be replayed")
    return _scrub(
        {
            "id": scenario_id,
            "title": "Recorded by conformance probe",
            "criteria": [],
            "prompt": "probe",
            "script": steps,
        },
        api_key,
    )


# -- command line -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="conformance probe",
        description="Probe a live OpenAI-compatible gateway: a small, bounded set of chat requests "
        "(short answer, long reasoning answer, tool call; streamed and not) and a report of its "
        "habits, each judged against what the reference agent relies on. Exit status: 0 every "
        "habit relied on is there, 1 some is missing, 2 bad usage or gateway unreachable.",
    )
    ap.add_argument("--base-url", required=True, help="the gateway's base URL, e.g. http://host/v1")
    ap.add_argument("--model", required=True, help="model name to ask for")
    ap.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the API key (default: OPENAI_API_KEY if set); "
        "the key is never printed or written",
    )
    ap.add_argument("--out", type=Path, default=Path("probe-report"), help="report directory")
    ap.add_argument(
        "--max-requests",
        type=int,
        default=len(PROBES),
        help=f"request budget (default {len(PROBES)}, all probes; fewer drops the last ones)",
    )
    ap.add_argument("--rate", type=float, default=1.0, help="at most this many requests per second")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    ap.add_argument("--max-tokens", type=int, default=256, help="max_tokens per request (x4 long)")
    ap.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE.yaml",
        help="also save what was seen as a scenario of replay steps (id = file stem)",
    )
    ap.add_argument("--ca-file", default=None, help="CA bundle for an HTTPS gateway")
    return ap


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    var = args.api_key_env or "OPENAI_API_KEY"
    key = os.environ.get(var)
    if args.api_key_env and not key:
        print(f"conformance probe: environment variable {var} is not set or empty", file=sys.stderr)
        return 2
    if urllib.parse.urlsplit(args.base_url).scheme not in ("http", "https"):
        print(
            f"conformance probe: --base-url must be http(s)://..., got {args.base_url!r}",
            file=sys.stderr,
        )
        return 2
    if args.record is not None and not re.fullmatch(r"[a-z0-9-]+", args.record.stem):
        print(
            f"conformance probe: --record {args.record}: the file stem is the scenario id and "
            "must match [a-z0-9-]+",
            file=sys.stderr,
        )
        return 2
    return execute(args, key)[0]


def execute(args: argparse.Namespace, key: str | None) -> tuple[int, list[Exchange]]:
    """Probe, write the report (and the recording); return the exit status and the exchanges."""
    started = _now()
    error = None
    try:
        prober = Probe(
            args.base_url,
            args.model,
            key,
            max_requests=args.max_requests,
            rate=args.rate,
            timeout=args.timeout,
            max_tokens=args.max_tokens,
            verify=ssl.create_default_context(cafile=args.ca_file) if args.ca_file else True,
        )
    except (ProbeError, OSError) as e:
        print(f"conformance probe: {e}", file=sys.stderr)
        return 2, []
    try:
        exchanges = prober.run()
    except ProbeError as e:
        error = _scrub(str(e), key)
        exchanges = prober.exchanges
    doc = probe_document(
        exchanges,
        base_url=args.base_url,
        model=args.model,
        started=started,
        finished=_now(),
        max_requests=args.max_requests,
        rate=args.rate,
        api_key=key,
        error=error,
    )
    from reports.probe import render_probe

    index = render_probe(doc, args.out, secrets=[key] if key else [])
    if error:
        print(f"conformance probe: {error}", file=sys.stderr)
        print(f"conformance probe: report in {index}", file=sys.stderr)
        return 2, exchanges
    if args.record is not None:
        try:
            sc = recording(exchanges, args.record.stem, key)
        except ProbeError as e:
            print(f"conformance probe: {e}", file=sys.stderr)
            return 2, exchanges
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(
            yaml.safe_dump(sc, sort_keys=False, allow_unicode=True, width=100000),
            encoding="utf-8",
        )
    for o in doc["observations"]:
        print(f"{o['verdict']:<9} {o['id']:<18} {o['value']}")
    print(f"report: {index}")
    return (1 if doc["outcome"] == "missing" else 0), exchanges


if __name__ == "__main__":
    sys.exit(main())
