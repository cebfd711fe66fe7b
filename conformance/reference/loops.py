"""Poison-loop detection for the reference agent (LOP-01, LOP-02, LOP-06).

Theory of operation: every tool call is fingerprinted as ``name`` plus the canonical
JSON of its arguments. When the latest call failed and the same fingerprint failed
3 times within the last 5 calls, ``record_tool`` returns a reminder for the next
request (LOP-01). If the very next call repeats that fingerprint anyway, the reminder
was ignored: the tool is taken out of the tools list for the next 3 requests
(LOP-02); ``on_request_sent`` ages the block. Two further loop shapes are flagged
(LOP-06): the same non-empty assistant text 3 times in a row, and an A-B-A-B pattern
of tool calls.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["LoopDetector", "fingerprint"]


def fingerprint(name: str, arguments: dict[str, Any] | str | None) -> str:
    """Canonical ``name`` + arguments key: key order and whitespace do not matter."""
    value: object = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError:
            value = arguments  # unparsable text is compared verbatim
    return (
        name + "\x00" + json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    )


@dataclass
class _Call:
    name: str
    key: str
    failed: bool


class LoopDetector:
    """Tracks recent tool calls and assistant texts of one conversation."""

    def __init__(
        self,
        *,
        window: int = 5,
        threshold: int = 3,
        block_requests: int = 3,
        text_repeats: int = 3,
        block_ignored: bool = True,
    ) -> None:
        """``block_ignored=False`` is a broken copy: an ignored reminder only repeats (LOP-02)."""
        if window < threshold or threshold < 2 or block_requests < 1 or text_repeats < 2:
            raise ValueError(
                "LoopDetector: need window >= threshold >= 2, block_requests >= 1, text_repeats >= 2"
            )
        self._window = window
        self._threshold = threshold
        self._block_requests = block_requests
        self._text_repeats = text_repeats
        self._block_ignored = block_ignored
        self._calls: deque[_Call] = deque(maxlen=max(window, 4))
        self._warned: str | None = None  # fingerprint a reminder was issued for
        self._blocked: dict[str, int] = {}  # tool name -> requests left
        self._last_text: str | None = None
        self._text_count = 0
        self.pattern_loop = False  # set when the latest calls form A-B-A-B

    def record_tool(
        self, name: str, arguments: dict[str, Any] | str | None, failed: bool
    ) -> str | None:
        """Record one finished tool call; return reminder text to inject, or None."""
        key = fingerprint(name, arguments)
        self._last_text, self._text_count = None, 0  # a tool call breaks a text streak
        warned, self._warned = self._warned, None
        self._calls.append(_Call(name, key, failed))
        if warned == key and self._block_ignored:
            # LOP-02: the reminder was ignored.
            self._blocked[name] = self._block_requests
            return (
                f"<system-reminder>\nYou called {name} again with the same arguments after being "
                f"told not to. {name} is unavailable for the next {self._block_requests} requests; "
                "use a different approach.\n</system-reminder>"
            )
        recent = list(self._calls)[-self._window :]
        same_failures = sum(1 for c in recent if c.failed and c.key == key)
        if failed and same_failures >= self._threshold:
            self._warned = key
            return (
                f"<system-reminder>\nYou have called {name} {same_failures} times with the same "
                "arguments, and it failed each time. Do NOT call it again with the same arguments. "
                "Read the error, check your inputs, try a different approach or tool, or ask the "
                "user for help.\n</system-reminder>"
            )
        last4 = list(self._calls)[-4:]
        self.pattern_loop = (
            len(last4) == 4
            and last4[0].key == last4[2].key
            and last4[1].key == last4[3].key
            and last4[0].key != last4[1].key
        )
        if self.pattern_loop:
            a, b = last4[0].name, last4[1].name
            return (
                f"<system-reminder>\nYou are alternating between {a} and {b} with the same "
                "arguments without making progress. Stop and try a different approach.\n</system-reminder>"
            )
        return None

    def record_assistant_text(self, text: str) -> bool:
        """Record assistant text; True when the same text came 3 times in a row (LOP-06)."""
        norm = (text or "").strip()
        if not norm:
            return False
        if norm == self._last_text:
            self._text_count += 1
        else:
            self._last_text, self._text_count = norm, 1
        return self._text_count >= self._text_repeats

    def blocked_tools(self) -> set[str]:
        """Tools to leave out of the next request's tools list."""
        return {name for name, left in self._blocked.items() if left > 0}

    def on_request_sent(self) -> None:
        """Age blocks by one request; call after each model request is sent."""
        for name in list(self._blocked):
            self._blocked[name] -= 1
            if self._blocked[name] <= 0:
                del self._blocked[name]
