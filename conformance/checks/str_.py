"""Checks for the STR area (stream failure and the non-streaming fallback).

A streaming attempt "broke after headers" when it got a 200 and the gateway then cut, stalled,
ended it without a finish marker, or sent a malformed or in-band error event. The fallback is the
next chat attempt: it must be non-streaming and carry the same messages.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.wire import WireReply, call_ids, request_diff, same_request, wire_reply
from conformance.judging.evidence import (
    RETRYABLE_STATUSES,
    Evidence,
    is_failed,
    response_of,
    symptom,
)
from conformance.judging.timing import BEYOND_LOAD_S
from fakes.faults import FAULTS
from fakes.journal import ChatEntry

# WireReply, same_request and wire_reply live in conformance.checks.wire; named here as before.
__all__ = [
    "ATTEMPTS_PER_MODE",
    "WireReply",
    "broke_after_headers",
    "same_request",
    "turn_reason",
    "wire_reply",
]

# final=True (see registry.py): a wrong next request, a resend, attempts past a budget. Left
# out: STR-11 (usage is recorded by the end), STR-15 (its only failure is a re-attempt that never
# came). STR-02, -04, -06 and -07, judged on the agent's events, are in str_events.py.

# Attempts one request may take in one mode: the first plus RTY-04's retries (10, so 11).
ATTEMPTS_PER_MODE = 1 + int(by_id("RTY-04").numbers["retries"])

# What a stream can meet after a 200 (``Fault.symptom``): the faults that break a stream.
MID_STREAM = frozenset({"broken_stream", "no_finish", "malformed_event", "in_band_error"})

# Nominal seconds without a new event that no idle watchdog is expected to act on (the reference
# agent's waits 60 s; STR-10's scenarios judge a 330 s idle limit). A stream whose fault leaves a
# client that long without one (a stall; a slow, re-chunked or paced delivery) may be abandoned
# as stalled, at whatever moment the agent's clock says: STR-09 leaves it out.
WATCHDOG_FLOOR_S = 10.0


def broke_after_headers(entry: ChatEntry, symptoms: frozenset[str] = MID_STREAM) -> bool:
    resp = response_of(entry)
    return (
        Evidence.mode(entry)
        and resp.get("status") == 200
        and symptom(entry) in symptoms
        and is_failed(entry)
    )


def _fallback(ev: Evidence, symptoms: frozenset[str], label: str) -> Finding:
    expected = f"after {label}, the same request is resent once with stream: false"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e, symptoms):
            continue
        if i + 1 >= len(chat) and not turn_over(ev):
            continue  # the fallback may still come
        judged += 1
        if i + 1 >= len(chat):
            return failed(expected, f"no request after the broken stream at seq {e.get('seq')}")
        nxt = chat[i + 1]
        if Evidence.mode(nxt):
            return failed(expected, f"seq {nxt.get('seq')} after the broken stream is streaming")
        diff = request_diff(e, nxt)
        if diff:
            return failed(expected, f"fallback seq {nxt.get('seq')} differs in {diff}")
    if not judged:
        return not_applicable(
            expected, f"no stream broke by {listed(sorted(symptoms))} in this run"
        )
    return passed(expected, f"{judged} fallback(s) with the same messages, stream false")


@check("STR-01", final=True)
def check_str_01(ev: Evidence) -> Finding:
    return _fallback(ev, frozenset({"broken_stream"}), "a stream failing after headers")


@check("STR-08", final=True)
def check_str_08(ev: Evidence) -> Finding:
    return _fallback(ev, frozenset({"no_finish"}), "a stream ending without finish")


@check("STR-14", final=True)
def check_str_14(ev: Evidence) -> Finding:
    return _fallback(ev, frozenset({"malformed_event"}), "a malformed SSE event")


@check("STR-09", final=True)
def check_str_09(ev: Evidence) -> Finding:
    """A healthy stream is never followed by a non-streaming resend of the same request, and
    one the gateway only re-chunked or paced (``Fault.reshapes``) shows as the reply it carried:
    an agent must show the same reply however the stream came, and must not hang up on it
    before its finish (with no user abort)."""
    expected = (
        "a complete stream with finish_reason is not resent with stream: false; a re-chunked or "
        "paced one is read to its finish and shows the text it carried"
    )
    chat = ev.chat()
    healthy = 0
    for i, e in enumerate(chat):
        if not Evidence.mode(e) or is_failed(e) or _slow(e) or _in_flight(e):
            continue
        healthy += 1
        for later in chat[i + 1 :]:
            if not Evidence.mode(later) and not request_diff(e, later):
                return failed(expected, f"healthy seq {e.get('seq')} resent at {later.get('seq')}")
    if not healthy:
        return not_applicable(expected, "no healthy streaming response in this run")
    left = _reshaped_left(ev, chat) if turn_over(ev) else None
    if left is not None:
        resp = response_of(left)
        return failed(
            expected,
            f"the agent left seq {left.get('seq')} ({left.get('fault')}) after "
            f"{resp.get('sent_bytes')} of {resp.get('full_bytes')} bytes, before its finish, "
            "with no user abort",
        )
    shown = _reshaped_shown(ev, chat) if turn_over(ev) else []
    for e, wire, texts in shown:
        if wire.strip() not in {t.strip() for t in texts}:
            saw = f"showed {texts[-1]!r}" if texts else "showed no assistant message"
            return failed(
                expected,
                f"seq {e.get('seq')} ({e.get('fault')}) carried {wire!r}; the agent {saw}",
            )
    extra = f"; {len(shown)} re-chunked or paced, shown as carried" if shown else ""
    return passed(expected, f"{healthy} healthy stream(s), none resent{extra}")


def _in_flight(e: ChatEntry) -> bool:
    """Whether the response was still being written when the journal was read (an agent that
    hangs up ends its turn before the gateway's next write finds it gone): its record still
    reads as it began, not as it ended, so it is not known healthy."""
    return response_of(e).get("t_end_ns") is None


def _slow(e: ChatEntry) -> bool:
    """Whether the fault left the client ``WATCHDOG_FLOOR_S`` or longer without an event (its
    silence, or its delivery of the bytes the wire carried): a stall to an idle watchdog."""
    fault = FAULTS.get(e.get("fault") or "")
    if fault is None:
        return False
    p = e.get("fault_params") or {}
    sent = str(response_of(e).get("sent") or "").encode()
    return max(fault.silence_s(p) or 0.0, fault.event_gap_s(p, sent)) >= WATCHDOG_FLOOR_S


def _reshaped_left(ev: Evidence, chat: list[ChatEntry]) -> ChatEntry | None:
    """The first stream whose fault only reshaped its delivery that the agent left before the
    wire carried its finish, in a run with no user abort: a client that chokes on how the bytes
    came (a parse error on a cut line) must not escape by hanging up."""
    if ev.abort_step is not None or ev.turn_ends()[-1].get("reason") == "aborted":
        return None  # an abort may be what ended it
    for e in chat:
        fault = FAULTS.get(e.get("fault") or "")
        resp = response_of(e)
        if fault is None or not fault.reshapes or not Evidence.mode(e) or is_failed(e):
            continue
        if (
            _slow(e)
            or _in_flight(e)
            or resp.get("status") != 200
            or resp.get("end") != "client_gone"
        ):
            continue
        if wire_reply(e).finish_reason is None:
            return e
    return None


def _reshaped_shown(ev: Evidence, chat: list[ChatEntry]) -> list[tuple[ChatEntry, str, list[str]]]:
    """Each complete stream whose fault only reshaped its delivery and that carried a finished
    text: the text and the assistant messages the agent showed from its arrival to the end of the next
    attempt (an outside agent's lines are stamped when read, possibly after it asked again)."""
    out: list[tuple[ChatEntry, str, list[str]]] = []
    messages = [m for m in ev.shown_messages() if m.get("role") == "assistant"]
    for i, e in enumerate(chat):
        fault = FAULTS.get(e.get("fault") or "")
        resp = response_of(e)
        if fault is None or not fault.reshapes or not Evidence.mode(e) or is_failed(e):
            continue
        if _slow(e) or _in_flight(e):
            continue
        if resp.get("end") != "complete" or resp.get("sent_bytes") != resp.get("full_bytes"):
            continue  # the client left (an abort): it never had the whole reply
        reply = wire_reply(e)
        if not reply.text or reply.finish_reason not in ("stop", "tool_calls"):
            continue  # nothing to show, or a truncation the agent may join to its continuation
        wire = reply.text
        start = int(e["t_arrival_ns"])
        end = Evidence.end_ns(chat[i + 1]) if i + 1 < len(chat) else None
        texts = [
            str(m.get("text") or "")
            for m in messages
            if m.get("t_ns") is not None
            and m["t_ns"] >= start
            and (end is None or m["t_ns"] <= end)
            and not m.get("meta")
        ]
        out.append((e, wire, texts))
    return out


@check("STR-15")
def check_str_15(ev: Evidence) -> Finding:
    """An in-band error event is a failure: the request is made again (either mode)."""
    expected = "after an in-band error event in a 200 stream, the request is made again"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if symptom(e) != "in_band_error" or not is_failed(e):
            continue  # an error after the stream's own end never reaches a client: no failure
        judged += 1
        again = [x for x in chat[i + 1 :] if not request_diff(e, x)]
        if not again:
            return failed(expected, f"seq {e.get('seq')} was treated as a finished turn")
    if not judged:
        return not_applicable(expected, "no in-band error in this run")
    return passed(expected, f"{judged} in-band error(s), each followed by a new attempt")


@check("STR-03", final=True)
def check_str_03(ev: Evidence) -> Finding:
    """Tool calls of a broken stream are never executed before a good response carries them."""
    expected = "no tool call from a failed streaming attempt is executed"
    chat = ev.chat()
    tools = ev.tool_entries()
    judged = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e):
            continue
        ids = call_ids(e)
        if not ids:
            continue
        judged += 1
        good = next((x for x in chat[i + 1 :] if not is_failed(x)), None)
        good_ids = call_ids(good) if good else set()
        good_end = Evidence.end_ns(good) if good else None
        for t in tools:
            # Only executions after the failed attempt can come from it (an id may recur).
            if t.get("call_id") not in ids or t.get("t_arrival_ns", 0) < e.get("t_arrival_ns", 0):
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


@check("STR-05", final=True)
def check_str_05(ev: Evidence) -> Finding:
    """Failures before headers: 11 streaming attempts, then one non-streaming fallback."""
    n = ATTEMPTS_PER_MODE
    expected = (
        f"failures before headers exhaust {n} streaming attempts before one non-streaming "
        "request with the same messages"
    )
    chat = ev.chat()
    first_plain = next((i for i, e in enumerate(chat) if not Evidence.mode(e)), None)
    streamed = chat[: first_plain if first_plain is not None else len(chat)]
    early = [e for e in streamed if is_failed(e) and response_of(e).get("status") != 200]
    if not early:
        return not_applicable(expected, "no streaming failure before headers in this run")
    if not all(is_failed(e) for e in streamed):
        return not_applicable(expected, "a streaming attempt succeeded; no fallback needed")
    if len(streamed) > n or (first_plain is not None and len(streamed) < n):
        return failed(expected, f"{len(streamed)} streaming attempts before the fallback")
    if first_plain is None:
        status = response_of(streamed[-1]).get("status")
        if status is not None and status not in RETRYABLE_STATUSES:
            return not_applicable(expected, f"the stream ended on status {status}: not retryable")
        if not turn_over(ev):
            return not_applicable(expected, "the turn has not ended: the fallback may still come")
        if len(streamed) < n:
            return failed(expected, f"{len(streamed)} streaming attempts and no fallback")
        return failed(expected, f"no non-streaming request after {n} streaming failures")
    diff = request_diff(streamed[-1], chat[first_plain])
    if diff:
        return failed(expected, f"the fallback differs in {diff}")
    return passed(
        expected, f"{n} streaming attempts, then non-streaming seq {chat[first_plain].get('seq')}"
    )


def _step_fault(ev: Evidence, entry: ChatEntry, name: str) -> dict[str, Any]:
    """The parameters of fault ``name`` applied to ``entry`` (journal first, then the script)."""
    params = entry.get("fault_params")
    if entry.get("fault") == name and isinstance(params, dict):
        return params
    step = entry.get("step")
    script = ev.script
    if not isinstance(step, int) or not 0 <= step < len(script):
        return {}
    params = ((script[step] or {}).get("fault") or {}).get(name)
    return params if isinstance(params, dict) else {}


def turn_reason(ev: Evidence) -> str | None:
    ends = ev.turn_ends()
    return ends[-1].get("reason") if ends else None


# --- STR-10: idle watchdog -----------------------------------------------------------------


@check("STR-10", final=True)
def check_str_10(ev: Evidence) -> Finding:
    """A stream that goes silent after headers is abandoned and recovered within the idle limit
    (the stall's ``idle_limit``, else the whole silence). A silence longer than the limit shows
    a watchdog that fired late: late by the scheduling slack is a pass, later a failure to
    confirm; a silence waited out more than ``BEYOND_LOAD_S`` real past the limit is the
    agent's beyond what load explains (``beyond_load``: not confirmed by a second run)."""
    expected = (
        "a stream with no chunk for a long time is aborted by the agent and the request is "
        "made again within the idle limit, before the silence ends"
    )
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        resp = response_of(e)
        fault = FAULTS.get(e.get("fault") or "")
        if fault is None or not Evidence.mode(e) or resp.get("status") != 200:
            continue
        params = _step_fault(ev, e, fault.name)
        secs = fault.silence_s(params)
        headers_ns = resp.get("t_headers_ns")
        if not isinstance(secs, (int, float)) or headers_ns is None:
            continue
        asked = params.get("idle_limit")
        limit = min(float(asked), secs) if isinstance(asked, (int, float)) else secs
        resumes = int(headers_ns) + int(float(secs) * ev.time_scale * 1e9)
        again = next((x for x in chat[i + 1 :] if same_request(e, x)), None)
        whole = (resp.get("sent_bytes") or 0) >= (resp.get("full_bytes") or 0)
        if again is None and not turn_over(ev):
            continue  # the recovery may still come
        judged += 1
        past = f", {secs - limit:g} s past the {limit:g} s idle limit" if limit < secs else ""
        # Nothing done for (secs - limit) of its seconds past the limit: no load makes a
        # watchdog that late once that margin is BEYOND_LOAD_S real or more.
        beyond = (secs - limit) * ev.time_scale >= BEYOND_LOAD_S
        if again is None:
            other = chat[i + 1] if i + 1 < len(chat) and not whole else None
            if other is not None and int(other["t_arrival_ns"]) < resumes:
                # Abandoned in time, but what came next is another request (a continuation
                # of the partial reply, say): a matter of content, which no clock changes.
                return failed(
                    expected,
                    f"the silent stream seq {e.get('seq')} was abandoned, but seq "
                    f"{other.get('seq')}, {ev.both_units(_after(other, headers_ns, ev))} after "
                    "the headers, is not the same request (it differs in "
                    f"{listed(request_diff(e, other))}): no resend of it came",
                    beyond_load=True,
                )
            how = f"read to its end after the {secs:g} s silence" if whole else "never recovered"
            return failed(
                expected,
                f"the silent stream seq {e.get('seq')} was {how}" + (past if whole else ""),
                beyond_load=whole and beyond,
            )
        waited = _after(again, headers_ns, ev)
        if int(again["t_arrival_ns"]) >= resumes:
            return failed(
                expected,
                f"seq {again.get('seq')} came only after the {secs:g} s silence ended: the "
                f"agent waited it out{past}",
                beyond_load=beyond,
            )
        if waited > limit + ev.late_slack:
            return failed(
                expected,
                f"seq {again.get('seq')} came {ev.both_units(waited)} after the headers: the "
                f"stream was abandoned past the {limit:g} s idle limit",
            )
    if not judged:
        return not_applicable(expected, "no stream went silent in this run")
    return passed(
        expected, f"{judged} silent stream(s) abandoned; recovered after {ev.both_units(waited)}"
    )


def _after(entry: ChatEntry, headers_ns: int, ev: Evidence) -> float:
    """Scenario seconds from a stream's headers to ``entry``'s arrival."""
    return (int(entry["t_arrival_ns"]) - int(headers_ns)) / 1e9 / ev.time_scale


# --- STR-11: only the successful request's usage counts ------------------------------------


def _usage_total(entries: list[ChatEntry]) -> dict[str, int]:
    out = {"prompt_tokens": 0, "completion_tokens": 0}
    for e in entries:
        u = wire_reply(e).usage or {}
        for k in out:
            out[k] += int(u.get(k) or 0)
    return out


@check("STR-11")
def check_str_11(ev: Evidence) -> Finding:
    """The usage the agent records equals the usage of its successful requests only."""
    expected = "the usage recorded for the turn counts only the requests that succeeded"
    chat = ev.chat()
    bad = [e for e in chat if is_failed(e) and wire_reply(e).usage]
    if not bad:
        return not_applicable(expected, "no failed attempt carried usage on the wire")
    want = _usage_total([e for e in chat if not is_failed(e)])
    reports = ev.events_of("usage")
    if not reports:
        return not_applicable(expected, "the agent reported no usage")

    def of(x: dict[str, Any]) -> dict[str, int]:
        return {k: int(x.get(k) or 0) for k in want}

    # Every usage event records usage; a turn's recorded usage is their sum.
    got = {k: sum(of(x)[k] for x in reports) for k in want}
    if got == want:
        return passed(expected, f"recorded {_tokens(got)}; failed attempts' usage left out")
    return failed(
        expected,
        f"recorded {_tokens(got)}, successful requests carried {_tokens(want)} "
        f"(failed attempts carried {_tokens(_usage_total(bad))})",
    )


def _tokens(usage: dict[str, int]) -> str:
    return f"{usage['prompt_tokens']} prompt and {usage['completion_tokens']} completion tokens"


# --- STR-12: the fallback can be switched off ----------------------------------------------


@check("STR-12", final=True)
def check_str_12(ev: Evidence) -> Finding:
    """With stream_fallback off, a broken stream is not resent without streaming."""
    expected = "with config stream_fallback: false, a broken stream gets no non-streaming resend"
    if ev.config.get("stream_fallback") is not False:
        return not_applicable(expected, "the scenario does not switch the fallback off")
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e):
            continue
        judged += 1
        for later in chat[i + 1 :]:
            if not Evidence.mode(later) and same_request(e, later):
                return failed(
                    expected, f"seq {later.get('seq')} is a non-streaming resend of {e.get('seq')}"
                )
    if not judged:
        return not_applicable(expected, "no stream broke after headers in this run")
    if not ev.errors() and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the error may still be shown")
    if not ev.errors():
        return failed(expected, "the failed stream was not shown as an error")
    return passed(expected, f"{judged} broken stream(s), no fallback, error shown")


