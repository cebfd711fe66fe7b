"""Checks for the RSN criteria (see docs/criteria.md), judged from the wire first.

A truncated reply is a response the gateway finished with ``finish_reason: length``; what it
held (text, reasoning, tool calls) is read from the bytes actually sent. Its continuation is the
first later request whose messages extend the truncated request's messages; the assistant
message the agent sent back for it is the first assistant message among the added ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.checks.wire import WireReply, wire_reply
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.journal import ChatEntry

__all__ = ["message_text"]


def message_text(m: dict[str, Any]) -> str:
    """The text of a message's content (a string or a list of text parts)."""
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text") or "" for p in c if isinstance(p, dict))
    return ""


def _truncations(
    ev: Evidence,
) -> Iterator[tuple[ChatEntry, WireReply, dict[str, Any] | None, str]]:
    """(truncated entry, what it carried, the assistant message sent back or None, why)."""
    chat = ev.chat()
    for i, e in enumerate(chat):
        if response_of(e).get("status") != 200 or is_failed(e):
            continue
        reply = wire_reply(e)
        if reply.finish_reason != "length":
            continue
        before = (e.get("body") or {}).get("messages") or []
        cont = next(
            (
                x
                for x in chat[i + 1 :]
                if len((x.get("body") or {}).get("messages") or []) > len(before)
                and ((x.get("body") or {}).get("messages") or [])[: len(before)] == before
            ),
            None,
        )
        if cont is None:
            yield e, reply, None, "no later request continued the conversation"
            continue
        added = cont["body"]["messages"][len(before) :]
        msg = next((m for m in added if m.get("role") == "assistant"), None)
        yield e, reply, msg, f"continuation seq {cont.get('seq')}"


def _same_reasoning(sent: object, wire: str) -> bool:
    return isinstance(sent, str) and (sent == wire or sent.strip() == wire.strip())


@check("RSN-01", final=True)
def check_rsn_01(ev: Evidence) -> Finding:
    """A reasoning-only truncated reply comes back with reasoning_content and explanatory text."""
    expected = (
        "after a truncated reply holding only reasoning, the next request carries that "
        "assistant message with reasoning_content and a non-empty content that is not a copy "
        "of the reasoning"
    )
    judged = 0
    for e, reply, msg, where in _truncations(ev):
        if not reply.reasoning or reply.text or reply.tool_calls:
            continue
        if where.startswith("no later"):
            continue  # the agent did not continue; TRN-01 judges that
        judged += 1
        seq = e.get("seq")
        if msg is None:
            return failed(expected, f"{where} dropped the reasoning-only reply of seq {seq}")
        if not _same_reasoning(msg.get("reasoning_content"), reply.reasoning):
            got = msg.get("reasoning_content")
            said = (
                "has no reasoning_content"
                if got is None
                else f"reasoning_content {str(got)[:60]!r}"
            )
            return failed(expected, f"{where}: {said}, not the reasoning of seq {seq}")
        text = message_text(msg).strip()
        if not text:
            return failed(expected, f"{where}: the assistant message has empty content")
        if reply.reasoning.strip() in text:
            return failed(expected, f"{where}: content is a copy of the reasoning")
    if not judged:
        return not_applicable(expected, "no reasoning-only truncated reply was continued")
    return passed(expected, f"{judged} reasoning-only truncation(s) carried back with a note")


@check("RSN-02", final=True)
def check_rsn_02(ev: Evidence) -> Finding:
    """A truncated reply with text comes back with its reasoning_content and its real text."""
    expected = (
        "after a truncated reply with text and reasoning, the assistant message sent back has "
        "reasoning_content and content equal to the text received"
    )
    judged = 0
    for e, reply, msg, where in _truncations(ev):
        if not reply.reasoning or not reply.text or where.startswith("no later"):
            continue
        judged += 1
        seq = e.get("seq")
        if msg is None:
            return failed(expected, f"{where} dropped the truncated reply of seq {seq}")
        if not _same_reasoning(msg.get("reasoning_content"), reply.reasoning):
            return failed(expected, f"{where}: reasoning_content missing or not that of seq {seq}")
        if message_text(msg) != reply.text:
            return failed(
                expected,
                f"{where}: content {message_text(msg)[:60]!r} is not the text received "
                f"{reply.text[:60]!r}",
            )
    if not judged:
        return not_applicable(expected, "no truncated reply with text and reasoning was continued")
    return passed(expected, f"{judged} truncated reply(ies) sent back with reasoning_content")


def _empty_assistant(m: dict[str, Any]) -> bool:
    return (
        m.get("role") == "assistant"
        and not message_text(m).strip()
        and not m.get("tool_calls")
        and not (m.get("reasoning_content") or "").strip()
    )


@check("RSN-03", final=True)
def check_rsn_03(ev: Evidence) -> Finding:
    """No assistant message with no text, no tool calls and no reasoning is ever sent."""
    expected = "no assistant message without text, tool calls and reasoning is sent"
    for e in ev.chat():
        for i, m in enumerate((e.get("body") or {}).get("messages") or []):
            if isinstance(m, dict) and _empty_assistant(m):
                return failed(
                    expected, f"seq {e.get('seq')} message {i} is an empty assistant turn"
                )
    chances = []
    hist = ev.history
    if any(_empty_assistant(m) for m in hist):
        chances.append("an empty assistant turn in the history")
    n = sum(
        1
        for e in ev.chat()
        if response_of(e).get("status") == 200
        and response_of(e).get("end") == "complete"
        and wire_reply(e).empty
    )
    if n:
        chances.append(f"{n} reply(ies) with nothing in them")
    if not chances:
        return not_applicable(expected, "the run produced no empty assistant turn to filter")
    return passed(expected, f"none sent despite {' and '.join(chances)}")
