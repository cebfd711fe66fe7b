"""What one process of a run measures for all of them.

With ``-n N`` a run is N pytest-xdist processes, and each one used to calibrate an agent's fast
clock before its first scenario: N calibrations of the same agent on the same machine, all at
once, each measuring the others' load (a fast clock's calibration runs the agent four times per
speed). A :class:`Share` is a directory the run's processes all see (the controller names it in
:data:`ENV`): the first process to need a measurement takes a lock on it, measures and writes it;
the others wait on that lock and read what it wrote. One calibration per run, none at the same
time as another. The lock is the operating system's (``flock``): a process that dies holding it
releases it, and the next one measures instead.

Without the variable (a run in one process, or the plugin under a pytest of the user's own),
every process measures for itself, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["ENV", "Share"]

ENV = "CONFORMANCE_RUN_SHARE"


class Share:
    """The run's shared measurements, in ``folder`` (None: nothing shared)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @classmethod
    def from_env(cls) -> Share:
        named = os.environ.get(ENV)
        return cls(Path(named) if named else None)

    def once(self, key: str, measure: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        """``measure()``'s JSON object for ``key``, measured by one process of the run; whether
        this process measured it (False: another one did, and this one read it)."""
        if self.folder is None:
            return measure(), True
        stem = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        path = self.folder / f"{stem}.json"
        with self._locked(self.folder / f"{stem}.lock"):
            if path.exists():
                return json.loads(path.read_text(encoding="utf-8")), False
            found = measure()
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(found), encoding="utf-8")
            tmp.replace(path)  # whole or absent, should this process die while writing
            return found, True

    @staticmethod
    @contextlib.contextmanager
    def _locked(path: Path) -> Iterator[None]:
        with open(path, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
