"""Checks for the DBG area (debug dumps on HTTP 400, secrets kept out, tool-call log)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.judging.debug_formats import read_http_400, read_tool_calls, unprefixed
from conformance.judging.evidence import Evidence, response_of
from fakes.journal import ToolEntry

__all__ = ["DUMP_KEYS", "leaks"]

DUMP_KEYS = ("messages", "model", "config", "error")


@check("DBG-01")
def check_dbg_01(ev: Evidence) -> Finding:
    """After an HTTP 400, a JSON dump with messages, model, config and error exists."""
    expected = f"after HTTP 400, a JSON file in debug_dir with keys {listed(DUMP_KEYS)}"
    if not any(response_of(e).get("status") == 400 for e in ev.chat()):
        return not_applicable(expected, "no HTTP 400 in this run")
    if ev.debug_format:
        return _dbg_01_read(ev, ev.debug_format)
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
            return passed(expected, f"{name} holds {listed(DUMP_KEYS)}")
        seen.append(f"{name}: missing {listed(missing or ['non-empty messages'])}")
    return failed(expected, "; ".join(seen))


# What DBG-01 asks of a rejected request, as an observation names what is missing.
_PART = {
    "messages": "the request messages",
    "model": "the model",
    "config": "the model config (the request's parameters beside the model: max_tokens, ...)",
    "error": "the error (the 400's status and body)",
}


def _dbg_01_read(ev: Evidence, fmt: str) -> Finding:
    """DBG-01 on the agent's own debug files, read through the reader of their format."""
    expected = (
        f"after HTTP 400, the request messages, model, config and error in the agent's own "
        f"debug files (format {fmt})"
    )
    if not ev.debug_files:
        return failed(expected, "debug_dir is empty")
    dump = read_http_400(fmt, ev.debug_files)
    if not dump.readable:
        return failed(expected, "; ".join(dump.notes))
    found = "; ".join(f"{part}: {where}" for part, where in dump.found().items())
    notes = f" (unreadable: {'; '.join(dump.notes)})" if dump.notes else ""
    missing = [_PART[p] for p in dump.missing()]
    if missing:
        held = f"the files hold {found}; " if found else ""
        return failed(
            expected,
            f"{held}missing: {'; '.join(missing)}: nowhere in {listed(sorted(ev.debug_files))}"
            f"{notes}",
        )
    return passed(expected, f"{found}{notes}")


def _spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Where ``secret`` occurs in ``text``: (start, end) character offsets."""
    out, i = [], text.find(secret)
    while i >= 0:
        out.append((i, i + len(secret)))
        i = text.find(secret, i + 1)
    return out


def _in_lines(text: str, secret: str) -> list[str]:
    """Each occurrence as ``line L, chars A-B`` (1-based lines, offsets within the line)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        out += [f"line {n}, chars {a}-{b}" for a, b in _spans(line, secret)]
    return out


def _in_value(value: Any, secret: str, path: str = "") -> list[str]:
    """Each occurrence in a JSON-like value as ``field <path>, chars A-B``."""
    if isinstance(value, str):
        return [f"field {path or '(value)'}, chars {a}-{b}" for a, b in _spans(value, secret)]
    if isinstance(value, dict):
        return [
            hit
            for k, v in value.items()
            for hit in _in_value(v, secret, f"{path}.{k}" if path else str(k))
        ]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _in_value(v, secret, f"{path}[{i}]")]
    return []


def leaks(ev: Evidence) -> list[str]:
    """Every place the run's secrets appear in what the agent wrote or sent, never quoting one.

    The agent's events, its log (stderr) and its debug files are read as the agent wrote them,
    before the runner redacts them for the report; the journal gives the bodies of the requests
    it sent (a key pasted into a conversation or a tool's arguments reaches another party).
    """
    found: list[str] = []
    for secret in (x for x in ev.secrets if x):
        for i, event in enumerate(ev.events, 1):
            found += [
                f"event {i} (type {event.get('type')}), {hit}" for hit in _in_value(event, secret)
            ]
        found += [f"agent log, {hit}" for hit in _in_lines(ev.agent_log, secret)]
        for name, text in sorted(ev.debug_files.items()):
            found += [f"debug file {name}, {hit}" for hit in _in_lines(text, secret)]
        for e in ev.raw_journal.get("entries") or []:
            where = f"request seq {e.get('seq')} ({e.get('kind')})"
            fields: Mapping[str, Any] = e  # what the agent sent, whatever the entry's kind
            sent = {k: fields[k] for k in _SENT_DATA if fields.get(k) is not None}
            found += [f"{where}, {hit}" for hit in _in_value(sent, secret)]
    return found