# --- STR-13: finish_reason without [DONE] ----------------------------------------------------


@check("STR-13", final=True)
def check_str_13(ev: Evidence) -> Finding:
    """A stream with finish_reason but no [DONE] is a finished turn: never resent.

    Whatever the fault: a stream that simply ends after its finish chunk, or one whose
    connection is reset or closed after it, before [DONE] (the end-of-stream marker of each
    dialect reads as [DONE] in the chat view)."""
    expected = "a stream carrying finish_reason but no [DONE] is taken as complete (not resent)"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        resp = response_of(e)
        if not Evidence.mode(e) or resp.get("status") != 200:
            continue
        reply = wire_reply(e)
        if "data: [DONE]" in str(resp.get("sent") or "") or not reply.finish_reason:
            continue
        if reply.empty:
            continue  # an empty reply is asked for again (STR-16), finished or not
        judged += 1
        for later in chat[i + 1 :]:
            if same_request(e, later):
                return failed(expected, f"seq {e.get('seq')} was resent at seq {later.get('seq')}")
        if i + 1 == len(chat) and turn_reason(ev) not in (None, "completed"):
            return failed(expected, f"the turn ended {turn_reason(ev)!r} after seq {e.get('seq')}")
    if not judged:
        return not_applicable(expected, "no stream ended without [DONE] in this run")
    return passed(expected, f"{judged} stream(s) without [DONE] taken as complete")


