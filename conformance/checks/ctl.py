"""Checks for CTL-01 (abort stops everything) and ERR-02 (intermediate errors withheld)."""

from __future__ import annotations

import json

from conformance.checks.declare import check
from conformance.checks.finding import Finding, as_json, failed, not_applicable, passed
from conformance.judging.evidence import Evidence, response_of
from fakes.journal import ToolEntry

__all__: list[str] = []


@check("CTL-01", final=True)
def check_ctl_01(ev: Evidence) -> Finding:
    """After the user abort, no chat request and no tool call reaches the gateway."""
    expected = "after the abort, no further request: no retry, fallback or continuation"
    step = ev.abort_step
    if step is None:
        return not_applicable(expected, "the scenario has no abort")
    chat = ev.chat()
    hit = next((e for e in chat if e.get("step") == step), None)
    if hit is None:
        return not_applicable(expected, f"script step {step} was never reached")
    after = ev.sent_after(hit.get("t_arrival_ns", 0))
    if after:
        e = after[0]
        return failed(expected, f"{e.get('kind')} request seq {e.get('seq')} after the abort")
    return passed(expected, f"nothing sent after the aborted request (seq {hit.get('seq')})")


@check("ERR-02")
def check_err_02(ev: Evidence) -> Finding:
    """The user sees no error when the turn succeeded, and one error when it failed."""
    expected = "no error shown on a completed turn; exactly one on a failed turn"
    ends = ev.turn_ends()
    if len(ends) != 1:
        return not_applicable(expected, f"{len(ends)} turn_end event(s)")
    errors = ev.errors()
    reason = ends[0].get("reason")
    if reason == "completed" and errors:
        first = {"kind": errors[0].get("kind"), "message": str(errors[0].get("message"))[:160]}
        return failed(
            expected, f"completed turn showed {len(errors)} error(s), the first {as_json(first)}"
        )
    if reason == "error" and len(errors) != 1:
        return failed(expected, f"failed turn showed {len(errors)} errors")
    if reason not in ("completed", "error"):
        return not_applicable(expected, f"turn ended {reason!r}")
    return passed(expected, f"turn {reason}, {len(errors)} error(s) shown")


def _blocked(entry: ToolEntry) -> str | None:
    """The hook's reason when a stop_hook reply is a block (``error.type == "blocked"``)."""
    try:
        data = json.loads(response_of(entry).get("sent") or "null")
    except ValueError:
        return None
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("type") == "blocked":
        return str(err.get("message") or "")
    return None


@check("CTL-02", final=True)
def check_ctl_02(ev: Evidence) -> Finding:
    """After a stop hook's block, the hook is not called again and the turn is not rerun."""
    expected = "after the hook's block: no further stop_hook call and no further model request"
    hooks = [e for e in ev.tool_entries() if e.get("tool") == "stop_hook"]
    block = next((e for e in hooks if _blocked(e) is not None), None)
    if block is None:
        return not_applicable(expected, "no stop hook blocked in this run")
    after = ev.sent_after(block.get("t_arrival_ns", 0))
    if after:
        e = after[0]
        what = "stop_hook call" if e.get("tool") == "stop_hook" else f"{e.get('kind')} request"
        return failed(
            expected, f"{what} seq {e.get('seq')} after the block (seq {block.get('seq')})"
        )
    return passed(expected, f"block at seq {block.get('seq')} ({_blocked(block)!r}); nothing after")
