"""The agent's own key, kept out of everything it writes (DBG-02).

Theory of operation: a server may echo the API key back in an error body, whole or masked
(OpenAI shows its first characters and its last four around dots or asterisks), and that text
travels into error events, messages, debug dumps and logs. Rather than guarding each message,
the driver passes everything it writes through one :class:`Redactor` that knows the keys the
agent has used (the first one and any refreshed one) and replaces each, whole or masked, by
:data:`PLACEHOLDER`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PLACEHOLDER", "Redactor"]

PLACEHOLDER = "[REDACTED]"
MIN_MASKED_KEY = 12  # shorter keys have no head and tail worth matching in a masked echo
_MASK = r"(?:\*{3,}|\.{3,}|…+|•{3,})"  # what stands for the hidden middle of a masked key


def _head(key: str, most: int = 12) -> str:
    """A pattern for the key's first 3 characters and then up to ``most`` of them in all."""
    s = key[:most]
    tail = ""
    for c in reversed(s[3:]):
        tail = f"(?:{re.escape(c)}{tail})?"
    return re.escape(s[:3]) + tail


def _tail(key: str, most: int = 8) -> str:
    """A pattern for the key's last 2 characters, preceded by up to ``most`` of them in all."""
    s = key[-most:]
    head = ""
    for c in s[:-2]:
        head = f"(?:{head}{re.escape(c)})?"
    return head + re.escape(s[-2:])


class Redactor:
    """Replaces the agent's keys, whole or masked, in text and JSON-like values."""

    def __init__(self, *keys: str, enabled: bool = True) -> None:
        self.enabled = enabled
        self._keys: list[str] = []
        self._masked: list[re.Pattern[str]] = []
        for key in keys:
            self.add(key)

    def add(self, key: str) -> None:
        """A key the agent now uses (a refreshed one too): redact it from here on."""
        if not key or key in self._keys:
            return
        self._keys.append(key)
        self._keys.sort(key=len, reverse=True)  # a key containing another goes first
        if len(key) >= MIN_MASKED_KEY:
            self._masked.append(re.compile(_head(key) + _MASK + _tail(key)))

    def text(self, s: str) -> str:
        if not (self.enabled and isinstance(s, str)):
            return s
        for key in self._keys:
            s = s.replace(key, PLACEHOLDER)
        for pattern in self._masked:
            s = pattern.sub(PLACEHOLDER, s)
        return s

    def obj(self, value: Any) -> Any:
        """Every string of a JSON-like value (keys of mappings too), redacted."""
        if not self.enabled:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.obj(k): self.obj(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.obj(v) for v in value]
        return value
