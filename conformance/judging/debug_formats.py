"""Readers of an agent's own debug files: what DBG-01 and DBG-03 ask, read from them as written.

The debug directory of a run holds the harness's format (contracts §5: a JSON dump per HTTP 400,
``tool-calls.jsonl``) unless the adapter names another (``Evidence.debug_format``): a shipped
agent's own files, collected byte for byte (its profile's ``drive.debug_dump``). Each format
has a reader here, as each wire dialect has its own: it finds what the criteria ask for
wherever that agent keeps it, and says where, or that it is not there. It never rewrites the
files, and never raises on what it cannot read: garbled content becomes a note.

``claude-code`` (Claude Code's ``--debug-file`` log and its session transcripts, measured on
2.1.197 and 2.1.332, docs/agents/claude-code.md):

- the transcript (``*.jsonl``, one JSON object a line): ``user`` and ``assistant`` records with
  the conversation's ``message``; an ``assistant`` record per reply, each ``tool_use`` block
  (``id``, ``name``) in its ``message.content``; a ``user`` record per answer, each
  ``tool_result`` block (``tool_use_id``, ``is_error``); an API error it ends on as an
  ``assistant`` record with ``isApiErrorMessage`` and ``apiErrorStatus``; 2.1.332 also an
  ``api-request`` record per request, its ``params`` (``model``, ``max_tokens``, ...);
- the debug log (any other file): ``<ISO time> [LEVEL] text`` lines, among them
  ``[ERROR] API error (attempt N/M): 400 ...`` per failed attempt and
  ``[API:timing] dispatching to <provider> model=<model>`` before each request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

__all__ = [
    "FORMATS",
    "Http400Dump",
    "ToolCallRecord",
    "ToolLog",
    "read_http_400",
    "read_tool_calls",
    "unprefixed",
]

CLAUDE_CODE = "claude-code"
FORMATS = (CLAUDE_CODE,)
_MAX_NOTES = 3  # garbled lines named in an observation; the rest counted

# `<ISO time> [LEVEL] text`: a line of Claude Code's debug log.
_LOG_LINE = re.compile(
    r"^(?P<t>\d{4}-\d\d-\d\dT[0-9:.]+Z?)\s+\[(?P<level>[A-Z]+)\]\s?(?P<text>.*)$"
)
_API_ERROR_400 = re.compile(r"API error \(attempt \d+/\d+\): 400\b")
_DISPATCH_MODEL = re.compile(r"dispatching to \S+ model=(?P<model>\S+)")


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call as the agent's files record it."""

    id: str
    name: str  # as written (Claude Code: ``mcp__<server>__<tool>`` for an MCP tool)
    status: str | None  # "ok" or "error" from its result; None: no result recorded
    where: str  # file:line of the call's record


@dataclass
class ToolLog:
    """The tool calls a set of debug files records, and what could not be read."""

    records: list[ToolCallRecord] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # the files read for them
    notes: list[str] = field(default_factory=list)
    readable: bool = True  # False: no reader for the format (``notes`` says so)


@dataclass
class Http400Dump:
    """What a set of debug files holds of a rejected request (HTTP 400): each part found says
    where (None: not found), ``notes`` what could not be read."""

    error: str | None = None
    messages: str | None = None
    model: str | None = None
    config: str | None = None
    notes: list[str] = field(default_factory=list)
    readable: bool = True

    PARTS: ClassVar[tuple[str, ...]] = ("messages", "model", "config", "error")

    def found(self) -> dict[str, str]:
        return {p: v for p in self.PARTS if (v := getattr(self, p))}

    def missing(self) -> list[str]:
        return [p for p in self.PARTS if not getattr(self, p)]


def unprefixed(name: str) -> str:
    """A tool's name without the ``mcp__<server>__`` prefix Claude Code gives an MCP tool."""
    if name.startswith("mcp__"):
        parts = name.split("__", 2)
        if len(parts) == 3 and parts[1] and parts[2]:
            return parts[2]
    return name


def read_tool_calls(fmt: str, files: Mapping[str, str]) -> ToolLog:
    """One record per tool call in ``files`` read as format ``fmt``."""
    if fmt != CLAUDE_CODE:
        return ToolLog(notes=[_unknown(fmt)], readable=False)
    log = ToolLog()
    results: dict[str, bool] = {}
    calls: list[tuple[str, str, str]] = []
    for name in _transcripts(files):
        log.sources.append(name)
        for n, rec in _records(name, files[name], log.notes):
            for block in _blocks(rec):
                if block.get("type") == "tool_use" and rec.get("type") == "assistant":
                    cid, tool = block.get("id"), block.get("name")
                    if isinstance(cid, str) and isinstance(tool, str):
                        calls.append((cid, tool, f"{name}:{n}"))
                    else:
                        log.notes.append(f"{name}:{n}: a tool_use without a string id and name")
                elif block.get("type") == "tool_result" and rec.get("type") == "user":
                    cid = block.get("tool_use_id")
                    if isinstance(cid, str):
                        results[cid] = results.get(cid, False) or block.get("is_error") is True
    for cid, tool, where in calls:
        status = None if cid not in results else ("error" if results[cid] else "ok")
        log.records.append(ToolCallRecord(cid, tool, status, where))
    return log