# What a request carries as data. Headers are the credential's own channel (the gateway hides
# them), and what the gateway answered is not the agent's writing.
_SENT_DATA = ("body", "body_error", "arguments")


@check("DBG-02", final=True, invariant=True)
def check_dbg_02(ev: Evidence) -> Finding:
    """The run's API key appears nowhere the agent wrote: events, log, debug dumps, requests.

    An invariant judged on every run, from the agent's output before the runner's redaction.
    Where the key appeared is named (event, field, line, character span), the key never.
    """
    expected = (
        "the API key appears nowhere the agent wrote: its events, its log (stderr), its debug "
        "files, the bodies of the requests it sent"
    )
    if not any(ev.secrets):
        return not_applicable(expected, "no secret was handed to the agent in this run")
    found = leaks(ev)
    if found:
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        return failed(expected, f"the API key appears in: {'; '.join(found[:3])}{more}")
    return passed(
        expected,
        f"no secret in {len(ev.events)} event(s), the agent log, {len(ev.debug_files)} debug "
        f"file(s) or the bodies of {len(ev.raw_journal.get('entries') or [])} request(s)",
    )


TOOL_LOG = "tool-calls.jsonl"
_ID_KEYS = ("call_id", "callId", "id")
_NAME_KEYS = ("name", "tool", "toolName", "tool_name")


@check("DBG-03")
def check_dbg_03(ev: Evidence) -> Finding:
    """One JSON record per tool call in ``debug_dir/tool-calls.jsonl`` (id, name, status)."""
    expected = f"debug_dir/{TOOL_LOG}: one JSON object per tool call with its id, name, status"
    calls = [e for e in ev.tool_entries() if e.get("tool") != "stop_hook" and e.get("call_id")]
    if not calls:
        return not_applicable(expected, "no tool call reached the tool host")
    if ev.debug_format:
        return _dbg_03_read(ev, ev.debug_format, calls)
    name = next((k for k in ev.debug_files if k.rsplit("/", 1)[-1] == TOOL_LOG), None)
    if name is None:
        return failed(
            expected, f"no {TOOL_LOG} in debug_dir (files: {listed(sorted(ev.debug_files))})"
        )
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


def _dbg_03_read(ev: Evidence, fmt: str, calls: list[ToolEntry]) -> Finding:
    """DBG-03 on the agent's own debug files, read through the reader of their format: a
    record per call with its id, its name (an MCP prefix ``mcp__<server>__`` taken off) and
    the status of its result."""
    expected = (
        f"one structured record per tool call with its id, name and status in the agent's own "
        f"debug files (format {fmt})"
    )
    log = read_tool_calls(fmt, ev.debug_files)
    if not log.readable:
        return failed(expected, "; ".join(log.notes))
    notes = f" (unreadable: {'; '.join(log.notes)})" if log.notes else ""
    if not log.records:
        files = listed(sorted(ev.debug_files)) or "none"
        return failed(expected, f"no tool call recorded in the debug files ({files}){notes}")
    for c in calls:
        cid, tool = c.get("call_id"), c.get("tool")
        mine = [r for r in log.records if r.id == cid]
        if not mine:
            return failed(expected, f"no record for call {cid!r} ({tool}){notes}")
        r = mine[0]
        if tool not in (r.name, unprefixed(r.name)):
            return failed(
                expected, f"{r.where}: the record for {cid!r} names {r.name!r}, not {tool!r}"
            )
        if r.status is None:
            return failed(expected, f"{r.where}: call {cid!r} ({r.name}) has no result recorded")
    statuses = ", ".join(f"{r.id} {r.status}" for r in log.records)
    return passed(
        expected,
        f"{len(calls)} tool call(s), {len(log.records)} record(s) in {listed(log.sources)}: "
        f"id and name from each tool_use (MCP tools named mcp__<server>__<tool>, matched after "
        f"that prefix), status from its tool_result's is_error ({statuses}){notes}",
    )
