"""Wire codecs of the reference agent: the common interface and the chat-completions identity.

Theory of operation: the recovery core speaks one neutral language, which is the shape of the
OpenAI chat-completions API: request bodies with ``messages`` (system, user, assistant with
``content``, ``reasoning_content`` and ``tool_calls``, tool results), ``max_tokens``, ``tools``
and ``stream``; replies as chat chunks (``choices[0].delta``, ``finish_reason``, ``usage``,
``[DONE]``, ``{"error": ...}``) or a chat JSON body. A :class:`Codec` translates at the edge,
in the driver: :meth:`Codec.request` renders a neutral body in its dialect, a
:class:`Decoder` turns each server-sent event's data into zero or more neutral chunks, and
:meth:`Codec.full_body` turns a non-streaming 200 body into a neutral one. Error bodies pass
through unchanged: the core reads their status, headers and text.

Vendor credentials (Anthropic thinking signatures, Responses reasoning items) have no place in
the neutral messages. A codec remembers those it received, keyed by the model and the reasoning
text, and renders them again only for that same model (:class:`Credentials`). Anything else it
is asked to send -- history given in ``start.history``, or a turn carried over to another model
-- is handed over by seed 002's rules (:func:`handed_over`): the thinking text is kept as
ordinary content, every credential is dropped, identifiers the target refuses are re-made.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = [
    "ChatCodec",
    "Codec",
    "Credentials",
    "Decoder",
    "PRIVATE_CALL_KEYS",
    "PRIVATE_MESSAGE_KEYS",
    "chunk",
    "handed_over",
    "safe_id",
]

# Vendor-private keys: only the model (and vendor) that produced them can read them.
PRIVATE_MESSAGE_KEYS = frozenset(
    {
        "signature",
        "reasoning_signature",
        "thinking_blocks",
        "encrypted_content",
        "thought_signature",
        "thoughtSignature",
    }
)
PRIVATE_CALL_KEYS = frozenset({"extra_content", "thought_signature", "thoughtSignature"})

_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Decoder(Protocol):
    def feed(self, data: str) -> list[str]:
        """One server-sent event's data -> the neutral chunks (``data`` strings) it stands for."""
        ...


class Codec(Protocol):
    name: str
    path: str  # appended to the base URL

    def headers(self, api_key: str) -> dict[str, str]: ...

    def request(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def decoder(self, model: str) -> Decoder: ...

    def full_body(self, text: str, model: str) -> str: ...


def chunk(
    delta: Mapping[str, Any] | None = None,
    finish: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> str:
    """A neutral streaming chunk (a chat-completions chunk) as the core reads it."""
    obj: dict[str, Any] = {"choices": []}
    if delta is not None or finish is not None:
        obj["choices"] = [{"index": 0, "delta": dict(delta or {}), "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = dict(usage)
    return json.dumps(obj, ensure_ascii=False)


def safe_id(call_id: Any, prefix: str) -> str:
    """``call_id`` when it is a portable identifier, else one made from it, stable per input.

    Seed 002: identifiers are rendered for the target vendor; a stable derivation keeps a call
    and its result paired.
    """
    s = str(call_id or "")
    if _ID_OK.match(s):
        return s
    return prefix + hashlib.sha256(s.encode()).hexdigest()[:24]


class Credentials:
    """Vendor credentials received with replies: (model, reasoning text) -> opaque blocks."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def remember(self, model: str, reasoning: str, blocks: list[dict[str, Any]]) -> None:
        if reasoning and blocks:
            self._by_key[(model, reasoning)] = [dict(b) for b in blocks]

    def recall(self, model: str, reasoning: str) -> list[dict[str, Any]] | None:
        """The blocks to send back with ``reasoning`` to ``model``, or None (hand it over)."""
        found = self._by_key.get((model, reasoning))
        return [dict(b) for b in found] if found else None


def handed_over(msg: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant message for a model that did not produce it (seed 002's hand-over rules).

    Credentials are dropped, on the message and on its tool calls; the thinking text stays, as
    ordinary content placed before the answer; the result has no ``reasoning_content``.
    """
    out = {k: v for k, v in msg.items() if k not in PRIVATE_MESSAGE_KEYS}
    reasoning = str(out.pop("reasoning_content", "") or "")
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = [
            {k: v for k, v in c.items() if k not in PRIVATE_CALL_KEYS} if isinstance(c, dict) else c
            for c in out["tool_calls"]
        ]
    if reasoning.strip():
        out["handed_over_reasoning"] = reasoning
    return out


def text_of(content: Any) -> str:
    """The text of a chat ``content`` (a string or text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return ""


class _Identity:
    def feed(self, data: str) -> list[str]:
        return [data]


class ChatCodec:
    """OpenAI chat completions: the neutral language itself, sent and read as it is."""

    name = "openai_chat"
    path = "/chat/completions"

    def headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return dict(body)

    def decoder(self, model: str) -> Decoder:
        return _Identity()

    def full_body(self, text: str, model: str) -> str:
        return text
