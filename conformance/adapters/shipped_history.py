"""A scenario's history in a shipped CLI's own saved-conversation format, for it to resume.

Theory of operation: a CLI run as it ships starts a new conversation, but some resume a saved
one (Claude Code: ``claude -p PROMPT --resume SESSION_ID`` reads
``~/.claude/projects/<cwd as a key>/<SESSION_ID>.jsonl``). A profile's ``history`` section names
the format its CLI reads (``FORMATS``); the adapter writes the scenario's history (chat
completions shaped messages, as the gateway's chat view reads requests) in that format where the
profile says, and resumes it. Whatever the CLI then does with that conversation (repairs it,
drops parts of it, rewrites it) is the CLI's, and shows on the wire.

A writer carries every field of a message it is given, or refuses the history with
:class:`Untellable` naming what it cannot carry and why: a history told in part would be judged
as if the agent had had all of it.

``claude-code-jsonl`` (Claude Code 2.1.197 and 2.1.332 write and read the same shape): one JSON
object per line, a ``user`` or ``assistant`` entry per message, each with ``uuid``,
``parentUuid`` (the one before it: the conversation is the chain from the last entry back),
``sessionId``, ``cwd``, ``timestamp``, ``version`` and ``message`` in Anthropic Messages shape:
user text and ``image`` blocks (base64 or url source), assistant ``thinking`` (with its
``signature``), ``text`` and ``tool_use`` blocks, and each run of tool results as one user entry
of ``tool_result`` blocks.

``codex-rollout-jsonl`` (Codex CLI 0.171.0, ``codex exec resume SESSION_ID PROMPT``: it finds
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<SESSION_ID>.jsonl`` by the id in
its name): one JSON object per line, each with ``timestamp``, ``ordinal`` (its place in the file)
and ``type``/``payload``. The first is the ``session_meta`` (``id``, ``cwd``, ``cli_version``,
``source`` ``exec``, ``history_mode`` ``paginated``: the shape this version writes); each message
then becomes the OpenAI Responses input items Codex records as ``response_item`` lines: a user
``message`` of ``input_text`` and ``input_image`` parts; an assistant turn's ``reasoning`` (its
text as a summary, as Codex records a reply's reasoning; its ``encrypted_content``), its
``message`` of ``output_text`` parts and one ``function_call`` per tool call; a tool result's
``function_call_output``. What Codex takes from its own configuration (base instructions and
provider, which its own ``session_meta`` records; model and sandbox, in the ``turn_context`` and
``world_state`` lines it writes per turn) is left for it to take.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conformance.errors import ConformanceError

__all__ = [
    "FORMATS",
    "Transcript",
    "Untellable",
    "claude_code_jsonl",
    "claude_code_project_key",
    "codex_rollout_jsonl",
    "no_workdir_key",
]


class Untellable(ConformanceError, ValueError):
    """A history the format cannot carry whole; the message says what and why."""


@dataclass(frozen=True)
class Transcript:
    """A format's text for one history, and how many of the history's messages it holds."""

    text: str
    messages: int


# A format's writer: (history, session id, working directory, model, agent version, now).
Writer = Callable[[list[dict[str, Any]], str, str, str, str, datetime], Transcript]

# The longest project key Claude Code keeps whole (longer ones it cuts and suffixes with a hash
# of its own: the writer refuses those rather than guess the hash).
_CC_KEY_MAX = 200
# Anthropic's rule for a tool_use id (a tool_result names its call by it).
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_MESSAGE_KEYS = {
    "user": {"role", "content"},
    "assistant": {
        "role",
        "content",
        "tool_calls",
        "reasoning_content",
        "reasoning_signature",
        "thinking_blocks",
    },
    "tool": {"role", "content", "tool_call_id", "is_error"},
}
_CALL_KEYS = {"id", "type", "function"}


def claude_code_project_key(cwd: str) -> str:
    """Claude Code's folder name for a working directory: every character that is not an ASCII
    letter or digit becomes ``-`` (its own rule, read from the CLI)."""
    key = re.sub(r"[^a-zA-Z0-9]", "-", cwd)
    if len(key) > _CC_KEY_MAX:
        raise Untellable(
            f"the working directory {cwd!r} is longer than Claude Code keeps whole in a project "
            f"folder name ({_CC_KEY_MAX} characters)"
        )
    return key


def claude_code_jsonl(
    history: list[dict[str, Any]],
    session_id: str,
    cwd: str,
    model: str,
    version: str,
    now: datetime,
) -> Transcript:
    """``history`` as a Claude Code session transcript (module doc), its assistant turns the
    replies of ``model`` (the run's: the conversation so far was had with it); Untellable names
    what it cannot carry. Entries are stamped a millisecond apart, the last one a second before
    ``now``; their uuids derive from the session id, so the same input gives the same text."""
    entries = list(_cc_entries(history))
    start = now - timedelta(seconds=1) - timedelta(milliseconds=len(entries))
    lines: list[str] = []
    parent: str | None = None
    for i, (kind, message, extra) in enumerate(entries):
        this = _uuid_of(session_id, i)
        stamp = (start + timedelta(milliseconds=i)).isoformat(timespec="milliseconds")
        entry: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "type": kind,
            "message": message,
            "uuid": this,
            "timestamp": stamp.replace("+00:00", "Z"),
            "userType": "external",
            "entrypoint": "sdk-cli",
            "cwd": cwd,
            "sessionId": session_id,
            "version": version,
        }
        if kind == "assistant":
            message.update(id=f"msg_history_{i}", model=model)
        if "sourceToolAssistant" in extra:
            entry["sourceToolAssistantUUID"] = _uuid_of(
                session_id, extra.pop("sourceToolAssistant")
            )
        entry.update(extra)
        # ASCII: a line separator in the text (U+2028, U+0085) stays inside its line.
        lines.append(json.dumps(entry))
        parent = this
    return Transcript("".join(line + "\n" for line in lines), len(history))


def _uuid_of(session_id: str, index: int) -> str:
    """The uuid of the transcript's ``index``-th entry (derived: the same input, the same text)."""
    return str(uuid.uuid5(uuid.UUID(session_id), f"history-{index}"))


def _cc_entries(
    history: list[dict[str, Any]],
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(entry type, Anthropic message, other entry fields) per entry, in order."""
    results: list[dict[str, Any]] = []
    shown: list[Any] = []
    n = 0  # entries yielded so far
    last_assistant = -1

    def flush() -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
        nonlocal n
        if results:
            extra: dict[str, Any] = {"toolUseResult": list(shown) if len(shown) > 1 else shown[0]}
            if last_assistant >= 0:
                extra["sourceToolAssistant"] = last_assistant
            yield "user", {"role": "user", "content": list(results)}, extra
            n += 1
            results.clear()
            shown.clear()

    for i, m in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(m, dict):
            raise Untellable(f"{where}: a message is a mapping, not {type(m).__name__}")
        role = m.get("role")
        if role not in _MESSAGE_KEYS:
            raise Untellable(
                f"{where}: role {role!r}: a Claude Code transcript holds user and assistant turns "
                "and tool results only"
            )
        extra_keys = sorted(set(m) - _MESSAGE_KEYS[str(role)])
        if extra_keys:
            raise Untellable(f"{where}: {', '.join(extra_keys)}: no place for it in the transcript")
        if role == "tool":
            block = _cc_tool_result(m, where)
            results.append(block)
            shown.append(block["content"])
            continue
        yield from flush()
        if role == "user":
            yield "user", {"role": "user", "content": _cc_user_content(m.get("content"), where)}, {}
        else:
            yield "assistant", _cc_assistant(m, where), {}
            last_assistant = n
        n += 1
    yield from flush()


def _cc_user_content(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Untellable(f"{where}.content: text or a list of parts, not {content!r}")
    return [_cc_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]


def _cc_part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text" and set(part) <= {"type", "text"}:
        return {"type": "text", "text": str(part.get("text") or "")}
    if kind == "image_url" and set(part) <= {"type", "image_url"}:
        img = part.get("image_url") or {}
        url = str(img.get("url") or "") if isinstance(img, dict) else ""
        if url and set(img) <= {"url"}:
            if url.startswith("data:") and ";base64," in url:
                media_type, data = url[5:].split(";base64,", 1)
                source = {"type": "base64", "media_type": media_type, "data": data}
            else:
                source = {"type": "url", "url": url}
            return {"type": "image", "source": source}
    raise Untellable(f"{where}: a part of type {kind!r} as given has no Claude Code counterpart")


def _cc_assistant(m: dict[str, Any], where: str) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    thinking = m.get("thinking_blocks")
    reasoning = m.get("reasoning_content")
    if thinking is not None:
        # The Anthropic blocks themselves (signatures included). The reasoning text beside them
        # and its reasoning_signature are the same thought in another client's keys: the blocks
        # carry it (and a signature) where Claude Code keeps it.
        if not isinstance(thinking, list) or not all(
            isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
            for b in thinking
        ):
            raise Untellable(
                f"{where}.thinking_blocks: Anthropic thinking blocks, not {thinking!r}"
            )
        said = "".join(str(b.get("thinking") or "") for b in thinking)
        if reasoning and reasoning != said:
            raise Untellable(
                f"{where}: reasoning_content differs from its thinking_blocks: one thought or two?"
            )
        blocks += [dict(b) for b in thinking]
    elif reasoning:
        block: dict[str, Any] = {"type": "thinking", "thinking": str(reasoning)}
        if m.get("reasoning_signature"):
            block["signature"] = str(m["reasoning_signature"])
        blocks.append(block)
    elif m.get("reasoning_signature"):
        raise Untellable(f"{where}: a reasoning_signature without the reasoning it signs")
    content = m.get("content")
    if isinstance(content, str):
        if content or not (blocks or m.get("tool_calls")):
            # An empty turn stays one: a single empty text block, as it was given.
            blocks.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for j, p in enumerate(content):
            if not (isinstance(p, dict) and p.get("type") == "text" and set(p) <= {"type", "text"}):
                raise Untellable(f"{where}.content[{j}]: an assistant part is text")
            blocks.append({"type": "text", "text": str(p.get("text") or "")})
    elif content is not None:
        raise Untellable(f"{where}.content: text, a list of text parts or null, not {content!r}")
    for k, call in enumerate(m.get("tool_calls") or []):
        blocks.append(_cc_tool_use(call, f"{where}.tool_calls[{k}]"))
    return {
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": "tool_use" if m.get("tool_calls") else "end_turn",
        "stop_sequence": None,
    }


def _cc_tool_use(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise Untellable(f"{where}: a tool call is a mapping")
    extra = sorted(set(call) - _CALL_KEYS)
    if extra:
        # extra_content carries Gemini's thought signature of a call: Anthropic's signatures
        # are on thinking blocks, and a tool_use block has no field for one.
        raise Untellable(
            f"{where}: {', '.join(extra)}: an Anthropic tool_use block has no place for it"
        )
    if call.get("type", "function") != "function":
        raise Untellable(f"{where}.type: {call['type']!r}: a tool_use block is a function call")
    fn = call.get("function") or {}
    call_id = str(call.get("id") or "")
    if not _TOOL_ID.match(call_id):
        raise Untellable(f"{where}.id: {call_id!r} is not a tool_use id (letters, digits, _ and -)")
    if not isinstance(fn, dict) or set(fn) - {"name", "arguments"} or not fn.get("name"):
        raise Untellable(f"{where}.function: a name and arguments, not {fn!r}")
    args = fn.get("arguments")
    try:
        value = args if isinstance(args, dict) else json.loads(args or "{}")
    except (TypeError, json.JSONDecodeError):
        value = None
    if not isinstance(value, dict):
        raise Untellable(f"{where}.function.arguments: a tool_use input is a JSON object")
    return {"type": "tool_use", "id": call_id, "name": str(fn["name"]), "input": value}


def _cc_tool_result(m: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = str(m.get("tool_call_id") or "")
    if not _TOOL_ID.match(call_id):
        raise Untellable(f"{where}.tool_call_id: {call_id!r} is not a tool_use id")
    content = m.get("content")
    if not isinstance(content, str):
        if not isinstance(content, list):
            raise Untellable(f"{where}.content: text or a list of parts, not {content!r}")
        content = [_cc_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
    block: dict[str, Any] = {"tool_use_id": call_id, "type": "tool_result", "content": content}
    if m.get("is_error"):
        block["is_error"] = True
    return block


# -- Codex CLI ------------------------------------------------------------------------------------

_CX_KEYS = {
    "user": {"role", "content"},
    "assistant": {"role", "content", "tool_calls", "reasoning_content", "encrypted_content"},
    "tool": {"role", "content", "tool_call_id", "is_error"},
}
# Why a field of another vendor's has no place in a Responses item (module doc).
_CX_FOREIGN = {
    "reasoning_signature": "another vendor's signature of its reasoning: a Responses reasoning "
    "item carries OpenAI's encrypted_content only",
    "thinking_blocks": "Anthropic thinking blocks: no Responses item carries them",
}


def no_workdir_key(cwd: str) -> str:
    """Codex keeps its sessions by date, not by working directory: no key."""
    return ""


def codex_rollout_jsonl(
    history: list[dict[str, Any]],
    session_id: str,
    cwd: str,
    model: str,
    version: str,
    now: datetime,
) -> Transcript:
    """``history`` as a Codex CLI rollout (module doc); Untellable names what it cannot carry.
    ``model`` is not written: a rollout names the model only in the per-turn settings Codex
    takes from its configuration. Lines are stamped a millisecond apart, the last one a second
    before ``now``, so the same input gives the same text."""
    items = [item for i, m in enumerate(history) for item in _cx_items(m, f"history[{i}]")]
    start = now - timedelta(seconds=1) - timedelta(milliseconds=len(items))
    meta = {
        "id": session_id,
        "session_id": session_id,
        "timestamp": _cx_stamp(start),
        "cwd": cwd,
        "originator": "codex_exec",
        "cli_version": version,
        "source": "exec",
        "thread_source": "user",
        "history_mode": "paginated",
    }
    lines = [("session_meta", meta)] + [("response_item", item) for item in items]
    text = "".join(
        # ASCII: a line separator in the text (U+2028, U+0085) stays inside its line.
        json.dumps(
            {
                "timestamp": _cx_stamp(start + timedelta(milliseconds=n)),
                "ordinal": n,
                "type": kind,
                "payload": payload,
            }
        )
        + "\n"
        for n, (kind, payload) in enumerate(lines)
    )
    return Transcript(text, len(history))


def _cx_stamp(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _cx_items(m: Any, where: str) -> list[dict[str, Any]]:
    """The Responses input items of one history message, in the order Codex records them."""
    if not isinstance(m, dict):
        raise Untellable(f"{where}: a message is a mapping, not {type(m).__name__}")
    role = m.get("role")
    if role not in _CX_KEYS:
        raise Untellable(
            f"{where}: role {role!r}: a Codex rollout holds user and assistant turns and tool "
            "results only (its instructions are its own)"
        )
    for key in sorted(set(m) - _CX_KEYS[str(role)]):
        why = _CX_FOREIGN.get(key, "no place for it in a Codex rollout")
        raise Untellable(f"{where}: {key}: {why}")
    if role == "user":
        content = _cx_parts(m.get("content"), where, "input_text")
        return [{"type": "message", "role": "user", "content": content}]
    if role == "tool":
        return [_cx_output(m, where)]
    return _cx_assistant(m, where)


def _cx_parts(content: Any, where: str, text_type: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": text_type, "text": content}]
    if not isinstance(content, list):
        raise Untellable(f"{where}.content: text or a list of parts, not {content!r}")
    return [_cx_part(p, f"{where}.content[{j}]", text_type) for j, p in enumerate(content)]


def _cx_part(part: Any, where: str, text_type: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text" and set(part) <= {"type", "text"}:
        return {"type": text_type, "text": str(part.get("text") or "")}
    if kind == "image_url" and text_type == "input_text" and set(part) <= {"type", "image_url"}:
        img = part.get("image_url")
        if isinstance(img, dict) and img.get("url") and set(img) <= {"url", "detail"}:
            out = {"type": "input_image", "image_url": str(img["url"])}
            if img.get("detail") is not None:
                out["detail"] = str(img["detail"])
            return out
    raise Untellable(f"{where}: a part of type {kind!r} as given has no Codex counterpart")


def _cx_assistant(m: dict[str, Any], where: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    reasoning = m.get("reasoning_content")
    encrypted = m.get("encrypted_content")
    if reasoning is not None and not isinstance(reasoning, str):
        raise Untellable(f"{where}.reasoning_content: text, not {reasoning!r}")
    if encrypted is not None and not isinstance(encrypted, str):
        raise Untellable(f"{where}.encrypted_content: one reasoning item's, not {encrypted!r}")
    if reasoning or encrypted:
        summary = [{"type": "summary_text", "text": reasoning}] if reasoning else []
        item: dict[str, Any] = {"type": "reasoning", "summary": summary}
        if encrypted:
            item["encrypted_content"] = encrypted
        items.append(item)
    calls = m.get("tool_calls") or []
    content = m.get("content")
    parts = [] if content is None else _cx_parts(content, where, "output_text")
    # Text beside reasoning or calls is a message item of its own; an empty turn stays one (a
    # message of no part for null, of one empty text for ''), as it was given.
    if content or not (items or calls):
        items.append({"type": "message", "role": "assistant", "content": parts})
    if not isinstance(calls, list):
        raise Untellable(f"{where}.tool_calls: a list of tool calls, not {calls!r}")
    items += [_cx_call(c, f"{where}.tool_calls[{k}]") for k, c in enumerate(calls)]
    return items


def _cx_call(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise Untellable(f"{where}: a tool call is a mapping")
    extra = sorted(set(call) - _CALL_KEYS)
    if extra:
        # extra_content carries Gemini's thought signature of a call: a function_call item
        # has no field for one.
        raise Untellable(f"{where}: {', '.join(extra)}: a function_call item has no place for it")
    if call.get("type", "function") != "function":
        raise Untellable(f"{where}.type: {call['type']!r}: a function_call item is a function call")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise Untellable(f"{where}.id: {call_id!r}: a function_call item needs a call id")
    fn = call.get("function")
    if not isinstance(fn, dict) or set(fn) - {"name", "arguments"} or not fn.get("name"):
        raise Untellable(f"{where}.function: a name and arguments, not {fn!r}")
    args = fn.get("arguments")
    if isinstance(args, dict):
        args = json.dumps(args)
    elif args is None:
        args = ""
    elif not isinstance(args, str):
        raise Untellable(f"{where}.function.arguments: text or a JSON object, not {args!r}")
    # Named as the history names it, outside any namespace (Codex records a call of an MCP tool
    # in its server's namespace, mcp__<server>): the conversation as it was told.
    return {"type": "function_call", "name": str(fn["name"]), "arguments": args, "call_id": call_id}


def _cx_output(m: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = m.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise Untellable(f"{where}.tool_call_id: {call_id!r}: a function_call_output needs one")
    if m.get("is_error"):
        raise Untellable(
            f"{where}.is_error: a function_call_output has no error flag (its text says so)"
        )
    content = m.get("content")
    output: str | list[dict[str, Any]]
    output = content if isinstance(content, str) else _cx_parts(content, where, "input_text")
    return {"type": "function_call_output", "call_id": call_id, "output": output}


# Format name (a profile's ``history.format``) -> (its writer, the working directory's key).
FORMATS: dict[str, tuple[Writer, Callable[[str], str]]] = {
    "claude-code-jsonl": (claude_code_jsonl, claude_code_project_key),
    "codex-rollout-jsonl": (codex_rollout_jsonl, no_workdir_key),
}
