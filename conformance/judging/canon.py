"""A canonical chat-completions view of journal entries recorded in other wire dialects.

Theory of operation: the checks read chat-completions shapes, both in request bodies
(``messages`` with ``role``/``content``/``tool_calls``/``tool_call_id``/``reasoning_content``,
``max_tokens``, ``tools``, ``stream``, ``model``) and in the bytes the gateway sent (chat SSE
``data:`` chunks ending in ``data: [DONE]``, or a chat JSON body). An entry of the Anthropic
Messages or OpenAI Responses dialect is translated into the entry a chat-completions exchange
carrying the same content would have left: its request body becomes a chat body and the SSE
events (or JSON body) it was answered with are re-rendered as chat chunks, event for event.

Only complete SSE events count (an event ends at a blank line); a partial trailing event is
dropped and kept under ``raw["dropped"]``. Byte-level fields (``sent_bytes``, ``full_bytes``,
``cut_at_byte``, ``end``, timings, headers) are left as they are: they describe the wire, and
failure detection rests on them. The original body and bytes stay under ``raw``. Vendor
credentials in the history (thinking ``signature``, ``redacted_thinking`` data,
``encrypted_content``) are kept on the canonical assistant message under vendor-private keys so
that a check can still see whether they were forwarded.

The translation is pure: the input journal and its entries are never modified. Each dialect
reads its own bodies and replies back (``read_body``, ``stream_reader``, ``read_json`` of its
module in ``fakes.dialects``); this module picks the dialect and keeps the entry's wire fields.
"""

from __future__ import annotations

import json
from typing import Any

from fakes.dialects import CHAT, REGISTRY, Dialect
from fakes.dialects._chatview import dumps, parse_block, read_stream, sse_blocks
from fakes.faults import FAULTS

__all__ = [
    "CHAT",
    "canonical_journal",
    "canonical_entry",
    "chat_body",
    "chat_sent",
    "anthropic_body",
    "responses_body",
]


def _read_back(dialect: Any) -> Dialect | None:
    """The module that reads ``dialect`` back; None for chat (its own view) and unknown names."""
    if dialect == CHAT or not isinstance(dialect, str):
        return None
    return REGISTRY.get(dialect)


def anthropic_body(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages request body as a chat-completions body."""
    return REGISTRY["anthropic_messages"].read_body(body)


def responses_body(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses request body as a chat-completions body."""
    return REGISTRY["openai_responses"].read_body(body)


def chat_body(body: Any, dialect: str) -> Any:
    """A request body of ``dialect`` as a chat-completions body (other values unchanged)."""
    d = _read_back(dialect)
    if not isinstance(body, dict) or d is None:
        return body
    return d.read_body(body)


def _stream_sent(sent: str, d: Dialect) -> tuple[str, str, list[int]]:
    """(chat SSE text, dropped partial tail, chat frames written before each dialect block)."""
    return read_stream(sent, d.stream_reader)


def _json_sent(sent: str, d: Dialect, status: int | None) -> str:
    """A JSON body in chat's shape; a body that does not parse (cut) is left as it is."""
    try:
        obj = json.loads(sent)
    except json.JSONDecodeError:
        return sent
    if not isinstance(obj, dict):
        return sent
    if obj.get("type") == "error" and isinstance(obj.get("error"), dict):
        # Anthropic's error envelope; the inner {type, message} is kept (overloaded_error...).
        return dumps({"error": dict(obj["error"])})
    if "error" in obj and "choices" not in obj and obj.get("object") != "response":
        return sent  # already OpenAI-shaped
    if status is not None and status >= 400:
        return sent
    chat = d.read_json(obj)
    return sent if chat is None else dumps(chat)


def chat_sent(sent: str, dialect: str, stream: bool, status: int | None = 200) -> str:
    """The bytes a chat-completions gateway would have sent for ``sent`` (complete events)."""
    d = _read_back(dialect)
    if d is None:
        return sent
    if stream:
        return _stream_sent(sent, d)[0]
    return _json_sent(sent, d, status)


# --- entries ---------------------------------------------------------------------------------


# The symptoms (``fakes.faults.Fault.symptom``) of faults that inject a frame of their own.
_INJECTED = ("malformed_event", "in_band_error")


def _injected_block(sent: str, what: str | None) -> int:
    """Index of the gateway's injected block: an in-band error ends the stream; a malformed
    event is the first block without JSON data (the gateway's own events all carry it)."""
    blocks, _ = sse_blocks(sent)
    if what == "malformed_event":
        for i, block in enumerate(blocks):
            data = parse_block(block)[1]
            if data is None:
                return i
            try:
                json.loads(data)
            except json.JSONDecodeError:
                return i
    return max(len(blocks) - 1, 0)


def canonical_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions view of one journal entry (the entry itself when already chat)."""
    d = _read_back(entry.get("dialect"))
    if d is None or entry.get("kind") != "chat" or "raw" in entry:  # "raw": already canonical
        return entry
    out = dict(entry)
    raw: dict[str, Any] = {"body": entry.get("body"), "sent": None, "dropped": ""}
    out["body"] = chat_body(entry.get("body"), d.NAME)
    resp = entry.get("response")
    if isinstance(resp, dict):
        sent = str(resp.get("sent") or "")
        raw["sent"] = resp.get("sent")
        r = dict(resp)
        if resp.get("stream") and (resp.get("status") or 0) < 400:
            text, tail, before = _stream_sent(sent, d)
            r["sent"], raw["dropped"] = text, tail
            params = entry.get("fault_params")
            fault = FAULTS.get(str(entry.get("fault") or ""))
            what = fault.symptom if fault is not None else None
            if what in _INJECTED and isinstance(params, dict) and before:
                # The injected frame's position re-counted in the chat frames written before it
                # (evidence._injected_after_done reads it). ``after_events`` is a neutral point
                # of the reply, not an index into this dialect's events: find the frame itself.
                n = min(_injected_block(sent, what), len(before) - 1)
                raw["fault_params"] = params
                out["fault_params"] = {**params, "after_events": before[n]}
        else:
            r["sent"] = _json_sent(sent, d, resp.get("status"))
        out["response"] = r
    out["raw"] = raw
    return out


def canonical_journal(journal: dict[str, Any]) -> dict[str, Any]:
    """The journal with every entry in its chat-completions view (chat entries unchanged)."""
    entries = journal.get("entries")
    if not isinstance(entries, list):
        return journal
    return {
        **journal,
        "entries": [canonical_entry(e) if isinstance(e, dict) else e for e in entries],
    }
