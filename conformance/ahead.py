"""Runs started ahead of their turn, so that two runs of an agent overlap in one process.

An agent whose runs mostly wait leaves its process idle most of a run: the reference agent's
whole suite is 31 s of scaled backoffs and stalls for 10 CPU seconds. Such an agent says so
(``Adapter.overlap``), and the run starts its next scenario while the current one is in flight:
two at a time per process. Results are still taken in the scenarios' order, so the results and
pytest's reports keep theirs; only the starting is early.

The next scenario is the one pytest names as ``nextitem``. Under pytest-xdist that item has left
the worker's queue already and can no longer be stolen by another worker, so a run started
ahead is always the one taken next. A run that is never taken (Ctrl-C) is dropped: its thread
is a daemon, so it keeps no process alive.

A run alone (a timing verdict's confirmation) still has the machine to itself: the run ahead
holds the machine shared like any other process's run (``conformance.share``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Ahead"]

T = TypeVar("T")


class _Started(Generic[T]):
    """One run on a thread of its own: its result or what it raised, once it ends."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._fn = fn
        self._result: T | None = None
        self._raised: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:  # handed to whoever takes the result, raised there
            self._raised = exc

    def result(self) -> T:
        self._thread.join()
        if self._raised is not None:
            raise self._raised
        return self._result  # type: ignore[return-value]  # set whenever nothing was raised


class Ahead(Generic[T]):
    """Runs started before their turn, by key; each taken once, in whatever order."""

    def __init__(self) -> None:
        self._started: dict[Hashable, _Started[T]] = {}
        self._lock = threading.Lock()

    def start(self, key: Hashable, fn: Callable[[], T]) -> None:
        """Start ``fn`` on a thread of its own, unless a run for ``key`` is started already."""
        with self._lock:
            if key not in self._started:
                self._started[key] = _Started(fn, f"ahead {key}")

    def result(self, key: Hashable, fn: Callable[[], T]) -> T:
        """The run started ahead for ``key`` once it ends (what it raised is raised here), or
        ``fn()`` run now when none was started."""
        with self._lock:
            started = self._started.pop(key, None)
        return fn() if started is None else started.result()
