"""Secret redaction applied to everything before it is rendered.

Theory of operation: the whole results structure is deep-copied with every string scrubbed
(given secrets, ``Bearer`` tokens) and the values of the credential headers (``SECRET_HEADERS``)
replaced; the template environment also scrubs each value it prints, so strings
derived later (pretty JSON, joined text) are covered too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

__all__ = ["MASK", "Redactor"]

MASK = "[REDACTED]"
# A copy of fakes.session.SECRET_HEADERS (reports imports nothing of ours); a test holds them equal.
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "proxy-authorization",
        "api-key",  # Azure OpenAI
        "cf-aig-authorization",  # Cloudflare AI Gateway
        "x-portkey-api-key",  # Portkey
    }
)
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")
_HEADER_LINE = re.compile(
    r"(?im)^((?:" + "|".join(sorted(map(re.escape, SECRET_HEADERS))) + r")\s*:\s*)(.+)$"
)


class Redactor:
    """Scrubs given secrets, bearer tokens and secret header values."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        # Longest first so a secret containing another is removed whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """Return ``value`` with every secret replaced by MASK."""
        for s in self._secrets:
            if s in value:
                value = value.replace(s, MASK)
        # The patterns are case-insensitive scans; a plain search of the lower-cased text
        # first spares them the (nearly all) strings they cannot match: a results file of
        # hundreds of MB is redacted in seconds.
        low = value.lower()
        if not value.isascii():  # the patterns take dotless ı and dotted İ for an i
            low = low.replace("i\u0307", "i").replace("\u0131", "i")
        if ":" in value and any(h in low for h in SECRET_HEADERS):
            value = _HEADER_LINE.sub(lambda m: m.group(1) + MASK, value)
        if "bearer" in low:
            value = _BEARER.sub(f"Bearer {MASK}", value)
        return value

    def deep(self, value: Any, *, keys: bool = True) -> Any:
        """Return a redacted deep copy of a JSON-like value; ``keys=False`` leaves dict keys as
        they are (a document whose keys are its structure, not data)."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind in (int, float, bool) or value is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                key = self.text(k) if keys and isinstance(k, str) else k
                if isinstance(k, str) and k.lower() in SECRET_HEADERS and v is not None:
                    out[key] = MASK
                else:
                    out[key] = self.deep(v, keys=keys)
            return out
        if isinstance(value, list | tuple):
            return [self.deep(v, keys=keys) for v in value]
        return value

    def __call__(self, value: Any) -> Any:
        """Jinja ``finalize`` hook: scrub strings, pass everything else through. Markup is a
        macro's output (the pictures), every value of which went through this hook already;
        scrubbing it again would turn it into text to escape."""
        if isinstance(value, Markup):
            return value
        return self.text(value) if isinstance(value, str) else value
