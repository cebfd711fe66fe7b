"""Checks for the DBG area (debug dumps on HTTP 400, secret redaction)."""

from __future__ import annotations

import json
from collections.abc import Callable

from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.evidence import Evidence

__all__ = ["CHECKS", "DUMP_KEYS"]

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


CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "DBG-01": check_dbg_01,
    "DBG-02": check_dbg_02,
}
