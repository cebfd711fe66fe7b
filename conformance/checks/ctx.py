"""Checks for the CTX criteria (context-layer recovery), judged from the wire.

Theory of operation: prompt too long is a failed attempt whose error says
``context_length_exceeded`` (contracts §5) or "prompt is too long"; a compaction request asks
for a summary of the conversation in the agent's own words (``Evidence.is_compaction``, the
gateway's rule: ``fakes.compaction``); every other chat attempt is a main request.
Tool-call pairing is read from each main request's ``messages``: the results of an assistant
message's tool calls must follow it directly, one ``tool`` message per call id.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.compaction import message_text
from fakes.journal import ChatEntry

__all__ = [
    "MEDIA_PART_TYPES",
    "is_media_error",
    "is_prompt_too_long",
    "unpaired_calls",
]

# final=True (see registry.py), all of them: a request resent verbatim, sent unpaired or with
# media, a second compaction or a request after the second overflow; what must eventually follow
# is judged once the turn ended.

MEDIA_PART_TYPES = frozenset(
    {"image_url", "input_image", "image", "file", "input_file", "input_audio", "document"}
)


def _sent(entry: ChatEntry) -> str:
    return str(response_of(entry).get("sent") or "")


def _messages(entry: ChatEntry) -> list[Any]:
    msgs = (entry.get("body") or {}).get("messages")
    return msgs if isinstance(msgs, list) else []


def is_prompt_too_long(entry: ChatEntry) -> bool:
    if not is_failed(entry):
        return False
    text = _sent(entry).lower()
    return "context_length_exceeded" in text or "prompt is too long" in text


def is_media_error(entry: ChatEntry) -> bool:
    """413, or a 400 saying an image / PDF / media / file is too large."""
    if not is_failed(entry):
        return False
    status = response_of(entry).get("status")
    text = _sent(entry).lower()
    named = any(w in text for w in ("image", "pdf", "media", "file", "attachment"))
    big = any(w in text for w in ("too large", "too big", "exceeds", "size"))
    return status == 413 or (status == 400 and named and big)


def _media_parts(messages: list[Any]) -> int:
    n = 0
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            n += sum(1 for p in c if isinstance(p, dict) and p.get("type") in MEDIA_PART_TYPES)
    return n


def unpaired_calls(messages: list[Any]) -> list[str]:
    """Ids of assistant tool calls not answered by a tool message right after them."""
    missing: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i] if isinstance(messages[i], dict) else {}
        i += 1
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        if not calls:
            continue
        answered: set[str] = set()
        while (
            i < len(messages)
            and isinstance(messages[i], dict)
            and (messages[i].get("role") == "tool")
        ):
            answered.add(str(messages[i].get("tool_call_id")))
            i += 1
        missing += [str(c.get("id")) for c in calls if str(c.get("id")) not in answered]
    return missing


def _main(ev: Evidence) -> list[ChatEntry]:
    return [e for e in ev.chat() if not ev.is_compaction(e)]


@check("CTX-01", final=True)
def check_ctx_01(ev: Evidence) -> Finding:
    """Prompt too long: not resent verbatim; at most one compaction, then a retry."""
    expected = (
        "after prompt too long: no verbatim resend, one reactive compaction per user turn, "
        "then a retry"
    )
    chat = ev.chat()
    first = next(
        (i for i, e in enumerate(chat) if not ev.is_compaction(e) and is_prompt_too_long(e)), None
    )
    if first is None:
        return not_applicable(expected, "no prompt-too-long error in this run")
    p = chat[first]
    later = chat[first + 1 :]
    for e in later:
        if not ev.is_compaction(e) and _messages(e) == _messages(p):
            return failed(
                expected, f"seq {e.get('seq')} resends the messages of seq {p.get('seq')} verbatim"
            )
    compactions = [e for e in later if ev.is_compaction(e)]
    if len(compactions) > 1:
        return failed(
            expected,
            f"{len(compactions)} compaction requests in one user turn "
            f"(seq {[e.get('seq') for e in compactions]})",
        )
    size = len(message_text(_messages(p)))
    if not turn_over(ev):
        # A resend verbatim or a second compaction is final; the recovery may still come.
        return not_applicable(expected, "the turn has not ended: the recovery may still come")
    if not compactions:
        smaller = [e for e in later if len(message_text(_messages(e))) < size]
        if smaller:
            return passed(
                expected,
                f"seq {smaller[0].get('seq')} retried with a reduced "
                "context (no compaction request)",
            )
        return failed(expected, f"no compaction and no reduced retry after seq {p.get('seq')}")
    c = compactions[0]
    retry = [
        e
        for e in later
        if not ev.is_compaction(e) and e.get("t_arrival_ns", 0) > c.get("t_arrival_ns", 0)
    ]
    if is_failed(c):
        return passed(expected, f"compaction seq {c.get('seq')} failed; no second attempt")
    if not retry:
        return failed(expected, f"compaction seq {c.get('seq')} succeeded but no retry followed")
    return passed(
        expected,
        f"prompt too long at seq {p.get('seq')}, compaction seq "
        f"{c.get('seq')}, retry seq {retry[0].get('seq')}",
    )


@check("CTX-02", final=True)
def check_ctx_02(ev: Evidence) -> Finding:
    """A second overflow after the compaction ends the turn with the original error."""
    expected = (
        "a second prompt too long after the compaction: no further request, the turn ends "
        "with the prompt-too-long error shown"
    )
    chat = ev.chat()
    ptl = [i for i, e in enumerate(chat) if not ev.is_compaction(e) and is_prompt_too_long(e)]
    second = next((j for j in ptl[1:] if any(ev.is_compaction(e) for e in chat[ptl[0] : j])), None)
    if second is None:
        return not_applicable(expected, "no second prompt-too-long after a compaction")
    after = chat[second + 1 :]
    if after:
        what = "compaction" if ev.is_compaction(after[0]) else "request"
        return failed(
            expected,
            f"{what} seq {after[0].get('seq')} after the second overflow "
            f"(seq {chat[second].get('seq')})",
        )
    if not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the error may still be shown")
    errors = ev.errors()
    if not errors:
        return failed(expected, "no error was shown to the user")
    err = errors[-1]
    msg = str(err.get("message") or "")
    kind = err.get("kind")
    if (
        kind != "prompt_too_long"
        and "context_length_exceeded" not in msg
        and "prompt is too long" not in msg.lower()
    ):
        return failed(expected, f"the error shown is {kind!r}: {msg[:160]!r}")
    ends = ev.turn_ends()
    if ends and ends[-1].get("reason") != "error":
        return failed(expected, f"the turn ended {ends[-1].get('reason')!r}")
    return passed(
        expected,
        f"second overflow at seq {chat[second].get('seq')}; nothing more "
        f"sent; error {kind!r} shown",
    )


@check("CTX-03", final=True)
def check_ctx_03(ev: Evidence) -> Finding:
    """Every request pairs each tool call with a result; unpaired history calls are repaired."""
    expected = "every tool call in a request is followed by its result (placeholders for gaps)"
    history = ev.history
    gaps = unpaired_calls(history)
    training = bool(ev.config.get("training_data_mode"))
    main = _main(ev)
    for e in main:
        missing = unpaired_calls(_messages(e))
        if missing:
            return failed(
                expected,
                f"seq {e.get('seq')} sends tool call(s) {listed(missing, quoted=True)} without a result",
            )
    if not gaps:
        return not_applicable(expected, "the history has no tool call without a result")
    if training:
        return not_applicable(expected, "training-data mode: repair is refused (CTX-04)")
    if not main and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the request may still come")
    if not main:
        return failed(
            expected,
            f"the history's unpaired call(s) {listed(gaps, quoted=True)} were not repaired: no request was sent",
        )
    for e in main:
        empty = [
            m.get("tool_call_id")
            for m in _messages(e)
            if isinstance(m, dict)
            and m.get("role") == "tool"
            and m.get("tool_call_id") in gaps
            and not message_text([m]).strip()
        ]
        if empty:
            return failed(
                expected, f"seq {e.get('seq')}: empty placeholder for {listed(empty, quoted=True)}"
            )
    # Answered, not dropped: the first request of the conversation (the one carrying the
    # history's first message; an auxiliary request may come before it) still carries the
    # history as given, where a later one may carry a compaction's summary instead.
    opening = message_text(history[:1])
    first = next((e for e in main if opening in (message_text([m]) for m in _messages(e))), main[0])
    answered = {
        m.get("tool_call_id")
        for m in _messages(first)
        if isinstance(m, dict) and m.get("role") == "tool"
    }
    dropped = [g for g in gaps if g not in answered]
    if dropped:
        return failed(
            expected,
            f"seq {first.get('seq')}: the unpaired call(s) {listed(dropped, quoted=True)} were dropped from the "
            "history, not answered with a placeholder",
        )
    return passed(
        expected,
        f"{len(main)} request(s); unpaired call(s) {listed(gaps, quoted=True)} answered in each",
    )


@check("CTX-04", final=True)
def check_ctx_04(ev: Evidence) -> Finding:
    """In training-data mode, no placeholder result is fabricated for an unpaired call."""
    expected = "training-data mode: no request carries a fabricated result for an unpaired call"
    if not ev.config.get("training_data_mode"):
        return not_applicable(expected, "training_data_mode is not set")
    gaps = set(unpaired_calls(ev.history))
    if not gaps:
        return not_applicable(expected, "the history has no tool call without a result")
    main = _main(ev)
    for e in main:
        made = [
            m.get("tool_call_id")
            for m in _messages(e)
            if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id") in gaps
        ]
        if made:
            return failed(
                expected,
                f"seq {e.get('seq')} carries fabricated result(s) for {listed(made, quoted=True)}",
            )
    if not main:
        errors = ev.errors()
        shown = f"; error shown: {str(errors[-1].get('message'))[:120]!r}" if errors else ""
        return passed(expected, f"no request sent{shown}")
    return passed(
        expected,
        f"{len(main)} request(s), none with a result for {listed(sorted(gaps), quoted=True)}",
    )


@check("CTX-05", final=True)
def check_ctx_05(ev: Evidence) -> Finding:
    """After a media-too-large error, the request is retried without the media."""
    expected = "after a media-too-large error, the next request is sent without media parts"
    main = _main(ev)
    hit = next(
        (i for i, e in enumerate(main) if is_media_error(e) and _media_parts(_messages(e))),
        None,
    )
    if hit is None:
        return not_applicable(expected, "no media-too-large error on a request carrying media")
    e = main[hit]
    if hit + 1 >= len(main) and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the retry may still come")
    if hit + 1 >= len(main):
        return failed(expected, f"no retry after the media error at seq {e.get('seq')}")
    nxt = main[hit + 1]
    left = _media_parts(_messages(nxt))
    if left:
        return failed(expected, f"seq {nxt.get('seq')} still carries {left} media part(s)")
    return passed(
        expected,
        f"seq {nxt.get('seq')} retried without the "
        f"{_media_parts(_messages(e))} media part(s) of seq {e.get('seq')}",
    )
