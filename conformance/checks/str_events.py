"""Checks for the STR criteria judged on what the agent showed around a broken stream.

STR-02 (the partial output withdrawn by id), STR-04 (no fallback after a user abort), STR-06 (a
failed fallback surfaces the error, once) and STR-07 (nothing streamed: a fallback without a
removal). The agent's events are read in the window of the attempt they belong to; the wire
says which attempt broke and what came next (``conformance.checks.str_``).
"""

from __future__ import annotations

from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.str_ import ATTEMPTS_PER_MODE, broke_after_headers, turn_reason
from conformance.checks.wire import same_request, wire_reply
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.journal import ChatEntry

__all__: list[str] = []

# final=True (see registry.py): a resend after an abort, a second fallback, a removal announced
# for nothing. Left out: STR-02 (a removal may still come).


def _events_between(ev: Evidence, start_ns: int, end_ns: int | None) -> list[dict[str, Any]]:
    return [
        x
        for x in ev.events
        if x.get("t_ns") is not None
        and x["t_ns"] >= start_ns
        and (end_ns is None or x["t_ns"] < end_ns)
    ]


def _window_end(nxt: ChatEntry | None) -> int | None:
    """Until when an agent's events may still belong to the attempt before ``nxt``.

    Events are stamped when the harness reads them, which for an outside command can be after
    the agent already sent its next request. Before a non-streaming next attempt the window
    runs to that attempt's end (its own message is told apart by :func:`_is_reply_of`); before
    a streaming one, whose content may show while it arrives, it stops at its arrival.
    """
    if nxt is None:
        return None
    return Evidence.end_ns(nxt) if not Evidence.mode(nxt) else int(nxt["t_arrival_ns"])


def _attempt_events(ev: Evidence, start_ns: int, nxt: ChatEntry | None) -> list[dict[str, Any]]:
    """The agent's events that may belong to the attempt begun at ``start_ns``, before ``nxt``.

    Before a non-streaming next attempt whose own reply the agent showed, the window closes at
    that reply in the order the agent wrote its events: an outside command's lines are stamped
    when read, possibly after that attempt ended, but their order is exact. Otherwise the window
    is one of times (:func:`_window_end`).
    """
    if nxt is not None and not Evidence.mode(nxt):
        out: list[dict[str, Any]] = []
        for x in ev.events:
            t = x.get("t_ns")
            if t is None or t < start_ns:
                continue
            if x.get("type") == "message" and _is_reply_of(x, nxt):
                return out
            out.append(x)
    return _events_between(ev, start_ns, _window_end(nxt))


def _is_reply_of(message: dict[str, Any], nxt: ChatEntry | None) -> bool:
    """Whether a message shows the non-streaming next attempt's own reply, not the partial."""
    if nxt is None or Evidence.mode(nxt) or message.get("t_ns", 0) < nxt["t_arrival_ns"]:
        return False
    r = wire_reply(nxt)
    return (message.get("text") or "") == r.text and (message.get("reasoning") or "") in (
        "",
        r.reasoning,
    )


def _turn_end_ns(ev: Evidence) -> int | None:
    ends: list[int] = [x["t_ns"] for x in ev.turn_ends() if x.get("t_ns") is not None]
    return min(ends) if ends else None


# --- STR-02: partial messages withdrawn by id ---------------------------------------------


@check("STR-02")
def check_str_02(ev: Evidence) -> Finding:
    """Every message shown while a stream that later broke was read is removed by id."""
    expected = (
        "every message shown from a failed streaming attempt is withdrawn with a removed "
        "event (by id) before the turn ends"
    )
    chat = ev.chat()
    removed = {
        x.get("id"): x.get("t_ns") for x in ev.events_of("removed") if x.get("id") is not None
    }
    end = _turn_end_ns(ev)
    judged = broke = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e):
            continue
        broke += 1
        nxt = chat[i + 1] if i + 1 < len(chat) else None
        shown = {
            x.get("id")
            for x in _attempt_events(ev, int(e["t_arrival_ns"]), nxt)
            if x.get("type") == "message"
            and x.get("role", "assistant") == "assistant"
            and not _is_reply_of(x, nxt)
        }
        for mid in sorted(shown, key=str):
            judged += 1
            if mid not in removed:
                return failed(
                    expected, f"message {mid!r} shown from broken seq {e.get('seq')} never removed"
                )
            when = removed[mid]
            if end is not None and when is not None and when > end:
                return failed(expected, f"message {mid!r} removed only after the turn ended")
    if not broke:
        return not_applicable(expected, "no stream broke after headers in this run")
    if not judged:
        return not_applicable(
            expected, f"{broke} stream(s) broke but the agent showed no message from them"
        )
    return passed(expected, f"{judged} partial message(s) shown, each removed by id")


# --- STR-04: no fallback on user abort -----------------------------------------------------


