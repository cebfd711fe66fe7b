"""How much of its journal a session keeps: everything (the default), or a bounded ring.

A conformance run judges every request and every byte, so a session keeps its journal whole
unless told otherwise. A gateway left running for a load test or a long probe session
(``fakes serve``) keeps a ring of its last ``entries`` entries, and any body larger than
``body_bytes`` (a request's, or the bytes of a reply) as a ``Digest``: its SHA-256, its size and
its first and last characters. So its memory stays flat however long it serves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fakes.errors import FakesError
from fakes.journal import Digest, RetentionRecord

__all__ = ["EDGE_CHARS", "REDACTED", "Retention", "digest", "kept_text", "redact"]

# How many characters of a digested body its head and its tail keep.
EDGE_CHARS = 512
# What stands in the journal for a secret (an API key): in headers, bodies and digests.
REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class Retention:
    """``entries``: keep the last so many journal entries; ``body_bytes``: keep larger bodies as
    a digest. None: no bound (a conformance run's default)."""

    entries: int | None = None
    body_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("entries", "body_bytes"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise FakesError(f"journal retention: {name} must be an integer >= 1 or None")

    @property
    def bounded(self) -> bool:
        return self.entries is not None or self.body_bytes is not None

    def keeps_whole(self, size: int) -> bool:
        """Whether a body of ``size`` bytes is kept as it is."""
        return self.body_bytes is None or size <= self.body_bytes

    def record(self, dropped: int) -> RetentionRecord:
        return {"entries": self.entries, "body_bytes": self.body_bytes, "dropped": dropped}


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        text = text.replace(s, REDACTED)
    return text


def digest(data: bytes, secrets: tuple[str, ...] = ()) -> Digest:
    """What a bounded journal keeps of ``data``; the head and tail are cut from the redacted
    text, so no part of a secret shows at their edges."""
    text = redact(data.decode("utf-8", "replace"), secrets)
    return {
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "head": text[:EDGE_CHARS],
        "tail": text[-EDGE_CHARS:] if len(text) > EDGE_CHARS else "",
    }


def kept_text(
    data: bytes, secrets: tuple[str, ...], retention: Retention
) -> tuple[str | None, Digest | None]:
    """The text a journal keeps of ``data`` (decoded, secrets redacted), or its digest."""
    if retention.keeps_whole(len(data)):
        return redact(data.decode("utf-8", "replace"), secrets), None
    return None, digest(data, secrets)
