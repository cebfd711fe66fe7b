"""Checks for the TRN area (automatic continuation after a length finish).

What a response delivered and how the next request carried it on are read by
``conformance.checks.trn_wire``; this module holds the judgements.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.lop import loop_trigger
from conformance.checks.partial import turn_over
from conformance.checks.seed_strings import CONTINUATION_TEXT
from conformance.checks.trn_wire import (
    completed,
    is_continuation,
    length_finished,
    messages_of,
    next_request,
    output_limit,
    plain_truncation,
    produced,
    recursed,
    superseded,
    text_of,
    tool_truncation,
)
from conformance.judging.evidence import Evidence, response_of
from fakes.journal import ChatEntry

# length_finished lives in trn_wire; it stays importable from here for the TJS checks.
__all__ = ["length_finished"]

# final=True (see registry.py): a wrong or extra request, a message shown without meta. Left
# out: TRN-01 and TRN-05/06/10 (their failure is a continuation that never came).


@check("TRN-01")
def check_trn_01(ev: Evidence) -> Finding:
    """After a length finish, the next request ends with the exact continuation user message."""
    expected = f"after finish_reason length, a new request whose last message is user {CONTINUATION_TEXT!r}"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        if not length_finished(e) or response_of(e).get("status") != 200:
            continue
        # A raised output limit (TRN-07) may resend the same messages first; find a continuation.
        later = chat[i + 1 :]
        if not later:
            return failed(expected, f"no request after the length finish at seq {e.get('seq')}")
        judged += 1
        found = False
        for nxt in later:
            msgs = (nxt.get("body") or {}).get("messages") or []
            if msgs and msgs[-1].get("role") == "user" and text_of(msgs[-1]) == CONTINUATION_TEXT:
                found = True
                break
            if len(msgs) > len((e.get("body") or {}).get("messages") or []):
                break
        if not found:
            last = ((later[0].get("body") or {}).get("messages") or [{}])[-1]
            return failed(
                expected,
                f"after seq {e.get('seq')}: next request's last message is "
                f"{last.get('role')!r} {text_of(last)[:120]!r}",
            )
    if not judged:
        return not_applicable(expected, "no length finish in this run")
    return passed(expected, f"{judged} continuation(s) with the exact text")


@check("TRN-02", final=True)
def check_trn_02(ev: Evidence) -> Finding:
    """The continuation text is shown to the user only as meta."""
    expected = "the continuation message appears in the agent's messages only with meta: true"
    on_wire = any(
        text_of(m) == CONTINUATION_TEXT
        for b in ev.bodies()
        for m in b.get("messages") or []
        if m.get("role") == "user"
    )
    if not on_wire:
        return not_applicable(expected, "no continuation message was sent on the wire")
    shown = [m for m in ev.events_of("message") if (m.get("text") or "") == CONTINUATION_TEXT]
    if not shown and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the message may still be reported")
    if not shown:
        return failed(expected, "the continuation message was never reported as a meta message")
    visible = [m for m in shown if m.get("meta") is not True]
    if visible:
        return failed(expected, f"continuation message {visible[0].get('id')!r} shown without meta")
    return passed(expected, f"{len(shown)} continuation message(s), all meta")


MAX_RECOVERIES = int(by_id("TRN-04").numbers["recoveries"])  # seed 000, 连续截断恢复上限


def _trailing_continuations(body: dict[str, Any], prompt: str | None = None) -> int:
    """Continuation messages since the last progress: a tool result, or the user's prompt.

    The continuation that follows tool results is the recovery of a truncation that carried tool
    calls, which does not consume the count (TRN-06): it is progress, not counted.

    A scenario is one user turn, so other user-role messages after the prompt are the agent's own
    notes (a loop reminder is sent as a user turn where the API has no system role there); they
    are not progress.
    """
    n = 0
    adjacent = False  # only the agent's notes between the last continuation counted and here
    for m in reversed(body.get("messages") or []):
        role, content = m.get("role"), m.get("content")
        if role == "tool":
            # The continuation right after tool results continued a truncation that carried
            # tool calls (TRN-03, TRN-06): not counted.
            return n - 1 if adjacent else n
        if role == "user":
            if content == CONTINUATION_TEXT:
                n, adjacent = n + 1, True
            elif not prompt or prompt in str(content):
                return n
        elif role != "system":
            adjacent = False
    return n


@check("TRN-04", final=True)
def check_trn_04(ev: Evidence) -> Finding:
    """Exactly 3 consecutive recoveries: the truncation after the 3rd ends the turn in an error.

    The criterion says "at most 3", but seed 000 (连续截断恢复上限) sets the limit at 3 and tests
    it by continuing the first three truncations and stopping at the fourth; its scenario 1 (and
    TRN-01) continues every truncation below the limit. So the wire is judged both ways:

    - a 4th consecutive continuation is a FAIL as soon as it is sent (final on partial
      evidence: no later request can take it back);
    - a plain truncation with fewer than 3 continuations behind it that the turn ends on (it
      is the last request sent, and the turn ended, not by a user abort) is a FAIL. Two ends
      stay allowed: a truncation that carried nothing is an empty reply (STR-16 bounds those),
      and a turn stopped on a repetition loop is LOP-06's intervention: the agent stopped at a smaller limit of its own. The turn's end is
      needed to say so; on a run cut short the continuation may still come;
    - the truncation after the 3rd continuation needs an error shown, once the turn ended.

    Counted on the transcript each request carries, so retries of one request and a raised
    output limit (TRN-07, which appends no continuation) are not counted as recoveries.
    """
    expected = (
        f"exactly {MAX_RECOVERIES} consecutive continuations: each truncation before the "
        f"{MAX_RECOVERIES}rd continuation is continued, and a length finish after the "
        f"{MAX_RECOVERIES}rd ends the turn with an error"
    )
    chat = ev.chat()
    prompt = ev.prompt
    at_cap = given_up = None
    for i, e in enumerate(chat):
        k = _trailing_continuations(e.get("body") or {}, prompt)
        if k > MAX_RECOVERIES:
            return failed(
                expected, f"continuation number {k} without progress at seq {e.get('seq')}"
            )
        # A length finish carrying tool calls does not consume the count (TRN-06).
        if not plain_truncation(e):
            continue
        if k == MAX_RECOVERIES:
            at_cap = e
        elif i == len(chat) - 1 and not _empty(e) and not _loop_stopped(ev, e):
            given_up = (e, k)  # nothing was sent after it
    ended = turn_over(ev) and ev.turn_ends()[-1].get("reason") != "aborted"
    if given_up is not None and ended:
        e, k = given_up
        return failed(
            expected,
            f"the turn ended on the truncation at seq {e.get('seq')} with only {k} "
            f"continuation(s) behind it; the limit is {MAX_RECOVERIES}",
        )
    if at_cap is None:
        return not_applicable(expected, f"no truncation after {MAX_RECOVERIES} continuations")
    if not ev.errors() and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the error may still be shown")
    if not ev.errors():
        return failed(expected, f"no error shown after the truncation at seq {at_cap.get('seq')}")
    return passed(
        expected,
        f"stopped after the truncation at seq {at_cap.get('seq')}: "
        f"{ev.errors()[0].get('message')!r}",
    )


def _empty(entry: ChatEntry) -> bool:
    got = produced(entry)
    return not (got["content"] or got["reasoning"] or got["tool_calls"])


def _loop_stopped(ev: Evidence, entry: ChatEntry) -> bool:
    """Whether a repetition loop (LOP-06) had shown by ``entry``: stopping there is allowed."""
    loop = loop_trigger(ev)
    return loop is not None and loop[0].get("t_arrival_ns", 0) <= entry.get("t_arrival_ns", 0)


@check("TRN-03", final=True)
def check_trn_03(ev: Evidence) -> Finding:
    """Truncated with tool calls: the tools run, then the continuation message, then a call."""
    expected = (
        "after a length finish carrying tool calls: the tools run, the next request carries "
        "their results and then the continuation message, last"
    )
    chat = ev.chat()
    hosted = {t.get("name") for t in ev.tools if isinstance(t, dict)}
    judged = []
    for i, e in enumerate(chat):
        if not tool_truncation(e):
            continue
        calls = produced(e)["tool_calls"]
        nxt = recursed(chat, i)
        if nxt is None and next_request(chat, i) is None and not turn_over(ev):
            continue  # the new call may still come
        if nxt is None:
            return failed(expected, f"no new call after the truncated reply at seq {e.get('seq')}")
        for c in calls:
            if c["name"] not in hosted:
                continue
            ran = [
                t
                for t in ev.tool_entries()
                if t.get("call_id") == c["id"]
                and e.get("t_arrival_ns", 0) < t.get("t_arrival_ns", 0) < nxt["t_arrival_ns"]
            ]
            if not ran:
                return failed(expected, f"tool call {c['id']!r} never reached the tool host")
        added = messages_of(nxt)[len(messages_of(e)) :]
        results = {m.get("tool_call_id"): k for k, m in enumerate(added) if m.get("role") == "tool"}
        missing = [c["id"] for c in calls if c["id"] not in results]
        if missing:
            return failed(expected, f"request seq {nxt.get('seq')} lacks the results of {missing}")
        if not added or not is_continuation(added[-1]):
            last = added[-1] if added else {}
            return failed(
                expected,
                f"request seq {nxt.get('seq')} after the truncated reply (seq {e.get('seq')}) "
                f"ends with {last.get('role')!r} {text_of(last)[:80]!r}, not the continuation",
            )
        judged.append(f"seq {e.get('seq')}: {len(calls)} tool(s), then continuation")
    if not judged:
        return not_applicable(expected, "no length finish carrying tool calls in this run")
    return passed(expected, "; ".join(judged))


def _reset_judged(
    ev: Evidence, separates: Callable[[ChatEntry], bool], label: str
) -> tuple[list[str], Finding | None, str]:
    """Walk the turn counting consecutive recoveries; a reply with tool calls resets the
    count. Truncations that would be the 4th or later had the ``separates`` replies not reset
    it, yet are within the limit after the reset, must be continued."""
    expected = (
        f"after {label} between truncations, the count restarts: up to {MAX_RECOVERIES} "
        "further truncations are each continued"
    )
    chat = ev.chat()
    counted = total = 0
    seen_sep = False
    judged: list[str] = []
    for i, e in enumerate(chat):
        if not completed(e):
            continue
        calls = produced(e)["tool_calls"]
        if calls:
            counted = 0
            if separates(e):
                seen_sep = seen_sep or total > 0
            else:
                total = 0
            continue
        if not length_finished(e) or superseded(chat, i):
            continue
        counted += 1
        total += 1
        if not (seen_sep and counted <= MAX_RECOVERIES and total > MAX_RECOVERIES):
            continue
        if recursed(chat, i) is None:
            return (
                judged,
                failed(
                    expected,
                    f"truncation seq {e.get('seq')} ({counted} since the reset, {total} in the "
                    "turn) was not continued",
                ),
                expected,
            )
        judged.append(f"seq {e.get('seq')} ({counted} since the reset, {total} in all) continued")
    return judged, None, expected


@check("TRN-05")
def check_trn_05(ev: Evidence) -> Finding:
    """A tool call between truncations resets the consecutive-recovery count."""
    judged, bad, expected = _reset_judged(ev, lambda e: True, "a tool call")
    if bad:
        return bad
    if not judged:
        return not_applicable(
            expected, "no truncation that only a reset by a tool call keeps within the limit"
        )
    return passed(expected, "; ".join(judged))


@check("TRN-06")
def check_trn_06(ev: Evidence) -> Finding:
    """A truncated reply with tool calls does not consume the count: its tools run and the
    turn goes on, whatever the count of plain truncations before it."""
    expected = (
        "a length finish carrying tool calls is never the end of recovery: its tools run and a "
        "new call carries their results"
    )
    chat = ev.chat()
    run = 0
    judged = []
    for i, e in enumerate(chat):
        if plain_truncation(e) and not superseded(chat, i):
            run += 1
            continue
        if not tool_truncation(e):
            if completed(e) and produced(e)["tool_calls"]:
                run = 0
            continue
        nxt = recursed(chat, i)
        ids = {c["id"] for c in produced(e)["tool_calls"]}
        got = {
            m.get("tool_call_id")
            for m in (messages_of(nxt) if nxt else [])
            if m.get("role") == "tool"
        }
        if nxt is None or not ids <= got:
            return failed(
                expected,
                f"after {run} plain truncation(s), the truncated reply with tool calls at seq "
                f"{e.get('seq')} was not followed by a call carrying its tool results",
            )
        judged.append(f"seq {e.get('seq')} after {run} plain truncation(s): tools ran, went on")
        run = 0
    if not judged:
        return not_applicable(expected, "no length finish carrying tool calls in this run")
    return passed(expected, "; ".join(judged))


@check("TRN-07", final=True)
def check_trn_07(ev: Evidence) -> Finding:
    """At the default limit with no user override, a length finish first resends the same
    messages with a larger output limit; with an override, the limit is not raised."""
    user = ev.config.get("max_output_tokens")
    chat = ev.chat()
    first = next((i for i, e in enumerate(chat) if plain_truncation(e)), None)
    if user is not None:
        expected = f"with the user's limit {user}, the output limit is never raised above it"
        if first is None:
            return not_applicable(expected, "no length finish in this run")
        over = [e for e in chat if (output_limit(e) or 0) > user]
        if over:
            return failed(
                expected, f"seq {over[0].get('seq')} asked max tokens {output_limit(over[0])}"
            )
        return passed(expected, f"limit kept at or below {user} after the length finish")
    expected = (
        "at the default output limit, the first length finish is followed by the same messages "
        "with a larger max_tokens / max_completion_tokens, before any continuation"
    )
    if first is None:
        return not_applicable(expected, "no length finish in this run")
    e = chat[first]
    if first + 1 >= len(chat) and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the resend may still come")
    if first + 1 >= len(chat):
        return failed(expected, f"no request after the length finish at seq {e.get('seq')}")
    nxt = chat[first + 1]
    before, after = output_limit(e), output_limit(nxt)
    if messages_of(nxt) != messages_of(e):
        return failed(
            expected,
            f"seq {nxt.get('seq')} changed the messages (limit {before} -> {after}) instead of "
            "first resending them with a larger limit",
        )
    if after is None or (before is not None and after <= before):
        return failed(expected, f"resent with limit {after} after {before}: not raised")
    return passed(expected, f"limit {before} raised to {after} at seq {nxt.get('seq')}")


@check("TRN-08", final=True)
def check_trn_08(ev: Evidence) -> Finding:
    """The request after a truncation carries the content produced so far."""
    expected = (
        "the request that continues after a length finish holds an assistant message with the "
        "text produced so far (the reasoning, when no text was produced)"
    )
    chat = ev.chat()
    judged = []
    for i, e in enumerate(chat):
        if not (completed(e) and length_finished(e)) or superseded(chat, i):
            continue
        got = produced(e)
        want, field = (got["content"], "content") if got["content"] else (got["reasoning"], "")
        if not want or i + 1 >= len(chat):
            continue
        nxt = chat[i + 1]
        added = messages_of(nxt)[len(messages_of(e)) :]
        if messages_of(nxt)[: len(messages_of(e))] != messages_of(e):
            return failed(expected, f"seq {nxt.get('seq')} dropped earlier history")
        texts = [
            text_of(m) if field else str(m.get("reasoning_content") or "")
            for m in added
            if m.get("role") == "assistant"
        ]
        if not any(t == want or t.strip() == want.strip() for t in texts):
            return failed(
                expected,
                f"seq {nxt.get('seq')} after the truncation at seq {e.get('seq')} does not carry "
                f"the produced {'text' if field else 'reasoning'} {want[:80]!r}; assistant "
                f"messages added: {listed(repr(t[:80]) for t in texts)}",
            )
        judged.append(f"seq {e.get('seq')}: {len(want)} chars kept")
    if not judged:
        return not_applicable(expected, "no continued length finish with produced content")
    return passed(expected, "; ".join(judged))


def _step_truncates(ev: Evidence, step: int | None) -> bool:
    script = ev.script
    if step is None or not 0 <= step < len(script):
        return False
    s = script[step] or {}
    return (s.get("reply") or {}).get("finish_reason") == "length" or "length" in (
        s.get("fault") or {}
    )


@check("TRN-09", final=True)
def check_trn_09(ev: Evidence) -> Finding:
    """A user abort while a truncation is being recovered stops the recursion."""
    expected = "after a user abort during truncation recovery, no further request is sent"
    step = ev.abort_step
    if step is None:
        return not_applicable(expected, "the scenario has no abort")
    chat = ev.chat()
    k = next((i for i, e in enumerate(chat) if e.get("step") == step), None)
    if k is None:
        return not_applicable(expected, f"script step {step} was never reached")
    hit = chat[k]
    earlier = any(plain_truncation(e) or tool_truncation(e) for e in chat[:k])
    during = (
        earlier
        or _step_truncates(ev, step)
        or any(is_continuation(m) for m in messages_of(hit)[-1:])
    )
    if not during:
        return not_applicable(expected, "the abort did not fall during truncation recovery")
    after = ev.sent_after(hit.get("t_arrival_ns", 0))
    if after:
        e = after[0]
        what = "a continuation" if any(is_continuation(m) for m in messages_of(e)[-1:]) else "a"
        return failed(expected, f"{what} {e.get('kind')} request (seq {e.get('seq')}) after abort")
    ends = [t.get("reason") for t in ev.turn_ends()]
    return passed(
        expected,
        f"nothing sent after the aborted request seq {hit.get('seq')}; turn ended: {listed(ends)}",
    )


def _backgrounded(entry: ChatEntry) -> bool:
    """A reply whose tool call asks its tool to run in the background (run_in_background)."""
    for c in produced(entry)["tool_calls"]:
        try:
            args = json.loads(c["arguments"] or "{}")
        except json.JSONDecodeError:
            continue
        if isinstance(args, dict) and args.get("run_in_background") is True:
            return True
    return False


@check("TRN-10")
def check_trn_10(ev: Evidence) -> Finding:
    """A tool moved to the background during recovery stops the recursion like a tool call:
    the agent does not wait for it, and the consecutive count restarts after it."""
    chat = ev.chat()
    for i, e in enumerate(chat):
        if not (completed(e) and _backgrounded(e)):
            continue
        nxt = recursed(chat, i)
        ids = {c["id"] for c in produced(e)["tool_calls"]}
        for t in ev.tool_entries():
            # The scripted tool hangs: a 504 before the next call means the agent sat it out.
            if (
                t.get("call_id") in ids
                and nxt is not None
                and response_of(t).get("status") == 504
                and ev.end_ns(t) <= nxt["t_arrival_ns"]
            ):
                return failed(
                    "a tool moved to the background is not waited for",
                    f"the next call (seq {nxt.get('seq')}) came only after the backgrounded "
                    f"tool {t.get('call_id')!r} timed out",
                )
    judged, bad, expected = _reset_judged(ev, _backgrounded, "a tool moved to the background")
    if bad:
        return bad
    if not judged:
        return not_applicable(
            expected, "no truncation after a backgrounded tool that only a reset keeps in limit"
        )
    return passed(expected, "; ".join(judged))
