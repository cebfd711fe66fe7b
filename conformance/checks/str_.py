"""Checks for the STR area (stream failure and the non-streaming fallback).

A streaming attempt "broke after headers" when it got a 200 and the gateway then cut, stalled,
ended it without a finish marker, or sent a malformed or in-band error event. The fallback is the
next chat attempt: it must be non-streaming and carry the same messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.evidence import Evidence, is_failed

__all__ = ["CHECKS", "broke_after_headers"]

MID_STREAM_FAULTS = frozenset(
    {"cut", "stall", "end_without_finish", "malformed_event", "in_band_error"}
)
_TOOL_ID = re.compile(r'"id"\s*:\s*"(call[^"]*)"')


def broke_after_headers(entry: dict, faults: frozenset[str] = MID_STREAM_FAULTS) -> bool:
    resp = entry.get("response") or {}
    return (
        Evidence.mode(entry)
        and resp.get("status") == 200
        and entry.get("fault") in faults
        and is_failed(entry)
    )


def _same_request(a: dict, b: dict) -> list[str]:
    """Keys in which two bodies differ, ignoring the stream flag and stream options."""
    ignore = {"stream", "stream_options"}
    ba, bb = a.get("body") or {}, b.get("body") or {}
    return sorted(k for k in (set(ba) | set(bb)) - ignore if ba.get(k) != bb.get(k))


def _fallback(ev: Evidence, faults: frozenset[str], label: str) -> Finding:
    expected = f"after {label}, the same request is resent once with stream: false"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e, faults):
            continue
        judged += 1
        if i + 1 >= len(chat):
            return failed(expected, f"no request after the broken stream at seq {e.get('seq')}")
        nxt = chat[i + 1]
        if Evidence.mode(nxt):
            return failed(expected, f"seq {nxt.get('seq')} after the broken stream is streaming")
        diff = _same_request(e, nxt)
        if diff:
            return failed(expected, f"fallback seq {nxt.get('seq')} differs in {diff}")
    if not judged:
        return not_applicable(expected, f"no stream broke by {sorted(faults)} in this run")
    return passed(expected, f"{judged} fallback(s) with the same messages, stream false")


def check_str_01(ev: Evidence) -> Finding:
    return _fallback(ev, frozenset({"cut", "stall"}), "a stream failing after headers")


def check_str_08(ev: Evidence) -> Finding:
    return _fallback(ev, frozenset({"end_without_finish"}), "a stream ending without finish")


def check_str_14(ev: Evidence) -> Finding:
    return _fallback(ev, frozenset({"malformed_event"}), "a malformed SSE event")


def check_str_09(ev: Evidence) -> Finding:
    """A healthy stream is never followed by a non-streaming resend of the same request."""
    expected = "a complete stream with finish_reason is not resent with stream: false"
    chat = ev.chat()
    healthy = 0
    for i, e in enumerate(chat):
        if not Evidence.mode(e) or is_failed(e):
            continue
        healthy += 1
        for later in chat[i + 1 :]:
            if not Evidence.mode(later) and not _same_request(e, later):
                return failed(expected, f"healthy seq {e.get('seq')} resent at {later.get('seq')}")
    if not healthy:
        return not_applicable(expected, "no healthy streaming response in this run")
    return passed(expected, f"{healthy} healthy stream(s), none resent")


def check_str_15(ev: Evidence) -> Finding:
    """An in-band error event is a failure: the request is made again (either mode)."""
    expected = "after an in-band error event in a 200 stream, the request is made again"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if e.get("fault") != "in_band_error":
            continue
        judged += 1
        again = [x for x in chat[i + 1 :] if not _same_request(e, x)]
        if not again:
            return failed(expected, f"seq {e.get('seq')} was treated as a finished turn")
    if not judged:
        return not_applicable(expected, "no in-band error in this run")
    return passed(expected, f"{judged} in-band error(s), each followed by a new attempt")


def check_str_03(ev: Evidence) -> Finding:
    """Tool calls of a broken stream are never executed before a good response carries them."""
    expected = "no tool call from a failed streaming attempt is executed"
    chat = ev.chat()
    tools = ev.tool_entries()
    judged = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e):
            continue
        ids = set(_TOOL_ID.findall((e.get("response") or {}).get("sent") or ""))
        if not ids:
            continue
        judged += 1
        good = next((x for x in chat[i + 1 :] if not is_failed(x)), None)
        good_ids = set(_TOOL_ID.findall(((good or {}).get("response") or {}).get("sent") or ""))
        good_end = Evidence.end_ns(good) if good else None
        for t in tools:
            if t.get("call_id") not in ids:
                continue
            if t.get("call_id") not in good_ids or good_end is None:
                return failed(
                    expected, f"tool call {t.get('call_id')!r} from seq {e.get('seq')} ran"
                )
            if t.get("t_arrival_ns", 0) < good_end:
                return failed(
                    expected,
                    f"tool call {t.get('call_id')!r} ran before the fallback response completed",
                )
    if not judged:
        return not_applicable(expected, "no failed stream carried a tool call")
    return passed(expected, f"{judged} failed stream(s) with tool calls; none executed")


CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "STR-01": check_str_01,
    "STR-03": check_str_03,
    "STR-08": check_str_08,
    "STR-09": check_str_09,
    "STR-14": check_str_14,
    "STR-15": check_str_15,
}


def check_str_05(ev: Evidence) -> Finding:
    """Failures before headers: 11 streaming attempts, then one non-streaming fallback."""
    expected = (
        "failures before headers exhaust 11 streaming attempts before one non-streaming "
        "request with the same messages"
    )
    chat = ev.chat()
    first_plain = next((i for i, e in enumerate(chat) if not Evidence.mode(e)), None)
    streamed = chat[: first_plain if first_plain is not None else len(chat)]
    early = [e for e in streamed if is_failed(e) and (e.get("response") or {}).get("status") != 200]
    if not early:
        return not_applicable(expected, "no streaming failure before headers in this run")
    if not all(is_failed(e) for e in streamed):
        return not_applicable(expected, "a streaming attempt succeeded; no fallback needed")
    if len(streamed) != 11:
        return failed(expected, f"{len(streamed)} streaming attempts before the fallback")
    if first_plain is None:
        return failed(expected, "no non-streaming request after 11 streaming failures")
    diff = _same_request(streamed[-1], chat[first_plain])
    if diff:
        return failed(expected, f"the fallback differs in {diff}")
    return passed(
        expected, f"11 streaming attempts, then non-streaming seq {chat[first_plain].get('seq')}"
    )


CHECKS["STR-05"] = check_str_05