@check("STR-04", final=True)
def check_str_04(ev: Evidence) -> Finding:
    """After the user aborts a stream, the request is not sent again (no fallback)."""
    expected = "a stream the user aborted is not resent (no non-streaming fallback)"
    step = ev.abort_step
    if not isinstance(step, int):
        return not_applicable(expected, "the scenario has no user abort")
    chat = ev.chat()
    hit = [
        (i, e)
        for i, e in enumerate(chat)
        if e.get("step") == step and Evidence.mode(e) and response_of(e).get("status") == 200
    ]
    if not hit:
        return not_applicable(expected, f"no streaming response served by step {step}")
    i, e = hit[0]
    resp = response_of(e)
    # The journal may be read before the gateway notices the client left: judge by bytes.
    if (resp.get("sent_bytes") or 0) >= (resp.get("full_bytes") or 0):
        return not_applicable(expected, f"seq {e.get('seq')} was sent whole before the abort")
    for later in chat[i + 1 :]:
        if same_request(e, later):
            how = "non-streaming fallback" if not Evidence.mode(later) else "streaming resend"
            return failed(
                expected,
                f"aborted seq {e.get('seq')} was followed by a {how} (seq {later.get('seq')})",
            )
    return passed(expected, f"aborted stream seq {e.get('seq')} was not resent")


# --- STR-06: a failed fallback surfaces the error ------------------------------------------


@check("STR-06", final=True)
def check_str_06(ev: Evidence) -> Finding:
    """A fallback that fails too ends in a shown error, with no second fallback and no loop."""
    expected = (
        "when the non-streaming fallback fails, the error is shown and the request is not "
        f"sent again (at most {ATTEMPTS_PER_MODE} fallback attempts, no new stream)"
    )
    chat = ev.chat()
    start = next(
        (
            i
            for i in range(1, len(chat))
            if not Evidence.mode(chat[i])
            and Evidence.mode(chat[i - 1])
            and is_failed(chat[i - 1])
            and same_request(chat[i - 1], chat[i])
        ),
        None,
    )
    if start is None:
        return not_applicable(expected, "no non-streaming fallback after a failed stream")
    run = [chat[start]]
    for e in chat[start + 1 :]:
        if Evidence.mode(e) or not is_failed(run[-1]) or not same_request(run[0], e):
            break
        run.append(e)
    if len(run) > ATTEMPTS_PER_MODE:
        # Past the budget whatever the last one got: the loop is on the wire.
        return failed(expected, f"{len(run)} non-streaming attempts in the fallback (a loop)")
    if not all(is_failed(e) for e in run):
        return not_applicable(expected, "the fallback succeeded")
    last = run[-1]
    for later in chat[start + len(run) :]:
        if same_request(last, later):
            mode = "streaming" if Evidence.mode(later) else "non-streaming"
            return failed(
                expected,
                f"after the failed fallback (seq {last.get('seq')}) the request was sent again "
                f"({mode}, seq {later.get('seq')})",
            )
    if not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the error may still be shown")
    shown = [
        x
        for x in ev.errors()
        if x.get("t_ns") is None or x["t_ns"] >= int(last.get("t_arrival_ns", 0))
    ]
    if not shown:
        return failed(expected, f"no error shown after the failed fallback (seq {last.get('seq')})")
    if turn_reason(ev) == "completed":
        return failed(expected, "the turn ended as completed after the fallback failed")
    return passed(
        expected,
        f"fallback failed after {len(run)} attempt(s); error shown: "
        f"{str(shown[-1].get('message'))[:120]!r}",
    )


# --- STR-07: nothing streamed, fallback without removal ------------------------------------


@check("STR-07", final=True)
def check_str_07(ev: Evidence) -> Finding:
    """A stream that broke before any content goes straight to the fallback, no removal."""
    expected = (
        "a stream that broke before any content was streamed is resent at once with "
        "stream: false, and no removal is announced"
    )
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if not broke_after_headers(e) or not wire_reply(e).empty:
            continue
        if i + 1 >= len(chat) and not turn_over(ev):
            continue  # the fallback may still come
        judged += 1
        if i + 1 >= len(chat):
            return failed(expected, f"no request after the empty broken stream seq {e.get('seq')}")
        nxt = chat[i + 1]
        if Evidence.mode(nxt) or not same_request(e, nxt):
            return failed(
                expected,
                f"seq {nxt.get('seq')} after the empty broken stream is not the same request "
                "with stream: false",
            )
        gone = [
            x
            for x in _events_between(ev, int(e["t_arrival_ns"]), int(nxt["t_arrival_ns"]))
            if x.get("type") == "removed"
        ]
        if gone:
            return failed(
                expected, f"removal of {gone[0].get('id')!r} announced though nothing was streamed"
            )
    if not judged:
        return not_applicable(expected, "no stream broke before streaming any content")
    return passed(expected, f"{judged} empty broken stream(s): direct fallback, no removal")
