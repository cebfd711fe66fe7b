"""Checks for the DBG area (debug dumps on HTTP 400, secret redaction)."""

from __future__ import annotations

import json
from collections.abc import Callable

from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.evidence import Evidence

__all__ = ["CHECKS", "FINAL_ON_PARTIAL", "DUMP_KEYS"]

DUMP_KEYS = ("messages", "model", "config", "error")


def check_dbg_01(ev: Evidence) -> Finding:
    """After an HTTP 400, a JSON dump with messages, model, config and error exists."""
    expected = f"after HTTP 400, a JSON file in debug_dir with keys {list(DUMP_KEYS)}"
    if not any((e.get("response") or {}).get("status") == 400 for e in ev.chat()):
        return not_applicable(expected, "no HTTP 400 in this run")
    if not ev.debug_files:
        return failed(expected, "debug_dir is empty")
    seen = []
    for name, text in sorted(ev.debug_files.items()):
        try:
            doc = json.loads(text)
        except ValueError:
            seen.append(f"{name}: not JSON")
            continue
        if not isinstance(doc, dict):
            seen.append(f"{name}: not an object")
            continue
        missing = [k for k in DUMP_KEYS if k not in doc]
        if not missing and doc.get("messages"):
            return passed(expected, f"{name} holds {list(DUMP_KEYS)}")
        seen.append(f"{name}: missing {missing or ['non-empty messages']}")
    return failed(expected, "; ".join(seen))


def check_dbg_02(ev: Evidence) -> Finding:
    """No secret value appears in the journal, events, agent log or debug files."""
    expected = "the API key appears nowhere: journal, events, agent log, debug files"
    secrets = [s for s in ev.secrets if s]
    if not secrets:
        return not_applicable(expected, "no secret was handed to the agent in this run")
    places = {
        "journal": json.dumps(ev.journal, ensure_ascii=False),
        "events": json.dumps(ev.events, ensure_ascii=False),
        "agent log": ev.agent_log,
        **{f"debug file {k}": v for k, v in ev.debug_files.items()},
    }
    for where, text in places.items():
        for s in secrets:
            if s in text:
                return failed(expected, f"the API key appears in the {where}")
    return passed(expected, f"checked {len(places)} place(s); no secret found")


TOOL_LOG = "tool-calls.jsonl"
_ID_KEYS = ("call_id", "callId", "id")
_NAME_KEYS = ("name", "tool", "toolName", "tool_name")


def check_dbg_03(ev: Evidence) -> Finding:
    """One JSON record per tool call in ``debug_dir/tool-calls.jsonl`` (id, name, status)."""
    expected = f"debug_dir/{TOOL_LOG}: one JSON object per tool call with its id, name, status"
    calls = [e for e in ev.tool_entries() if e.get("tool") != "stop_hook" and e.get("call_id")]
    if not calls:
        return not_applicable(expected, "no tool call reached the tool host")
    name = next((k for k in ev.debug_files if k.rsplit("/", 1)[-1] == TOOL_LOG), None)
    if name is None:
        return failed(expected, f"no {TOOL_LOG} in debug_dir ({sorted(ev.debug_files)})")
    records = []
    for n, line in enumerate(ev.debug_files[name].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            return failed(expected, f"{name} line {n} is not JSON: {line[:80]!r}")
        if not isinstance(rec, dict):
            return failed(expected, f"{name} line {n} is not an object")
        records.append(rec)
    for c in calls:
        mine = [r for r in records if any(r.get(k) == c.get("call_id") for k in _ID_KEYS)]
        if not mine:
            return failed(expected, f"no record for call {c.get('call_id')!r} ({c.get('tool')})")
        r = mine[0]
        if not any(r.get(k) == c.get("tool") for k in _NAME_KEYS):
            return failed(
                expected, f"record for {c.get('call_id')!r} does not name {c.get('tool')!r}: {r}"
            )
        if "status" not in r:
            return failed(expected, f"record for {c.get('call_id')!r} has no status: {r}")
    return passed(expected, f"{len(calls)} tool call(s), {len(records)} record(s) in {name}")


CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "DBG-01": check_dbg_01,
    "DBG-02": check_dbg_02,
    "DBG-03": check_dbg_03,
}


# Criteria whose FAIL on a run cut short is final (see registry.py).
FINAL_ON_PARTIAL: frozenset[str] = frozenset({"DBG-02"})
