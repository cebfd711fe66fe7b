"""Checks for the LOP criteria (see docs/criteria.md), judged from the wire first.

Theory of operation: the model's side of the conversation is read from what the gateway sent
(each successful chat response, streaming or not, parsed back into text and tool calls); the
agent's side from the request bodies (messages, ``tools``) and the hosted tool entries. A tool
call is identified by its name plus the canonical JSON of its arguments, so key order and
whitespace never make two identical calls look different. Agent events are used only for what
the wire cannot show: that the turn ended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.reminder import is_loop_reminder
from conformance.checks.seed_strings import CONTINUATION_TEXT
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.journal import ChatEntry, ToolEntry

__all__ = [
    "Reply",
    "call_key",
    "loop_trigger",
    "reply_of",
]

# final=True (see registry.py), all of them: a tool run or offered past the cap, a compaction
# past the breaker, a request that goes on as usual after a loop or an ignored reminder.

# Consecutive compaction failures that stop compaction (LOP-05), and the same assistant text
# this often in a row is a loop (LOP-06): the criteria's own numbers.
COMPACTION_BREAKER = int(by_id("LOP-05").numbers["failures"])
TEXT_REPEATS = int(by_id("LOP-06").numbers["repeats"])


@dataclass
class Reply:
    """What the model said in one response, as the gateway sent it."""

    text: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, canonical arguments)
    finish: str | None = None


def _canon(arguments: Any) -> str:
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments  # unparsable text is compared verbatim
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_key(name: str, arguments: Any) -> tuple[str, str]:
    """A tool call's identity: its name and canonical arguments."""
    return (name, _canon(arguments))


def reply_of(entry: ChatEntry) -> Reply | None:
    """The model's reply in a successful chat response, or None when the attempt failed."""
    if is_failed(entry):
        return None
    sent = response_of(entry).get("sent") or ""
    chunks: list[dict[str, Any]] = []
    if response_of(entry).get("stream"):
        for line in sent.splitlines():
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            try:
                chunks.append(json.loads(line[5:]))
            except json.JSONDecodeError:
                continue
    else:
        try:
            chunks.append(json.loads(sent))
        except json.JSONDecodeError:
            return None
    r = Reply()
    parts: dict[int, list[str]] = {}  # tool call index -> [name, arguments]
    for c in chunks:
        for ch in c.get("choices") or []:
            d = ch.get("delta") or ch.get("message") or {}
            r.text += d.get("content") or ""
            for i, tc in enumerate(d.get("tool_calls") or []):
                fn = tc.get("function") or {}
                p = parts.setdefault(tc.get("index", i), ["", ""])
                p[0] += fn.get("name") or ""
                args = fn.get("arguments") or ""
                p[1] += args if isinstance(args, str) else json.dumps(args)
            r.finish = ch.get("finish_reason") or r.finish
    r.calls = [call_key(n, a) for n, a in (parts[k] for k in sorted(parts))]
    return r


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def _offered(body: dict[str, Any]) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        name = (fn or t).get("name") if isinstance(t, dict) else None
        if name:
            names.append(name)
    return names


def _main(ev: Evidence) -> list[ChatEntry]:
    """The conversation's own chat attempts (compaction requests left out)."""
    return [e for e in ev.chat() if not ev.is_compaction(e)]


def _after(entries: list[ChatEntry], e: ChatEntry) -> list[ChatEntry]:
    end = Evidence.end_ns(e)
    return [x for x in entries if x.get("t_arrival_ns", 0) >= end and x is not e]


def _tail_notes(body: dict[str, Any]) -> list[str]:
    """User/system texts after the last assistant message (what the agent added to the turn)."""
    msgs = body.get("messages") or []
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=None)
    if last is None:
        return []
    return [
        _text(m)
        for m in msgs[last + 1 :]
        if m.get("role") in ("user", "system") and _text(m) != CONTINUATION_TEXT
    ]


