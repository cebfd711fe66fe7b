"""What the recovery core sends: history repair and cleaning, and the bodies of its requests.

Pure functions over chat-completions messages; :mod:`conformance.reference.core` decides when
each applies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .continuation import assistant_to_wire

__all__ = [
    "BACKGROUND_STARTED",
    "MEDIA_REMOVED",
    "MISSING_RESULT",
    "PRIVATE_CALL_FIELDS",
    "PRIVATE_FIELDS",
    "REPEATED_TEXT_NOTE",
    "backgrounded",
    "compaction_body",
    "corrected_max_tokens",
    "has_media",
    "is_media_error",
    "repair_history",
    "sanitize_history",
    "strip_media",
    "strip_private",
    "summary_of",
    "title_body",
    "tool_name",
    "tools_of",
]

PRIVATE_FIELDS = ("signature", "reasoning_signature", "thinking_blocks")
PRIVATE_CALL_FIELDS = ("extra_content",)
MISSING_RESULT = "[No result: this tool call was interrupted before it returned.]"
COMPACT_PROMPT = "Summarize the conversation below concisely."
REPEATED_TEXT_NOTE = (
    "<system-reminder>\nYou have written the same text 3 times in a row without making "
    "progress. Do not repeat it: try a different approach, or ask the user.\n</system-reminder>"
)
MEDIA_PART_TYPES = frozenset(
    {"image_url", "input_image", "image", "file", "input_file", "input_audio", "document"}
)
MEDIA_REMOVED = "[media removed: it was too large for the request]"
BACKGROUND_STARTED = (
    "Started in the background (run_in_background): its result will not be awaited in this turn."
)
TITLE_PROMPT = "Write a short title for this conversation. Reply with the title only."


def repair_history(
    messages: list[dict[str, Any]], *, drop: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """Add a placeholder result after any tool call left without one; returns (messages, count).

    ``drop`` (a broken copy's bug, CTX-03): take such a call out of its assistant message
    instead."""
    out: list[dict[str, Any]] = []
    added = 0
    i = 0
    while i < len(messages):
        msg = messages[i]
        at = len(out)
        out.append(msg)
        i += 1
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        if not calls:
            continue
        answered: set[str] = set()
        while i < len(messages) and messages[i].get("role") == "tool":
            answered.add(str(messages[i].get("tool_call_id")))
            out.append(messages[i])
            i += 1
        gaps = [c for c in calls if str(c.get("id")) not in answered]
        added += len(gaps)
        if drop and gaps:
            kept = [c for c in calls if c not in gaps]
            out[at] = (
                {**msg, "tool_calls": kept}
                if kept
                else {k: v for k, v in msg.items() if k != "tool_calls"}
            )
            continue
        for call in gaps:
            cid = str(call.get("id"))
            out.append({"role": "tool", "tool_call_id": cid, "content": MISSING_RESULT})
    return out, added


def sanitize_history(
    messages: list[dict[str, Any]], *, preserve_reasoning: bool = True
) -> list[dict[str, Any]]:
    """History with no assistant message lacking both content and tool calls (RSN-03, RSN-04).

    A reasoning-only one gets the explanatory content; a fully empty one is dropped.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.get("role") != "assistant" or msg.get("content") or msg.get("tool_calls"):
            out.append(msg)
            continue
        wire = assistant_to_wire(
            None, msg.get("reasoning_content"), None, preserve_reasoning=preserve_reasoning
        )
        if wire is not None:
            out.append({**msg, **wire})
    return out


def strip_private(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History without vendor-private fields, for a different (fallback) model.

    Message-level signatures and thinking blocks go, and so do tool calls' ``extra_content``
    (where gateways carry thought signatures).
    """
    out = []
    for m in messages:
        clean = {k: v for k, v in m.items() if k not in PRIVATE_FIELDS}
        if isinstance(clean.get("tool_calls"), list):
            clean["tool_calls"] = [
                {k: v for k, v in c.items() if k not in PRIVATE_CALL_FIELDS}
                if isinstance(c, dict)
                else c
                for c in clean["tool_calls"]
            ]
        out.append(clean)
    return out


_CTX_MAX = re.compile(r"maximum context length is (\d+)")
_CTX_INPUT = re.compile(r"(\d+) in the messages")


def corrected_max_tokens(error_text: str) -> int | None:
    """RTY-11: a lower ``max_tokens`` that fits the window stated in a 400, or None."""
    m, i = _CTX_MAX.search(error_text), _CTX_INPUT.search(error_text)
    if not (m and i):
        return None
    room = int(m.group(1)) - int(i.group(1)) - 16  # small margin for counting differences
    return room if room > 0 else None


def tools_of(start: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("parameters") or {},
            },
        }
        for t in start.get("tools") or []
    ]


def tool_name(entry: Mapping[str, Any]) -> str:
    return str((entry.get("function") or {}).get("name", ""))


_MEDIA_WORDS = re.compile(r"\b(image|images|pdf|media|file|files|attachment|audio)\b", re.I)
_TOO_LARGE = re.compile(r"too (large|big)|exceeds?|maximum size|size limit", re.I)


def is_media_error(status: int | None, text: str) -> bool:
    """CTX-05: a 413, or a 400 whose error names media and says it is too large."""
    if status == 413:
        return True
    return status == 400 and bool(_MEDIA_WORDS.search(text) and _TOO_LARGE.search(text))


def _is_media_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in MEDIA_PART_TYPES


def has_media(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list) and any(_is_media_part(p) for p in m["content"])
        for m in messages
    )


def strip_media(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every media content part replaced by a short text note."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(_is_media_part(p) for p in content):
            parts = [
                {"type": "text", "text": MEDIA_REMOVED} if _is_media_part(p) else p for p in content
            ]
            m = {**m, "content": parts}
        out.append(m)
    return out


def backgrounded(arguments: Any) -> bool:
    """TRN-10: the call's arguments ask for ``run_in_background: true``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return False
    return isinstance(arguments, dict) and arguments.get("run_in_background") is True


def summary_of(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        summary = json.loads(text)["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, TypeError, KeyError, IndexError):
        return None
    return str(summary) if summary else None


def compaction_body(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A summarize request: no tools, non-streaming (docs/contracts.md §5, compaction)."""
    return {
        "model": model,
        "stream": False,
        "max_tokens": 2048,
        "messages": [
            {"role": "system", "content": COMPACT_PROMPT},
            {"role": "user", "content": json.dumps(messages, ensure_ascii=False)[-200000:]},
        ],
    }


def title_body(start: Mapping[str, Any]) -> dict[str, Any]:
    """The background title request: non-streaming, no tools, never retried."""
    return {
        "model": start.get("model", ""),
        "stream": False,
        "max_tokens": 32,
        "messages": [
            {"role": "system", "content": TITLE_PROMPT},
            {"role": "user", "content": str(start.get("prompt", ""))},
        ],
    }