# --- STR-16: empty 200 reply retried, bounded ------------------------------------------------

# Empty replies of one request tolerated before the agent must give up (both modes' budgets).
MAX_EMPTY = 2 * ATTEMPTS_PER_MODE


@check("STR-16", final=True)
def check_str_16(ev: Evidence) -> Finding:
    """An empty 200 reply is retried, a bounded number of times, never taken as the answer."""
    expected = (
        "an empty 200 reply (no choices or an empty message) is retried, at most "
        f"{MAX_EMPTY} times for one request, and never accepted as the answer"
    )
    chat = ev.chat()
    groups: list[list[ChatEntry]] = []
    for e in chat:
        if groups and same_request(groups[-1][0], e):
            groups[-1].append(e)
        else:
            groups.append([e])
    judged = 0
    for g in groups:
        empties = [e for e in g if symptom(e) == "empty_reply"]
        if not empties:
            continue
        judged += 1
        if len(empties) > MAX_EMPTY:
            return failed(expected, f"{len(empties)} empty replies to one request: unbounded")
        if symptom(g[-1]) != "empty_reply":
            continue
        if not turn_over(ev):
            continue  # the retry, or the error, may still come
        if len(empties) == 1:
            return failed(expected, f"the empty reply at seq {g[-1].get('seq')} was not retried")
        shown = [
            x
            for x in ev.errors()
            if x.get("t_ns") is None or x["t_ns"] >= int(g[-1].get("t_arrival_ns", 0))
        ]
        if not shown:
            return failed(
                expected,
                f"after {len(empties)} empty replies the agent stopped without showing an error",
            )
    if not judged:
        return not_applicable(expected, "no empty reply in this run")
    return passed(expected, f"{judged} request(s) got empty replies; each retried, bounded")
