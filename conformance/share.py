"""What one process of a run measures for all of them.

With ``-n N`` a run is N pytest-xdist processes, and each one used to calibrate an agent's fast
clock before its first scenario: N calibrations of the same agent on the same machine, all at
once, each measuring the others' load (a fast clock's calibration runs the agent four times per
speed). A :class:`Share` is a directory the run's processes all see (the controller names it in
:data:`ENV`): the first process to need a measurement takes a lock on it, measures and writes it;
the others wait on that lock and read what it wrote. One calibration per run, none at the same
time as another. The lock is the operating system's (``flock``): a process that dies holding it
releases it, and the next one measures instead.

The same directory lets a run that must have the machine to itself have it
(:meth:`Share.hold`): a failed timing verdict is confirmed on a slower clock
(``conformance.verify``), and a loaded machine is what makes an agent's waits late, its own
run's other runs most of all. A confirming run made at once waits for the others to finish
their scenario and runs alone; then they go on. (``conformance run -n N`` makes its
confirmations once every process is done, ``conformance.session``: the hold is then what keeps
two runs in flight in one process, ``conformance.ahead``, out of a confirmation's way.)

The folder is also what lets runs in one process hold the machine: an agent that overlaps its
runs (``conformance.ahead``) has two in flight, so a run of one process with such an agent has a
folder too. The folder says how many processes the run has (:meth:`Share.create`), so that a
process tells whether there are others.

Without the variable (a run in one process of an agent that does not overlap its runs, or the
plugin under a pytest of the user's own), every process measures for itself and nothing waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["ENV", "Share"]

ENV = "CONFORMANCE_RUN_SHARE"


# How long a confirming run waits for the machine to itself: an ordinary run in flight may be an
# agent that never ends its turn, held to its deadline (minutes). Past this, it runs beside them.
ALONE_WAIT_S = 120.0


class Share:
    """The run's shared measurements, in ``folder`` (None: nothing shared)."""

    def __init__(self, folder: Path | None, alone_wait_s: float = ALONE_WAIT_S) -> None:
        self.folder = folder
        self.alone_wait_s = alone_wait_s
        self.processes = self._processes()  # read once: the folder's maker wrote it first

    @classmethod
    def from_env(cls) -> Share:
        named = os.environ.get(ENV)
        return cls(Path(named) if named else None)

    @classmethod
    def create(cls, folder: Path, processes: int) -> Share:
        """A new run's share in the empty ``folder``, for a run of ``processes`` processes."""
        (folder / "processes").write_text(str(processes), encoding="utf-8")
        return cls(folder)

    def _processes(self) -> int:
        """How many processes the run has (1 without a folder, or one made without a count)."""
        if self.folder is None:
            return 1
        try:
            return max(1, int((self.folder / "processes").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return 1

    def write_json(self, name: str, value: Any) -> None:
        """Put ``value`` in the folder as ``name``, for the run's processes (nothing without a
        folder)."""
        if self.folder is not None:
            (self.folder / name).write_text(json.dumps(value), encoding="utf-8")

    def read_json(self, name: str) -> Any:
        """What :meth:`write_json` put as ``name`` (None when nothing was)."""
        if self.folder is None:
            return None
        try:
            return json.loads((self.folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

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

    @contextlib.contextmanager
    def hold(self, alone: bool) -> Iterator[bool]:
        """Hold while a scenario runs: with the run's other processes for an ordinary run
        (shared), alone for a run that must have the machine to itself (exclusive: a timing
        verdict's confirmation, conformance.verify). An exclusive holder waits for the shared
        ones to finish their scenario; while it waits or runs, no new one starts (a turnstile,
        so that a stream of ordinary runs cannot keep it waiting to the end of the run). It
        waits ``alone_wait_s`` at most, then runs beside the others. Yields whether the run
        has what it asked for: False only for one that asked to be alone and is not."""
        if self.folder is None:
            yield True
            return
        with open(self.folder / "machine.lock", "a+b") as machine:
            with self._locked(self.folder / "turnstile.lock"):
                had = alone and _flock_within(machine, fcntl.LOCK_EX, self.alone_wait_s)
                if not had:
                    fcntl.flock(machine, fcntl.LOCK_SH)
            try:
                yield had or not alone
            finally:
                fcntl.flock(machine, fcntl.LOCK_UN)

    @staticmethod
    @contextlib.contextmanager
    def _locked(path: Path) -> Iterator[None]:
        with open(path, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _flock_within(handle: Any, mode: int, seconds: float) -> bool:
    """Take ``mode`` on ``handle`` within ``seconds``; whether it was taken."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)  # flock has no timeout of its own
