"""Checks for the TRN area (automatic continuation after a length finish)."""

from __future__ import annotations

from collections.abc import Callable

from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.checks.seed_strings import CONTINUATION_TEXT
from conformance.evidence import Evidence

__all__ = ["CHECKS", "length_finished"]


def length_finished(entry: dict) -> bool:
    """Whether the gateway finished this response with finish_reason length."""
    resp = entry.get("response") or {}
    sent = resp.get("sent") or ""
    return entry.get("fault") == "length" or '"finish_reason": "length"' in sent.replace(
        '"finish_reason":"length"', '"finish_reason": "length"'
    )


def _text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def check_trn_01(ev: Evidence) -> Finding:
    """After a length finish, the next request ends with the exact continuation user message."""
    expected = f"after finish_reason length, a new request whose last message is user {CONTINUATION_TEXT!r}"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if not length_finished(e) or e.get("response", {}).get("status") != 200:
            continue
        # A raised output limit (TRN-07) may resend the same messages first; find a continuation.
        later = chat[i + 1 :]
        if not later:
            return failed(expected, f"no request after the length finish at seq {e.get('seq')}")
        judged += 1
        found = False
        for nxt in later:
            msgs = (nxt.get("body") or {}).get("messages") or []
            if msgs and msgs[-1].get("role") == "user" and _text(msgs[-1]) == CONTINUATION_TEXT:
                found = True
                break
            if len(msgs) > len((e.get("body") or {}).get("messages") or []):
                break
        if not found:
            last = ((later[0].get("body") or {}).get("messages") or [{}])[-1]
            return failed(
                expected,
                f"after seq {e.get('seq')}: next request's last message is "
                f"{last.get('role')!r} {_text(last)[:120]!r}",
            )
    if not judged:
        return not_applicable(expected, "no length finish in this run")
    return passed(expected, f"{judged} continuation(s) with the exact text")


def check_trn_02(ev: Evidence) -> Finding:
    """The continuation text is shown to the user only as meta."""
    expected = "the continuation message appears in the agent's messages only with meta: true"
    on_wire = any(
        _text(m) == CONTINUATION_TEXT
        for b in ev.bodies()
        for m in b.get("messages") or []
        if m.get("role") == "user"
    )
    if not on_wire:
        return not_applicable(expected, "no continuation message was sent on the wire")
    shown = [m for m in ev.events_of("message") if (m.get("text") or "") == CONTINUATION_TEXT]
    if not shown:
        return failed(expected, "the continuation message was never reported as a meta message")
    visible = [m for m in shown if m.get("meta") is not True]
    if visible:
        return failed(expected, f"continuation message {visible[0].get('id')!r} shown without meta")
    return passed(expected, f"{len(shown)} continuation message(s), all meta")


CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "TRN-01": check_trn_01,
    "TRN-02": check_trn_02,
}


def check_trn_04(ev: Evidence) -> Finding:
    """The 4th consecutive truncation ends the turn with an error: no 4th continuation."""
    expected = "after 3 continuations, the 4th length finish ends the turn with an error"
    chat = ev.chat()
    run = 0
    for i, e in enumerate(chat):
        if not length_finished(e):
            run = 0
            continue
        run += 1
        if run == 4:
            later = [
                x
                for x in chat[i + 1 :]
                if ((x.get("body") or {}).get("messages") or [{}])[-1].get("content")
                == CONTINUATION_TEXT
            ]
            if later:
                return failed(expected, f"continued again at seq {later[0].get('seq')}")
            if not ev.errors():
                return failed(expected, "no error shown after the 4th truncation")
            return passed(
                expected, f"stopped after 4 truncations: {ev.errors()[0].get('message')!r}"
            )
    if run and run < 4:
        return not_applicable(expected, f"only {run} consecutive truncation(s) in this run")
    return not_applicable(expected, "no run of 4 consecutive truncations")


CHECKS["TRN-04"] = check_trn_04
