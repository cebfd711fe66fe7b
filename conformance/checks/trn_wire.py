"""TRN's wire readers: what a response delivered and how the next request carried it on.

Read from the journal's bytes and request bodies, never from the agent's events, so the TRN
checks judge what was really sent. ``length_finished`` is shared with the TOL and TJS checks.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.seed_strings import CONTINUATION_TEXT
from conformance.judging.evidence import is_failed, response_of
from conformance.judging.wire_reply import wire_reply
from fakes.journal import ChatEntry, Entry

__all__ = [
    "completed",
    "is_continuation",
    "length_finished",
    "messages_of",
    "next_request",
    "output_limit",
    "plain_truncation",
    "produced",
    "recursed",
    "superseded",
    "text_of",
    "tool_truncation",
]


def length_finished(entry: ChatEntry) -> bool:
    """Whether the gateway finished this response with finish_reason length."""
    resp = response_of(entry)
    sent = resp.get("sent") or ""
    return entry.get("fault") == "length" or '"finish_reason": "length"' in sent.replace(
        '"finish_reason":"length"', '"finish_reason": "length"'
    )


def text_of(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def produced(entry: ChatEntry) -> dict[str, Any]:
    """What one response delivered, read back from the bytes the gateway sent
    (``conformance.judging.wire_reply``): ``content``, ``reasoning``, ``tool_calls`` (list of ``{id,
    name, arguments}``) and ``finish_reason``."""
    r = wire_reply(entry)
    return {
        "content": r.text,
        "reasoning": r.reasoning,
        "tool_calls": r.tool_calls,
        "finish_reason": r.finish_reason,
    }


def messages_of(entry: Entry) -> list[dict[str, Any]]:
    return (entry.get("body") or {}).get("messages") or []


def completed(entry: ChatEntry) -> bool:
    return response_of(entry).get("status") == 200 and not is_failed(entry)


def output_limit(entry: ChatEntry) -> int | None:
    body = entry.get("body") or {}
    v = body.get("max_tokens", body.get("max_completion_tokens"))
    return v if isinstance(v, int) else None


def plain_truncation(entry: ChatEntry) -> bool:
    """A completed length finish without tool calls (the kind that consumes the count)."""
    return completed(entry) and length_finished(entry) and not produced(entry)["tool_calls"]


def tool_truncation(entry: ChatEntry) -> bool:
    return completed(entry) and length_finished(entry) and bool(produced(entry)["tool_calls"])


def next_request(chat: list[ChatEntry], i: int) -> ChatEntry | None:
    """The first later request that does not resend chat[i]'s messages (retries, a raised
    output limit), i.e. the one that carries the conversation forward."""
    for e in chat[i + 1 :]:
        if messages_of(e) != messages_of(chat[i]):
            return e
    return None


def superseded(chat: list[ChatEntry], i: int) -> bool:
    """chat[i]'s reply was thrown away: the very next request resends the same messages."""
    return i + 1 < len(chat) and messages_of(chat[i + 1]) == messages_of(chat[i])


def recursed(chat: list[ChatEntry], i: int) -> ChatEntry | None:
    """The request that continued after chat[i], if the conversation was carried forward."""
    nxt = next_request(chat, i)
    if nxt is None:
        return None
    before = messages_of(chat[i])
    return nxt if messages_of(nxt)[: len(before)] == before else None


def is_continuation(m: dict[str, Any]) -> bool:
    return m.get("role") == "user" and text_of(m) == CONTINUATION_TEXT
