"""Invariants judged on every scenario run: RSN-04, TOL-06 pairing, LOP-04 / ERR-05 turn end."""

from __future__ import annotations

from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.judging.evidence import Evidence

__all__: list[str] = []


def _has_content(m: dict[str, Any]) -> bool:
    c = m.get("content")
    if isinstance(c, str):
        return c != ""
    return bool(c)


@check("RSN-04", final=True, invariant=True)
def check_rsn_04(ev: Evidence) -> Finding:
    """No assistant message without content and without tool_calls is ever sent."""
    expected = "every assistant message on the wire has content or tool_calls"
    n = 0
    for e in ev.chat():
        for i, m in enumerate((e.get("body") or {}).get("messages") or []):
            if m.get("role") != "assistant":
                continue
            n += 1
            if not _has_content(m) and not m.get("tool_calls"):
                return failed(expected, f"seq {e.get('seq')} message {i}: assistant with neither")
    if not ev.chat():
        return not_applicable(expected, "no chat request in this run")
    return passed(expected, f"{n} assistant message(s) checked")


@check("TOL-06", final=True, invariant=True)
def check_tol_06(ev: Evidence) -> Finding:
    """In every request, each assistant tool call is answered by exactly one tool message."""
    expected = "each tool call id has exactly one tool result after it in the request"
    calls = 0
    for e in ev.chat():
        msgs = (e.get("body") or {}).get("messages") or []
        for i, m in enumerate(msgs):
            if m.get("role") != "assistant":
                continue
            for tc in m.get("tool_calls") or []:
                calls += 1
                cid = tc.get("id")
                # Results must follow before the next assistant message.
                answers = 0
                for later in msgs[i + 1 :]:
                    if later.get("role") == "assistant":
                        break
                    if later.get("role") == "tool" and later.get("tool_call_id") == cid:
                        answers += 1
                if answers != 1:
                    return failed(
                        expected, f"seq {e.get('seq')}: tool call {cid!r} has {answers} result(s)"
                    )
        ids = {tc.get("id") for m in msgs for tc in (m.get("tool_calls") or [])}
        for m in msgs:
            if m.get("role") == "tool" and m.get("tool_call_id") not in ids:
                return failed(
                    expected, f"seq {e.get('seq')}: orphan tool result {m.get('tool_call_id')!r}"
                )
    if calls == 0:
        return not_applicable(expected, "no tool call sent in this run")
    return passed(expected, f"{calls} tool call(s) paired")


@check("LOP-04", "ERR-05", invariant=True)
def check_turn_end(ev: Evidence) -> Finding:
    """The turn ends exactly once, with a known reason (LOP-04, ERR-05)."""
    expected = "exactly one turn_end event with reason completed, error or aborted"
    ends = ev.turn_ends()
    if len(ends) != 1:
        return failed(expected, f"{len(ends)} turn_end event(s)")
    reason = ends[0].get("reason")
    if reason not in ("completed", "error", "aborted"):
        return failed(expected, f"turn_end reason {reason!r}")
    return passed(expected, f"one turn_end, reason {reason}")
