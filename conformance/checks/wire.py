"""What the gateway actually sent for a chat attempt, read back from its bytes.

The checks judge what the agent was given, not what the scenario meant to give it: a reply is
parsed from the SSE or JSON the gateway wrote (possibly cut), in the chat-completions shape the
journal is read in (``conformance.judging.canon``). The parse itself lives in ``conformance.judging.wire_reply``
(the evidence reads it too); here is what the checks build on it.
"""

from __future__ import annotations

from conformance.judging.evidence import response_of
from conformance.judging.wire_reply import WireReply, wire_reply
from fakes.journal import ChatEntry

__all__ = ["WireReply", "answer_of", "call_ids", "request_diff", "same_request", "wire_reply"]

# How an attempt without a status ended, in words (the journal's `end`).
_NO_STATUS = {
    "reset": "a connection reset before any response",
    "close": "a connection closed before any response",
    "client_gone": "no response before the agent hung up",
}


def answer_of(entry: ChatEntry) -> str:
    """What an attempt got, for a message: "status 503", or how it failed without one (never
    Python's ``None``)."""
    resp = response_of(entry)
    status = resp.get("status")
    if status is not None:
        return f"status {status}"
    return _NO_STATUS.get(str(resp.get("end")), "a connection failure (no response)")


def call_ids(entry: ChatEntry) -> set[str]:
    """The tool-call ids a response carried, whatever their form (``call_``, ``toolu_``, ...):
    read from the parsed reply, as an agent would, not matched by a pattern."""
    return {c["id"] for c in wire_reply(entry).tool_calls if c["id"]}


def same_request(a: ChatEntry, b: ChatEntry) -> bool:
    """Two attempts carry the same request (the stream flag aside)."""
    return not request_diff(a, b)


def request_diff(a: ChatEntry, b: ChatEntry) -> list[str]:
    """Keys in which two bodies differ, ignoring the stream flag and stream options."""
    ignore = {"stream", "stream_options"}
    ba, bb = a.get("body") or {}, b.get("body") or {}
    return sorted(k for k in (set(ba) | set(bb)) - ignore if ba.get(k) != bb.get(k))
