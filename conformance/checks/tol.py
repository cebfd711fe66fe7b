"""Checks for tool-layer behaviour seen on the wire: TOL-01..09 (not 06), LOP-01.

Tool outcomes are read from the tool host's journal entries (what the hosted tool really
answered, when and how often it was invoked); what the model was told is the tool result the
next chat request carries. Agent events are never consulted here: the wire shows all of it.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.reminder import is_loop_reminder
from conformance.checks.tjs import (
    OK_BEHAVIOURS,
    follow_calls,
    host_output,
    repaired_arguments,
    tool_schemas,
)
from conformance.checks.tol_schema import schema_violations
from conformance.checks.trn_wire import length_finished
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.journal import ChatEntry, Entry

__all__: list[str] = []

# final=True (see registry.py): a wrong result once sent, a call run or repeated that must not
# be, a tool waited for past its limit (TOL-04: its reply is on the wire before anything the
# agent did next). Left out: TOL-07 (a retry that may still come), TOL-09 (a batch's items are
# counted up to the next request).


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def _tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {
        m.get("tool_call_id"): _text(m)
        for m in body.get("messages") or []
        if m.get("role") == "tool"
    }


def _calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        tc
        for m in body.get("messages") or []
        if m.get("role") == "assistant"
        for tc in m.get("tool_calls") or []
    ]


# Words that make a tool name a suggestion rather than an entry of the list (English, Chinese).
_SUGGEST = re.compile(
    r"\b(did you mean|closest|similar|perhaps|maybe|suggest\w*|instead|try|you may want)\b"
    r"|是不是|是否|建议|类似|最接近",
    re.IGNORECASE,
)
_SUGGEST_REACH = 40  # characters before the name a suggestion word may stand


def _mentions(name: str, text: str) -> list[int]:
    """Where ``name`` stands in ``text`` as a whole name (read_file is not in read_file_v2)."""
    return [m.start() for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text)]


def _suggests(close: str, names: list[str], out: str) -> bool:
    """The closest name is suggested, not merely listed among the others.

    Either a suggestion word stands just before it, or it is named more often than any other
    tool (once in the list, once more as the suggestion).
    """
    at = _mentions(close, out)
    if any(_SUGGEST.search(out[max(0, i - _SUGGEST_REACH) : i]) for i in at):
        return True
    return all(len(at) > len(_mentions(n, out)) for n in names if n != close)


@check("TOL-01", final=True)
def check_tol_01(ev: Evidence) -> Finding:
    """An unknown tool's result says so, lists the tools and suggests the closest name."""
    names = [str(t["name"]) for t in ev.tools if t.get("name")]
    expected = "the unknown tool's result names it, every available tool, and the closest match"
    if not names:
        return not_applicable(expected, "the scenario offers no tools")
    judged = 0
    for body in ev.bodies():
        results = _tool_results(body)
        for tc in _calls(body):
            name = (tc.get("function") or {}).get("name") or tc.get("name")
            if name in names or tc.get("id") not in results:
                continue
            judged += 1
            out = results[tc["id"]]
            close = difflib.get_close_matches(name or "", names, n=1, cutoff=0.0)
            missing = [n for n in names if n not in out]
            if (name or "") not in out:
                return failed(expected, f"result for {name!r} does not name it: {out[:200]!r}")
            if missing:
                return failed(
                    expected, f"result for {name!r} omits tools {listed(missing, quoted=True)}"
                )
            # Listing every tool names the closest one too: the suggestion must stand out.
            if close and not _suggests(close[0], names, out):
                return failed(
                    expected,
                    f"result for {name!r} lists the tools but does not suggest {close[0]!r}: "
                    f"{out[:200]!r}",
                )
    if not judged:
        return not_applicable(expected, "no call to an unknown tool was answered on the wire")
    return passed(expected, f"{judged} unknown-tool result(s) complete")