def read_http_400(fmt: str, files: Mapping[str, str]) -> Http400Dump:
    """What ``files``, read as format ``fmt``, hold of the first request rejected with a 400:
    its error, the request's messages, model and configuration."""
    if fmt != CLAUDE_CODE:
        return Http400Dump(notes=[_unknown(fmt)], readable=False)
    dump = Http400Dump()
    at = _claude_error(files, dump)
    transcripts = [
        (name, list(_records(name, files[name], dump.notes))) for name in _transcripts(files)
    ]
    # The messages of the rejected request: the conversation's records written before the 400.
    count, first = 0, None
    for name, records in transcripts:
        for n, rec in records:
            if rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict):
                if rec.get("isApiErrorMessage") or not _before(_time(rec.get("timestamp")), at):
                    continue
                count += 1
                first = first or f"{name}:{n}"
    if count:
        when = " before the 400" if at is not None else ""
        dump.messages = f"{count} message record(s){when}, from {first}"
    _claude_request(transcripts, at, dump)
    if dump.model is None:
        dump.model = _dispatched_model(files, at)
    return dump


# --- claude-code --------------------------------------------------------------------------


def _transcripts(files: Mapping[str, str]) -> list[str]:
    return sorted(n for n in files if n.endswith(".jsonl"))


def _logs(files: Mapping[str, str]) -> list[str]:
    return sorted(n for n in files if not n.endswith(".jsonl"))


def _records(name: str, text: str, notes: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers; a line that is not one is
    noted (at most _MAX_NOTES named, then counted)."""
    bad = 0
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            rec = None
        if isinstance(rec, dict):
            yield n, rec
            continue
        bad += 1
        if bad <= _MAX_NOTES:
            notes.append(f"{name}:{n}: not a JSON object: {line[:60]!r}")
    if bad > _MAX_NOTES:
        notes.append(f"{name}: {bad - _MAX_NOTES} more line(s) not a JSON object")


def _blocks(rec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    message = rec.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        yield from (b for b in content if isinstance(b, dict))


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _before(when: datetime | None, at: datetime | None) -> bool:
    """Whether something written at ``when`` came before ``at`` (either unknown: yes)."""
    if when is None or at is None:
        return True
    try:
        return when <= at
    except TypeError:  # one naive, one aware: cannot be ordered
        return True


def _log_lines(files: Mapping[str, str]) -> Iterator[tuple[str, int, datetime | None, str]]:
    for name in _logs(files):
        for n, line in enumerate(files[name].splitlines(), 1):
            m = _LOG_LINE.match(line)
            if m:
                yield name, n, _time(m.group("t")), m.group("text")


def _claude_error(files: Mapping[str, str], dump: Http400Dump) -> datetime | None:
    """The first 400 the files record (the debug log's API error, else the transcript's API
    error record) into ``dump.error``; when it happened."""
    for name, n, when, text in _log_lines(files):
        if _API_ERROR_400.search(text):
            dump.error = f"{name}:{n}: {text[:120]}"
            return when
    for name in _transcripts(files):
        for n, rec in _records(name, files[name], []):
            if rec.get("isApiErrorMessage") and rec.get("apiErrorStatus") == 400:
                said = " ".join(str(b.get("text", "")) for b in _blocks(rec))[:120]
                dump.error = f"{name}:{n}: API error record, status 400: {said!r}"
                return _time(rec.get("timestamp"))
    return None


def _claude_request(
    transcripts: list[tuple[str, list[tuple[int, dict[str, Any]]]]],
    at: datetime | None,
    dump: Http400Dump,
) -> None:
    """The model and configuration of the rejected request: the last ``api-request`` record's
    ``params`` before the 400 (2.1.332 writes one per request)."""
    last: tuple[str, dict[str, Any]] | None = None
    for name, records in transcripts:
        for n, rec in records:
            params = rec.get("params")
            stamp = _time(rec.get("timestamp"))
            if rec.get("type") == "api-request" and isinstance(params, dict) and _before(stamp, at):
                last = (f"{name}:{n}", params)
    if last is None:
        return
    where, params = last
    if isinstance(params.get("model"), str) and params["model"]:
        dump.model = f"{where}: api-request params.model {params['model']!r}"
    config = sorted(k for k in params if k != "model")
    if config:
        dump.config = f"{where}: api-request params {', '.join(config)}"


def _dispatched_model(files: Mapping[str, str], at: datetime | None) -> str | None:
    """The model of the last request the debug log says it dispatched before the 400."""
    found = None
    for name, n, when, text in _log_lines(files):
        m = _DISPATCH_MODEL.search(text)
        if m and _before(when, at):
            found = f"{name}:{n}: dispatched with model={m.group('model')}"
    return found


def _unknown(fmt: str) -> str:
    return f"no reader for debug file format {fmt!r} (known: {', '.join(FORMATS)})"
