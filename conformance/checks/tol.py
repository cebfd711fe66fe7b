"""Checks for tool-layer behaviour seen on the wire: TJS-01, TOL-01, LOP-01."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable

from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.checks.seed_strings import TRUNCATION_HINT
from conformance.checks.trn import length_finished
from conformance.evidence import Evidence

__all__ = ["CHECKS"]


def _text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def _tool_results(body: dict) -> dict[str, str]:
    return {
        m.get("tool_call_id"): _text(m)
        for m in body.get("messages") or []
        if m.get("role") == "tool"
    }


def _calls(body: dict) -> list[dict]:
    return [
        tc
        for m in body.get("messages") or []
        if m.get("role") == "assistant"
        for tc in m.get("tool_calls") or []
    ]


def check_tjs_01(ev: Evidence) -> Finding:
    """After a length finish with tool calls, the tool error carries the exact hint."""
    expected = f"the tool result after a length finish contains {TRUNCATION_HINT!r}"
    chat = ev.chat()
    judged = 0
    for i, e in enumerate(chat):
        sent = (e.get("response") or {}).get("sent") or ""
        if not length_finished(e) or "tool_calls" not in sent:
            continue
        judged += 1
        nxt = next((x for x in chat[i + 1 :] if _tool_results(x.get("body") or {})), None)
        if nxt is None:
            return failed(expected, f"no tool result sent after seq {e.get('seq')}")
        results = _tool_results(nxt.get("body") or {})
        if not any(TRUNCATION_HINT in r for r in results.values()):
            first = next(iter(results.values()))
            return failed(expected, f"seq {nxt.get('seq')} tool result: {first[:200]!r}")
    if not judged:
        return not_applicable(expected, "no length finish carrying tool calls in this run")
    return passed(expected, f"{judged} truncated tool call(s) answered with the hint")


def check_tol_01(ev: Evidence) -> Finding:
    """An unknown tool's result says so, lists the tools and suggests the closest name."""
    names = [t.get("name") for t in ev.scenario.get("tools") or [] if t.get("name")]
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
            out = results[tc.get("id")]
            close = difflib.get_close_matches(name or "", names, n=1, cutoff=0.0)
            missing = [n for n in names if n not in out]
            if (name or "") not in out:
                return failed(expected, f"result for {name!r} does not name it: {out[:200]!r}")
            if missing:
                return failed(expected, f"result for {name!r} omits tools {missing}")
            if close and close[0] not in out:
                return failed(expected, f"result for {name!r} lacks the suggestion {close[0]!r}")
    if not judged:
        return not_applicable(expected, "no call to an unknown tool was answered on the wire")
    return passed(expected, f"{judged} unknown-tool result(s) complete")


def check_lop_01(ev: Evidence) -> Finding:
    """Three failures of one tool with the same arguments within 5 calls: a reminder follows."""
    expected = (
        "after the 3rd identical failing call within 5 calls, the next request has a user or "
        "system message after the tool results naming the tool and saying 'same arguments'"
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
    if not later:
        return failed(expected, "no request after the third failure")
    msgs = (later[0].get("body") or {}).get("messages") or []
    last_tool = max((i for i, m in enumerate(msgs) if m.get("role") == "tool"), default=-1)
    for m in msgs[last_tool + 1 :]:
        t = _text(m)
        if m.get("role") in ("user", "system") and tool in t and "same arguments" in t.lower():
            return passed(expected, f"reminder at seq {later[0].get('seq')}: {t[:120]!r}")
    return failed(expected, f"seq {later[0].get('seq')} carries no reminder naming {tool!r}")


CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "TJS-01": check_tjs_01,
    "TOL-01": check_tol_01,
    "LOP-01": check_lop_01,
}