@check("LOP-01", final=True)
def check_lop_01(ev: Evidence) -> Finding:
    """Three failures of one tool with the same arguments within 5 calls: a reminder follows."""
    expected = (
        "after the 3rd identical failing call within 5 calls, the next request has a user or "
        "system message after the tool results that names the tool and says it failed "
        "repeatedly or must not be retried the same way"
    )
    tools = ev.tool_entries()
    trigger = None
    for i in range(len(tools)):
        window = tools[max(0, i - 4) : i + 1]
        cur = tools[i]
        key = (cur.get("tool"), json.dumps(cur.get("arguments"), sort_keys=True))
        same = [
            t
            for t in window
            if (t.get("tool"), json.dumps(t.get("arguments"), sort_keys=True)) == key
            and (t.get("behaviour") not in (None, "output", "large_output"))
        ]
        if len(same) >= 3:
            trigger = cur
            break
    if trigger is None:
        return not_applicable(expected, "no tool failed 3 times with the same arguments")
    tool = str(trigger.get("tool"))
    later = [e for e in ev.chat() if e.get("t_arrival_ns", 0) > trigger.get("t_arrival_ns", 0)]
    if not later and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the next request may still come")
    if not later:
        return failed(expected, "no request after the third failure")
    msgs = (later[0].get("body") or {}).get("messages") or []
    last_tool = max((i for i, m in enumerate(msgs) if m.get("role") == "tool"), default=-1)
    for m in msgs[last_tool + 1 :]:
        t = _text(m)
        if m.get("role") in ("user", "system") and is_loop_reminder(t, tool):
            return passed(expected, f"reminder at seq {later[0].get('seq')}: {t[:120]!r}")
    notes = [_text(m)[:120] for m in msgs[last_tool + 1 :] if m.get("role") in ("user", "system")]
    return failed(
        expected,
        f"seq {later[0].get('seq')} carries no reminder about {tool!r}"
        + (f"; notes after the tool results: {listed(repr(n) for n in notes)}" if notes else ""),
    )


# --- TOL-02 (the violations are read by conformance.checks.tol_schema) --------------------
@check("TOL-02", final=True)
def check_tol_02(ev: Evidence) -> Finding:
    """Arguments violating the schema: not executed, an error naming the field and the type."""
    expected = (
        "a call whose arguments violate the tool's schema is not executed and its result names "
        "each wrong field and what it expects (type, format or allowed values)"
    )
    schemas = tool_schemas(ev)
    judged = 0
    for call in follow_calls(ev):
        schema = schemas.get(call.name)
        if call.truncated or not schema:
            continue
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            continue
        if not isinstance(args, dict) or repaired_arguments(call.arguments, schema) is not None:
            continue
        found = schema_violations(args, schema)
        if not found:
            continue
        judged += 1
        where = f"call {call.id!r} ({call.arguments!r})"
        if call.executions:
            return failed(expected, f"{where} was executed despite violating the schema")
        if call.result is None and not turn_over(ev):
            continue  # the result may still be sent
        if call.result is None:
            return failed(expected, f"{where}: no tool result sent back")
        low = call.result.lower()
        for fld, reqs in found:
            if fld is not None and fld.lower() not in low:
                return failed(
                    expected, f"{where}: result does not name {fld!r}: {call.result[:200]!r}"
                )
            for alts in reqs:
                if not any(re.search(rf"(?<!\w){re.escape(a.lower())}(?!\w)", low) for a in alts):
                    return failed(
                        expected,
                        f"{where}: result does not say {fld!r} expects {' / '.join(alts)}: "
                        f"{call.result[:200]!r}",
                    )
    if not judged:
        return not_applicable(expected, "no call violated its tool's schema in this run")
    return passed(expected, f"{judged} schema violation(s) reported with field and expectation")


# --- TOL-03 ---------------------------------------------------------------------------------
@check("TOL-03", final=True)
def check_tol_03(ev: Evidence) -> Finding:
    """A tool that raises becomes an error result carrying its message; the loop goes on."""
    expected = (
        "a tool that fails with an execution error becomes a tool result carrying its message, "
        "sent back to the model in the next request"
    )
    judged = 0
    for call in follow_calls(ev):
        for ex in call.executions:
            if ex.get("behaviour") != "error":
                continue
            if call.result is None and not turn_over(ev):
                break  # the result may still be sent
            judged += 1
            _out, err = host_output(ex)
            msg = str((err or {}).get("message") or "")
            if call.result is None:
                return failed(expected, f"call {call.id!r}: the error never reached the model")
            if msg and msg not in call.result:
                return failed(
                    expected, f"call {call.id!r}: result lacks {msg!r}: {call.result[:200]!r}"
                )
            break
    if not judged:
        return not_applicable(expected, "no hosted tool failed with an execution error")
    return passed(expected, f"{judged} tool error(s) fed back to the model")


# --- TOL-04 ---------------------------------------------------------------------------------
_TIMEOUT_WORDS = ("timed out", "timeout", "time out", "time limit", "超时")
# How far past the configured limit a stop may come, as a share of the limit (plus the run's
# late slack): a timer's own slop, not a limit of another size.
LIMIT_LATE_SHARE = 0.25


