"""Output-truncation recovery pieces: the continuation text, the counter, and wire conversion.

Theory of operation: when a reply ends with ``finish_reason: "length"`` the agent first raises
the output limit once (only when the user set none: 8192 -> 32768), then appends a hidden (meta)
user message with :data:`CONTINUATION_TEXT` and calls again, keeping the produced content in
history. :class:`TruncationCounter` bounds this to ``MAX_CONSECUTIVE`` consecutive recoveries;
the next truncation ends the turn with :data:`OUTPUT_LIMIT_ERROR`. Tool calls reset the count,
and a truncated reply that carries tool calls runs its tools and does not consume the count.

:func:`assistant_to_wire` turns a produced assistant turn into the message sent back: the
reasoning travels as ``reasoning_content``; a reasoning-only turn gets an explanatory ``content``
(never a copy of the reasoning); a fully empty turn is dropped (None), so no assistant message
without ``content`` and without ``tool_calls`` is ever sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTINUATION_TEXT",
    "DEFAULT_MAX_TOKENS",
    "MAX_CONSECUTIVE",
    "OUTPUT_LIMIT_ERROR",
    "RAISED_MAX_TOKENS",
    "REASONING_ONLY_CONTENT",
    "TruncationCounter",
    "assistant_to_wire",
    "continuation_message",
    "raised_limit",
]

# Exact seed text; the dash is an em dash (U+2014).
CONTINUATION_TEXT = (
    "Output token limit hit. Resume directly \u2014 no apology, no recap of what you were doing. "
    "Pick up mid-thought if that is where the cut happened. Break remaining work into smaller "
    "pieces."
)
MAX_CONSECUTIVE = 3
DEFAULT_MAX_TOKENS = 8192
RAISED_MAX_TOKENS = 32768
OUTPUT_LIMIT_ERROR = (
    "The output token limit was repeatedly exceeded: the reply was cut off "
    f"{MAX_CONSECUTIVE + 1} times in a row despite {MAX_CONSECUTIVE} continuation attempts."
)
REASONING_ONLY_CONTENT = (
    "[The previous reply was cut off by the output token limit while still reasoning; "
    "no visible answer was produced yet.]"
)


def continuation_message() -> dict[str, str]:
    """The hidden continuation user message, as sent on the wire."""
    return {"role": "user", "content": CONTINUATION_TEXT}


def raised_limit(user_max_tokens: int | None, current: int, *, already_raised: bool) -> int | None:
    """The raised output limit to resend with, or None when raising does not apply.

    Applies once, only when the user set no limit and the request used the default.
    """
    if user_max_tokens is None and not already_raised and current == DEFAULT_MAX_TOKENS:
        return RAISED_MAX_TOKENS
    return None


@dataclass
class TruncationCounter:
    """Counts consecutive truncation recoveries within a turn."""

    consecutive: int = 0
    limit: int = MAX_CONSECUTIVE

    def on_truncation(self, *, has_tool_calls: bool) -> bool:
        """Record a truncated reply; True = recover (continue), False = give up (error).

        A truncated reply with tool calls always recovers and resets the count (its tools run).
        """
        if has_tool_calls:
            self.consecutive = 0
            return True
        if self.consecutive >= self.limit:
            return False
        self.consecutive += 1
        return True

    def on_tool_calls(self) -> None:
        """A reply with tool calls (and their results) resets the count."""
        self.consecutive = 0

    def reset(self) -> None:
        """New user turn."""
        self.consecutive = 0


def assistant_to_wire(
    content: str | None,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    preserve_reasoning: bool = True,
) -> dict[str, Any] | None:
    """The assistant message to send back in history, or None when the turn is fully empty."""
    text = content or ""
    calls = list(tool_calls or [])
    thought = (reasoning or "") if preserve_reasoning else ""
    if not text and not calls and not thought:
        return None
    msg: dict[str, Any] = {"role": "assistant"}
    if text:
        msg["content"] = text
    elif calls:
        msg["content"] = None
    else:
        # Reasoning only: explanatory text, deliberately not a copy of the reasoning.
        msg["content"] = REASONING_ONLY_CONTENT
    if calls:
        msg["tool_calls"] = calls
    if thought:
        msg["reasoning_content"] = thought
    return msg
