"""The probe in each wire dialect: where a request goes, what it looks like, how a reply is read.

Theory of operation: the probe's requests are written once, as chat-completions bodies
(``probes``). For another dialect they are rendered the way the reference agent renders them
(its codec, ``conformance.reference.agent.codec_for``), sent to that dialect's endpoint under
the base URL with its credential header, and each reply is read back into the chat view
(``conformance.judging.canon``: ``message_stop`` is ``[DONE]``, ``stop_reason`` is ``finish_reason``,
thinking is ``reasoning_content``, an ``error`` event an in-band error) before the observations
read it. The exchange keeps the bytes as they arrived; only the observations see the chat view.

Where a dialect has no counterpart of an observation, the observation says so
(``NOT_APPLICABLE`` and why) instead of reading a translation that would only mirror itself;
a request that only such an observation reads is not sent.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from conformance.judging.canon import chat_sent
from conformance.probe.exchange import Exchange
from conformance.probe.probes import ProbeRequest
from conformance.reference.agent import codec_for
from fakes.dialects import CHAT

__all__ = ["WIRES", "Wire", "request_url", "wire_for"]

_NO_FIELD_NAME = (
    "reasoning comes as its own block or item type in this dialect; there is no field name "
    "for a gateway to change"
)
_NO_REASONING_TURN = (
    "an assistant turn cannot carry reasoning without the vendor's signature or encrypted "
    "content in this dialect; the reference agent hands unsigned reasoning over as text, so "
    "there is no reasoning-only turn to send (the history request is not sent)"
)


@dataclass(frozen=True)
class Wire:
    """One dialect as the probe speaks it."""

    name: str
    # The invalid request's body: the conversation where an array is required is not one.
    invalid: str  # the key that holds the conversation
    end_marker: str = "[DONE]"  # the event that ends a stream, read as chat's [DONE]
    not_applicable: Mapping[str, str] = field(default_factory=dict)  # observation id -> why
    skip: frozenset[str] = frozenset()  # requests only an inapplicable observation reads

    @property
    def path(self) -> str:
        return str(codec_for(self.name).path)

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The credential header (none without a key) and any version header the dialect needs."""
        mark = "\x00no key"  # what no key would have been sent as: drop those headers
        got = codec_for(self.name).headers(api_key or mark)
        return {k: v for k, v in got.items() if mark not in v}

    def body(self, req: ProbeRequest, model: str, max_tokens: int) -> dict[str, Any]:
        chat = req.body(model, max_tokens)
        if self.name == CHAT:
            return chat
        chat.pop("stream_options", None)  # chat's own switch; the others always send usage
        text = chat["messages"]
        if req.invalid:  # render a valid body, then break its conversation the dialect's way
            chat.update(messages=[{"role": "user", "content": text}], max_tokens=max_tokens)
        body = codec_for(self.name).request(chat)
        if req.invalid:
            body[self.invalid] = text if self.invalid == "messages" else {"text": text}
        return body

    def chat_view(self, ex: Exchange) -> Exchange:
        """``ex`` as a chat-completions gateway would have answered it (itself for chat).

        Only a successful reply is translated; an error body is kept as it came, so the
        observations describe the error shape the dialect really uses.
        """
        if self.name == CHAT or ex.status is None or not 200 <= ex.status < 300:
            return ex
        stream = ex.stream and ex.is_sse()
        if not stream and ex.json_body() is None:
            return ex
        text = chat_sent(ex.body.decode("utf-8", "replace"), self.name, stream, ex.status)
        return replace(ex, chunks=[text.encode("utf-8")])


# One per registered dialect, in the registry's order (tests/test_dialect_names.py holds it so).
WIRES: Mapping[str, Wire] = MappingProxyType(
    {
        "openai_chat": Wire("openai_chat", invalid="messages"),
        "anthropic_messages": Wire(
            "anthropic_messages",
            invalid="messages",
            end_marker="message_stop",
            not_applicable={
                "reasoning-field": _NO_FIELD_NAME,
                "reasoning-history": _NO_REASONING_TURN,
            },
            skip=frozenset({"history"}),
        ),
        "openai_responses": Wire(
            "openai_responses",
            invalid="input",  # a string or an array; an object is neither
            end_marker="response.completed",
            not_applicable={
                "reasoning-field": _NO_FIELD_NAME,
                "reasoning-history": _NO_REASONING_TURN,
                "stream-done": "the stream ends with response.completed, which carries the "
                "finish and the end at once (read under stream-finish); there is no separate "
                "end marker",
            },
            skip=frozenset({"history"}),
        ),
    }
)


def wire_for(dialect: str) -> Wire:
    """The wire of ``dialect`` (a name of ``fakes.dialects.NAMES``)."""
    if dialect not in WIRES:
        raise ValueError(f"unknown dialect {dialect!r} (known: {', '.join(WIRES)})")
    return WIRES[dialect]


def request_url(base_url: str, path: str, query: Sequence[tuple[str, str]] = ()) -> str:
    """``path`` under ``base_url``, with the base URL's own query and then ``query``."""
    u = urllib.parse.urlsplit(base_url)
    pairs = urllib.parse.parse_qsl(u.query, keep_blank_values=True) + list(query)
    return urllib.parse.urlunsplit(
        (u.scheme, u.netloc, u.path.rstrip("/") + path, urllib.parse.urlencode(pairs), "")
    )