def _states_limit(text: str, limit: float) -> bool:
    sec = re.escape(f"{limit:g}")
    ms = re.escape(f"{limit * 1000:g}")
    pat = (
        rf"(?<![\d.]){sec}(\.0+)?\s*(seconds?|secs?|s|秒)(?![a-z])"
        rf"|(?<![\d.]){ms}(\.0+)?\s*(milliseconds?|ms|毫秒)(?![a-z])"
    )
    return re.search(pat, text.lower()) is not None


def _chat_by_seq(ev: Evidence) -> dict[Any, ChatEntry]:
    return {e.get("seq"): e for e in ev.chat()}


def _ns(e: Entry) -> int:
    return int(e.get("t_arrival_ns", 0))


def _end_ns(e: Entry) -> int:
    return int(response_of(e).get("t_end_ns") or _ns(e))


def _left_ns(e: Entry) -> int | None:
    """When the agent hung up on a tool still running (the host saw it leave), else None."""
    r = response_of(e)
    t = r.get("t_end_ns")
    return int(t) if r.get("end") == "client_gone" and t else None


def _answered(e: Entry) -> bool:
    """Whether the tool host's answer to ``e`` went out (not hung up on, not still running)."""
    r = response_of(e)
    return bool(r) and r.get("status") is not None and r.get("end") != "client_gone"


@check("TOL-04", final=True)
def check_tol_04(ev: Evidence) -> Finding:
    """A tool past the configured limit is abandoned at the limit and reported with it.

    At the limit: not before it by more than the run's slack, not after it by more than
    ``LIMIT_LATE_SHARE`` of it plus the late slack."""
    limit = ev.config.get("tool_timeout_s")
    expected = (
        f"a tool still running at the limit ({limit} s) is stopped then, and its result says "
        "it timed out, stating the limit"
    )
    if not isinstance(limit, int | float) or limit <= 0:
        return not_applicable(expected, "the scenario sets no config.tool_timeout_s")
    by_seq = _chat_by_seq(ev)
    judged = 0
    for call in follow_calls(ev):
        for k, ex in enumerate(call.executions):
            if ex.get("behaviour") != "hang":
                continue
            # Not answered: the agent hung up first (the host saw it leave), or the tool is
            # still running as the journal is read.
            hang = (_end_ns(ex) - _ns(ex)) / 1e9 / ev.time_scale if _answered(ex) else None
            if hang is not None and hang <= limit + ev.slack:
                continue  # the tool answered within the limit: nothing to stop
            where = f"call {call.id!r}"
            res_entry = by_seq.get(call.result_seq)
            # The agent's next move: hanging up on the tool is the stop itself, whenever its
            # next request comes; else its next execution or the request carrying the result.
            left = _left_ns(ex)
            nxt = (
                [_ns(x) for x in call.executions[k + 1 :]]
                + ([_ns(res_entry)] if res_entry else [])
                + ([left] if left is not None else [])
            )
            moved = (min(nxt) - _ns(ex)) / 1e9 / ev.time_scale if nxt else None
            # Waiting or moving too early is on the wire once it happened (final on a run cut
            # short): the tool's reply came before anything the agent did next, or the agent
            # moved before the limit.
            if hang is not None and (moved is None or moved >= hang):
                return failed(
                    expected, f"{where}: the agent waited for the tool's own reply ({hang:.2f} s)"
                )
            # Early by more than a late start of the call can explain: the limit runs from when
            # the agent made the call, the arrival here is later by its own lag under load and
            # by its own time to send a request (its reaction).
            if moved is not None and moved < limit - max(ev.slack, ev.late_slack) - ev.reaction:
                return failed(
                    expected,
                    f"{where}: abandoned after {ev.both_units(moved)}, before the {limit} s limit "
                    "(scenario seconds)",
                )
            # Late by more than a timer's slop: the limit the agent enforced is not the one it
            # was given (the tool ran on past it only because the hang was longer still).
            if moved is not None and moved > limit * (1 + LIMIT_LATE_SHARE) + ev.late_slack:
                return failed(
                    expected,
                    f"{where}: stopped after {ev.both_units(moved)}, past the {limit} s limit "
                    "(scenario seconds)",
                )
            if moved is None or call.result is None:
                if not turn_over(ev):
                    break  # the stop and the result may still come
                judged += 1
                if moved is None:
                    return failed(expected, f"{where}: nothing followed the tool call")
                return failed(expected, f"{where}: no tool result sent back")
            judged += 1
            low = call.result.lower()
            if not any(w in low for w in _TIMEOUT_WORDS):
                return failed(
                    expected, f"{where}: result does not say timed out: {call.result[:200]!r}"
                )
            if not _states_limit(call.result, float(limit)):
                return failed(
                    expected, f"{where}: result does not state {limit} s: {call.result[:200]!r}"
                )
            break
    if not judged:
        return not_applicable(expected, "no hosted tool ran past the configured limit")
    return passed(expected, f"{judged} timed-out call(s) stopped at the limit and reported")


