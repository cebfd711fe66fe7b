"""The cache folder: what a run keeps for the next ones on the same machine.

Two kinds of entries are kept: how long each scenario took an agent (``conformance.durations``:
the order of its next run) and the fast clock an agent's calibration chose
(``conformance.calibration``: its next run need not calibrate again). An entry is a JSON file
named by a digest of its key, under a folder per kind, in :func:`cache_folder`; the file repeats
its key, so a file of another key (a digest collision, a hand-copied file) is never read as this
one's.

Nothing here decides a verdict by itself: a missing, unreadable or foreign file reads as no
entry, and a file that cannot be written is passed over. An entry is written whole or not at all
(a temporary file renamed over it), whichever of two runs writes last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["ENV", "cache_folder", "read_entry", "write_entry"]

ENV = "CONFORMANCE_CACHE_DIR"


def cache_folder() -> Path:
    """Where the entries are kept: :data:`ENV`, else ``$XDG_CACHE_HOME/agent-conformance``,
    else ``~/.cache/agent-conformance``."""
    named = os.environ.get(ENV)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent-conformance"


def _path(kind: str, key: Any) -> Path:
    words = json.dumps(key, sort_keys=True).encode("utf-8")
    return cache_folder() / kind / f"{hashlib.sha256(words).hexdigest()[:16]}.json"


def read_entry(kind: str, key: Any) -> dict[str, Any] | None:
    """The entry of ``kind`` kept under ``key`` (a JSON value), or None."""
    try:
        doc = json.loads(_path(kind, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != f"conformance-{kind}":
        return None
    if doc.get("key") != json.loads(json.dumps(key)):  # as JSON reads it back (tuples as lists)
        return None
    return doc


def write_entry(kind: str, key: Any, body: dict[str, Any]) -> None:
    """Keep ``body`` (JSON) as the entry of ``kind`` under ``key``; passed over when the cache
    cannot be written."""
    doc = {"format": f"conformance-{kind}", "key": key, **body}
    path = _path(kind, key)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=0), encoding="utf-8")
        tmp.replace(path)
