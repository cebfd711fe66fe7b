"""Evidence kept once per scenario: its full bytes in a compressed file, and cut text for pages.

Theory of operation: each scenario's entry of the results (journal, events, agent log, all
redacted like everything the report writes) is written once, whole, as
``evidence/<agent>/<scenario>.json.xz`` beside the pages; the pages show each body cut to a
size a browser opens at once, head and tail with the cut said in place, its full size, and where
in that file the whole of it is. xz at its fastest preset: a shipped agent resends the same
system prompt and tool list with every request, and xz's dictionary (unlike gzip's 32 KiB
window) reaches back across requests, so such a journal shrinks some fortyfold at about the
speed of gzip's fastest level. Files are compressed on a small thread pool (lzma releases the
GIL while it works).
"""

from __future__ import annotations

import json
import lzma
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EVIDENCE_SUFFIX", "Cut", "cut", "human_bytes", "write_evidence"]

EVIDENCE_SUFFIX = ".json.xz"


@dataclass(frozen=True)
class Cut:
    """Text as a page shows it: ``text`` (the whole, or its head and tail with a marker
    between), ``chars`` and ``bytes`` of the whole, ``omitted`` characters left out."""

    text: str
    chars: int
    bytes: int
    omitted: int

    @property
    def size(self) -> str:
        """The whole text's size, for the note beside a cut."""
        return human_bytes(self.bytes)


def human_bytes(n: int) -> str:
    """``812 bytes``, ``12.3 KB``, ``4.1 MB`` (powers of 1000)."""
    if n < 1000:
        return f"{n} bytes"
    if n < 1_000_000:
        return f"{n / 1000:.1f} KB"
    return f"{n / 1_000_000:.1f} MB"


def cut(text: str, limit: int) -> Cut:
    """``text`` whole when it has at most ``limit`` characters, else its first three quarters
    of ``limit`` and last quarter with ``[… N characters cut …]`` between (the end of a stream
    or a log says how it ended)."""
    n = len(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    if n <= limit:
        return Cut(text, n, size, 0)
    head, tail = (limit * 3) // 4, limit // 4
    omitted = n - head - tail
    shown = f"{text[:head]}\n[… {omitted} characters cut here …]\n{text[n - tail :]}"
    return Cut(shown, n, size, omitted)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, preset=0))


def write_evidence(path: Path, scenario: dict[str, Any], pool: Executor | None = None) -> Any:
    """Write ``scenario`` (already redacted) whole to ``path``; on ``pool`` when given (the
    future is returned), else now."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Compact: json's C encoder (an indent makes it use the pure-Python one, ten times slower).
    data = json.dumps(scenario, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if pool is None:
        _write(path, data)
        return None
    return pool.submit(_write, path, data)