# --- LOP-02 -----------------------------------------------------------------------------------
def _poison_trigger(ev: Evidence) -> ToolEntry | None:
    """The tool entry completing 3 failures with the same arguments within 5 calls (LOP-01)."""
    tools = ev.tool_entries()
    for i, cur in enumerate(tools):
        key = call_key(str(cur.get("tool")), cur.get("arguments"))
        same = [
            t
            for t in tools[max(0, i - 4) : i + 1]
            if call_key(str(t.get("tool")), t.get("arguments")) == key
            and t.get("behaviour") not in (None, "output", "large_output")
        ]
        if len(same) >= 3:
            return cur
    return None


def _is_reminder(body: dict[str, Any], tool: str) -> bool:
    return any(is_loop_reminder(t, tool) for t in _tail_notes(body))


@check("LOP-02", final=True)
def check_lop_02(ev: Evidence) -> Finding:
    """A loop reminder ignored (the same call again): the tool leaves the tools list."""
    expected = (
        "after the loop reminder, when the model repeats the same failing call, the next request's "
        "tools list no longer offers that tool"
    )
    trigger = _poison_trigger(ev)
    if trigger is None:
        return not_applicable(expected, "no tool failed 3 times with the same arguments")
    tool = str(trigger.get("tool"))
    key = call_key(tool, trigger.get("arguments"))
    main = _main(ev)
    later = [e for e in main if e.get("t_arrival_ns", 0) > trigger.get("t_arrival_ns", 0)]
    reminded = next(
        (e for e in later if _is_reminder(e.get("body") or {}, tool) and reply_of(e)), None
    )
    if reminded is None:
        return not_applicable(expected, f"no request carried a reminder about {tool!r} (LOP-01)")
    reply = reply_of(reminded)
    if reply is None or key not in reply.calls:
        return not_applicable(expected, f"the model heeded the reminder at seq {reminded['seq']}")
    nxt = _after(main, reminded)
    if not nxt:
        return not_applicable(
            expected,
            f"the turn ended after the ignored reminder (seq {reminded['seq']}); no request "
            "left to show a tools list",
        )
    first = nxt[0]
    if tool in _offered(first.get("body") or {}):
        return failed(
            expected,
            f"the model repeated {tool} after the reminder at seq {reminded['seq']}; seq "
            f"{first['seq']} still offers it: {listed(_offered(first.get('body') or {}), quoted=True)}",
        )
    gone = 0
    for e in nxt:
        if tool in _offered(e.get("body") or {}):
            break
        gone += 1
    return passed(
        expected,
        f"{tool} left out from seq {first['seq']} for {gone} of {len(nxt)} later request(s)",
    )


# --- LOP-03 -----------------------------------------------------------------------------------
@check("LOP-03", final=True)
def check_lop_03(ev: Evidence) -> Finding:
    """With config.max_tool_calls, no more tool calls run and the turn stops at the cap."""
    cap = ev.config.get("max_tool_calls")
    expected = (
        f"at most max_tool_calls={cap} tools run in the turn; once the model asks for more, no "
        "further request offers tools and the turn ends"
    )
    if not isinstance(cap, int) or cap < 1:
        return not_applicable(expected, "the scenario sets no config.max_tool_calls")
    asked, over_at = 0, None
    for e in _main(ev):
        r = reply_of(e)
        if r is None:
            continue
        asked += len(r.calls)
        if asked > cap and over_at is None:
            over_at = e
    if over_at is None:
        return not_applicable(expected, f"the model asked for {asked} tool call(s), not over {cap}")
    ran = len(ev.tool_entries())
    if ran > cap:
        return failed(expected, f"{ran} tool calls ran for a cap of {cap}")
    went_on = [e for e in _after(_main(ev), over_at) if _offered(e.get("body") or {})]
    if went_on:
        return failed(
            expected,
            f"the model passed the cap at seq {over_at['seq']}, yet seq {went_on[0]['seq']} "
            "offers tools again: the turn went on",
        )
    if not turn_over(ev):
        # The end belongs to LOP-04; here it only means the turn may still stop.
        return not_applicable(expected, "the turn has not ended")
    ends = ev.turn_ends()
    shown = [x.get("message") for x in ev.errors()]
    return passed(
        expected,
        f"model asked for {asked} call(s), {ran} ran, turn ended "
        f"({ends[-1].get('reason')}); error shown: {listed(repr(m) for m in shown[:1])}",
    )


