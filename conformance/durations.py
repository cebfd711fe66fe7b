"""How long each scenario took an agent in its earlier runs: the order of its next run.

A run's scenarios go longest first, dealt over its processes (``conformance.plugin.dealt``),
so that the long ones do not start last. Without an earlier run, "longest" is the deadline
floor (``conformance.judging.deadlines.floor_s``): what a correct agent may need, an upper bound
that is far off for some agents (the reference agent ends a 390 s stall at its own 60 s idle
limit). A run that ends writes the time each scenario took (its confirmations and reruns
included) to a file per agent, dialect, tool transport and time scale, in the cache folder
(:data:`ENV`, else ``$XDG_CACHE_HOME/agent-conformance``, else ``~/.cache/agent-conformance``);
the next such run orders its scenarios by those times when it knows every one of them.

Nothing here changes a verdict: a missing, unreadable or stale file only orders a run less
well, and a file that cannot be written is passed over. ``conformance run`` reads the file once
and hands the times to its processes (``conformance.share``), so that they all order the
scenarios alike while another run rewrites it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["ENV", "DurationsKey", "cache_folder", "read_durations", "write_durations"]

ENV = "CONFORMANCE_CACHE_DIR"
_FORMAT = "conformance-durations"


def cache_folder() -> Path:
    """Where the durations files are kept."""
    named = os.environ.get(ENV)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent-conformance"


DurationsKey = tuple[str, str, str, float]  # agent, dialect, tool transport, time scale


def _path(key: DurationsKey) -> Path:
    words = json.dumps(list(key)).encode("utf-8")
    return cache_folder() / "durations" / f"{hashlib.sha256(words).hexdigest()[:16]}.json"


def read_durations(key: DurationsKey) -> dict[str, float]:
    """{scenario id: seconds} of the agent's earlier runs under ``key`` (empty: none known)."""
    try:
        doc = json.loads(_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("key") != list(key):
        return {}
    found = doc.get("seconds")
    if not isinstance(found, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in found.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    }


def write_durations(key: DurationsKey, seconds: Mapping[str, float]) -> None:
    """Add ``seconds`` ({scenario id: seconds} of this run) to the file under ``key``: the
    scenarios this run did not run keep their earlier times. Passed over when it cannot be
    written."""
    if not seconds:
        return
    path = _path(key)
    known = read_durations(key)
    known.update({k: round(v, 3) for k, v in seconds.items()})
    doc: dict[str, Any] = {
        "format": _FORMAT,
        "key": list(key),
        "seconds": dict(sorted(known.items())),
    }
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=0), encoding="utf-8")
        tmp.replace(path)  # whole or absent, whichever run writes last