# --- TOL-05 ---------------------------------------------------------------------------------
_HOW_TO = re.compile(
    r"\b(ask|allow|grant|approv|authori[sz]|request (access|permission)|enable)|授权|允许|申请",
    re.IGNORECASE,
)


@check("TOL-05", final=True)
def check_tol_05(ev: Evidence) -> Finding:
    """A permission denial: the reason and how to get permission; the call is not repeated."""
    expected = (
        "a denied call's result gives the reason and how to obtain permission, and the agent "
        "does not invoke the tool again for it"
    )
    judged = 0
    for call in follow_calls(ev):
        for k, ex in enumerate(call.executions):
            if ex.get("behaviour") != "permission_denied":
                continue
            judged += 1
            where = f"call {call.id!r}"
            again = [
                x for x in call.executions[k + 1 :] if x.get("arguments") == ex.get("arguments")
            ]
            if again:
                return failed(expected, f"{where}: denied call invoked again {len(again)} time(s)")
            if call.result is None and not turn_over(ev):
                break  # the result may still be sent
            if call.result is None:
                return failed(expected, f"{where}: no tool result sent back")
            reason = str((host_output(ex)[1] or {}).get("message") or "")
            if reason and reason not in call.result:
                return failed(
                    expected, f"{where}: result lacks the reason {reason!r}: {call.result[:200]!r}"
                )
            if not _HOW_TO.search(call.result):
                return failed(
                    expected,
                    f"{where}: result says nothing of obtaining permission: {call.result[:200]!r}",
                )
            break
    if not judged:
        return not_applicable(expected, "no hosted tool denied permission in this run")
    return passed(expected, f"{judged} denial(s) explained, none repeated")


# --- TOL-07 ---------------------------------------------------------------------------------
_RETRY_TRACES = ("transient", "503", "504", "retr", "timed out", "timeout")


@check("TOL-07")
def check_tol_07(ev: Evidence) -> Finding:
    """Transient tool failures are retried by the agent and not shown to the model."""
    expected = (
        "after a transient tool failure (503 transient, or a timeout the tool reported) the "
        "agent invokes the tool again before the next chat request; when a retry succeeds the "
        "model sees only the output, with no trace of the failure"
    )
    by_seq = _chat_by_seq(ev)
    judged = 0
    for call in follow_calls(ev):
        exs = call.executions
        res_entry = by_seq.get(call.result_seq)
        for k, ex in enumerate(exs):
            beh = ex.get("behaviour")
            nxt = [_ns(x) for x in exs[k + 1 :]] + ([_ns(res_entry)] if res_entry else [])
            # A hang is a failure the agent saw only when the tool's own timeout reached it.
            seen = beh == "hang" and _answered(ex) and nxt and _end_ns(ex) <= min(nxt)
            if beh != "transient" and not seen:
                continue
            judged += 1
            where = f"call {call.id!r}"
            retries = [x for x in exs[k + 1 :] if x.get("arguments") == ex.get("arguments")]
            if not retries:
                # The failure reached the agent (a transient answer, or a hang's own timeout
                # answered before its next move) and it moved on without trying again: an
                # order on the wire, not a wait a loaded machine could stretch.
                return failed(
                    expected,
                    f"{where}: {beh} failure not retried; the model got {(call.result or '')[:200]!r}",
                    beyond_load=True,
                )
            ok = next((x for x in retries if x.get("behaviour") in OK_BEHAVIOURS), None)
            if ok is None:
                break  # every retry failed: the model must be told, which TOL-06 sees to
            if call.result is None:
                return failed(expected, f"{where}: no tool result sent back")
            out = host_output(ok)[0] or ""
            if out and out[:200] not in call.result:
                return failed(
                    expected, f"{where}: result lacks the retried output: {call.result[:200]!r}"
                )
            low = call.result.replace(out, "").lower()
            msg = str((host_output(ex)[1] or {}).get("message") or "")
            trace = next((t for t in _RETRY_TRACES if t in low), None)
            later = [x for x in ev.chat() if _ns(x) > _ns(ex)]
            if msg and any(msg in json.dumps((x.get("body") or {}).get("messages")) for x in later):
                trace = msg
            if trace:
                return failed(
                    expected,
                    f"{where}: the model sees the failure ({trace!r}): {call.result[:200]!r}",
                )
            break
    if not judged:
        return not_applicable(expected, "no transient tool failure in this run")
    return passed(expected, f"{judged} transient failure(s) retried out of the model's sight")