# --- LOP-05 -----------------------------------------------------------------------------------
def _compaction_failed(e: ChatEntry) -> bool:
    r = reply_of(e)
    return r is None or not r.text.strip()


@check("LOP-05", final=True)
def check_lop_05(ev: Evidence) -> Finding:
    """Three consecutive compaction failures: no further compaction request."""
    expected = (
        f"after {COMPACTION_BREAKER} consecutive failed compaction requests, the agent sends "
        "no further compaction request"
    )
    chat = ev.chat()
    streak, broke_at = 0, None
    tried = 0
    for e in chat:
        if not ev.is_compaction(e):
            continue
        tried += 1
        if broke_at is not None:
            return failed(
                expected,
                f"compaction request seq {e['seq']} after {COMPACTION_BREAKER} consecutive "
                f"failures (the last at seq {broke_at['seq']})",
            )
        if _compaction_failed(e):
            streak += 1
            if streak >= COMPACTION_BREAKER:
                broke_at = e
        else:
            streak = 0
    if broke_at is None:
        return not_applicable(
            expected,
            f"{tried} compaction request(s), never {COMPACTION_BREAKER} failures in a row",
        )
    rest = [e for e in chat if e.get("t_arrival_ns", 0) > broke_at.get("t_arrival_ns", 0)]
    if not rest:
        return not_applicable(
            expected,
            f"the turn ended right after the {COMPACTION_BREAKER}rd failure (seq "
            f"{broke_at['seq']}): no chance to compact again",
        )
    return passed(
        expected,
        f"{len(rest)} request(s) after the {COMPACTION_BREAKER}rd failure, none a compaction",
    )


# --- LOP-06 -----------------------------------------------------------------------------------
def loop_trigger(ev: Evidence) -> tuple[ChatEntry, Reply, str] | None:
    """The response completing a loop shape: 3 identical texts, or calls A-B-A-B."""
    texts: list[str] = []
    calls: list[tuple[str, str]] = []
    for e in _main(ev):
        r = reply_of(e)
        if r is None:
            continue
        t = r.text.strip()
        texts.append(t)
        if t and len(texts) >= TEXT_REPEATS and len(set(texts[-TEXT_REPEATS:])) == 1:
            return e, r, f"the same text {TEXT_REPEATS} times: {t[:60]!r}"
        for c in r.calls:
            calls.append(c)
            if len(calls) >= 4:
                a, b, a2, b2 = calls[-4:]
                if a == a2 and b == b2 and a != b:
                    return e, r, f"A-B-A-B calls: {a[0]} / {b[0]}"
    return None


@check("LOP-06", final=True)
def check_lop_06(ev: Evidence) -> Finding:
    """A repetition loop is acted on: a note to the model, a tool taken away, or a stop."""
    expected = (
        f"after the same assistant text {TEXT_REPEATS} times in a row or an A-B-A-B pattern of "
        "tool calls, the agent intervenes: the next request carries a user/system note after the "
        "last assistant message, offers fewer tools, or the turn stops there"
    )
    found = loop_trigger(ev)
    if found is None:
        return not_applicable(expected, "no repeated text or A-B-A-B tool calls in this run")
    e, reply, shape = found
    nxt = _after(_main(ev), e)
    if not nxt:
        if reply.calls or reply.finish == "length":
            return passed(expected, f"{shape} at seq {e['seq']}; the turn stopped there")
        return not_applicable(
            expected, f"{shape} at seq {e['seq']}, the model's last reply: nothing to continue"
        )
    body = nxt[0].get("body") or {}
    notes = _tail_notes(body)
    if notes:
        return passed(
            expected, f"{shape} at seq {e['seq']}; seq {nxt[0]['seq']}: {notes[0][:120]!r}"
        )
    before, after = _offered(e.get("body") or {}), _offered(body)
    if set(after) < set(before):
        return passed(
            expected,
            f"{shape} at seq {e['seq']}; seq {nxt[0]['seq']} drops {listed(sorted(set(before) - set(after)), quoted=True)}",
        )
    return failed(
        expected,
        f"{shape} at seq {e['seq']}; seq {nxt[0]['seq']} goes on as usual (no note, same tools)",
    )