# --- TOL-08 ---------------------------------------------------------------------------------
@check("TOL-08", final=True)
def check_tol_08(ev: Evidence) -> Finding:
    """A tool failure never makes the agent resend the chat request that asked for the tool."""
    expected = "after a failed tool call, no chat request repeats the messages of the one before it"
    chat = ev.chat()
    judged = 0
    for t in ev.tool_entries():
        if t.get("behaviour") in OK_BEHAVIOURS or t.get("harness_error"):
            continue
        before = [e for e in chat if _ns(e) < _ns(t)]
        if not before:
            continue
        prev = before[-1]
        if is_failed(prev) or length_finished(prev):
            continue  # a resend after a failed or cut response is RTY/TRN business
        judged += 1
        key = json.dumps((prev.get("body") or {}).get("messages"), sort_keys=True)
        for e in chat:
            if (
                _ns(e) > _ns(t)
                and json.dumps((e.get("body") or {}).get("messages"), sort_keys=True) == key
            ):
                return failed(
                    expected,
                    f"tool {t.get('tool')!r} failed ({t.get('behaviour')}); seq {e.get('seq')} "
                    f"resends the messages of seq {prev.get('seq')}",
                )
    if not judged:
        return not_applicable(expected, "no tool call failed after a complete response")
    return passed(expected, f"{judged} tool failure(s), no chat request resent")


# --- TOL-09 ---------------------------------------------------------------------------------
_STATUS_WORDS = {
    "completed": re.compile(r"\b(completed?|succeeded|success(ful)?|ok|done)\b|成功", re.I),
    "failed": re.compile(r"\b(failed|failure|error)\b|失败", re.I),
    "skipped": re.compile(r"\b(skipped|skip|not run)\b|跳过", re.I),
}


def _item_label(item: dict[str, Any], items: list[dict[str, Any]]) -> str | None:
    """A string argument value of ``item`` that no other item has (e.g. its path)."""
    own = item.get("arguments")
    args = own if isinstance(own, dict) else {}
    others = [
        v
        for o in items
        if o is not item and isinstance(o.get("arguments"), dict)
        for v in o["arguments"].values()
    ]
    for key in ("path", *args):
        v = args.get(key)
        if isinstance(v, str) and v and v not in others:
            return v
    return None


@check("TOL-09")
def check_tol_09(ev: Evidence) -> Finding:
    """The batch tool's result reports each item as completed, failed or skipped, truthfully."""
    expected = (
        "the result of a 'batch' call names each item with its status as the tool host saw it: "
        "completed (ran, succeeded), failed (ran, failed) or skipped (never ran)"
    )
    judged = 0
    tools = ev.tool_entries()
    chat = ev.chat()
    for call in follow_calls(ev):
        if call.name != "batch":
            continue
        try:
            items = (json.loads(call.arguments) or {}).get("items")
        except (ValueError, AttributeError):
            continue
        if not isinstance(items, list) or not items:
            continue
        judged += 1
        start = _ns(call.entry)
        later = [_ns(e) for e in chat if _ns(e) > start]
        end = min(later) if later else None
        pool = [t for t in tools if _ns(t) >= start and (end is None or _ns(t) < end)]
        if call.result is None:
            return failed(expected, f"batch call {call.id!r}: no tool result sent back")
        lines = call.result.splitlines()
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            hit = next(
                (
                    t
                    for t in pool
                    if t.get("tool") == item.get("tool")
                    and t.get("arguments") == item.get("arguments")
                ),
                None,
            )
            if hit is not None:
                pool.remove(hit)
            status = (
                "skipped"
                if hit is None
                else ("completed" if hit.get("behaviour") in OK_BEHAVIOURS else "failed")
            )
            label = _item_label(item, items)
            if label is None:
                continue
            mine = [ln for ln in lines if label in ln]
            if not any(_STATUS_WORDS[status].search(ln) for ln in mine):
                return failed(
                    expected,
                    f"item {n} ({label}) was {status} on the wire; result lines: {listed(repr(ln) for ln in mine[:3])}",
                )
    if not judged:
        return not_applicable(expected, "no call to a 'batch' tool with items in this run")
    return passed(expected, f"{judged} batch result(s) report every item truthfully")
