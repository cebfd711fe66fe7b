"""The reference agent, run in-process through the adapter interface.

Theory of operation: `run_protocol` is a coroutine, so each run gets a fresh event loop on a
worker thread. The user abort (a threading.Event) is bridged into the loop's asyncio.Event by a
small watcher thread; the deadline is enforced inside the loop (asyncio.wait_for cancels the
turn) and, as a safety net, by a bounded join of the worker thread.

The outcome holds what the agent wrote, as it wrote it: its events (the agent keeps its own key
out of them), the traceback of a crash as its log, the error. Nothing is redacted here: the
runner judges DBG-02 on the outcome and redacts afterwards. The ``honest_exit`` broken copy is
reported as the command front end would be seen: exit 89 ("unsupported") after ``turn_end``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import traceback
from collections.abc import Callable
from importlib import resources
from typing import Any

from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest
from conformance.reference import HELLO, Behaviours, run_protocol

__all__ = ["DURATIONS_FILE", "ReferenceAdapter"]

DURATIONS_FILE = "reference_durations.json"  # beside this module
_JOIN_SLACK_S = 2.0  # extra time for the loop to unwind after the in-loop deadline fired


class ReferenceAdapter(AdapterBase):
    """The reference agent; pass altered `behaviours` to build deliberately broken copies."""

    # Each run has its own thread and event loop, and its suite is mostly scaled waits.
    overlap = True

    def __init__(self, behaviours: Behaviours | None = None, *, name: str = "reference") -> None:
        self.behaviours = behaviours if behaviours is not None else Behaviours()
        self.name = name

    def capabilities(self) -> set[str]:
        return {str(c) for c in HELLO.get("capabilities", [])}

    def typical_durations(self) -> dict[str, float]:
        # Measured by scripts/reference_durations.py; a stale table only orders a run less well.
        text = resources.files(__package__).joinpath(DURATIONS_FILE).read_text(encoding="utf-8")
        found: dict[str, float] = json.loads(text)["seconds"]
        return found

    def run(self, req: RunRequest) -> RunOutcome:
        events: list[dict[str, Any]] = []
        state: dict[str, Any] = {"status": "error", "error": None, "log": ""}
        lock = threading.Lock()

        def emit(event: dict[str, Any]) -> None:
            ev = dict(event)
            ev["t_ns"] = time.monotonic_ns()
            with lock:
                events.append(ev)

        def worker() -> None:
            loop = asyncio.new_event_loop()
            try:
                state["status"], state["error"] = loop.run_until_complete(self._turn(req, emit))
            except BaseException:  # the agent's own bug: report it, never raise into the runner
                state["log"] = traceback.format_exc()
                state["error"] = "reference agent raised: " + state["log"].strip().splitlines()[-1]
            finally:
                loop.close()

        thread = threading.Thread(target=worker, name="reference-agent", daemon=True)
        thread.start()
        thread.join(req.deadline_s + _JOIN_SLACK_S)
        if thread.is_alive():
            state["status"] = "timeout"
            state["error"] = f"reference agent did not stop within {req.deadline_s:g} s"
        with lock:
            snapshot = list(events)
        hello = next((e for e in snapshot if e.get("type") == "hello"), None)
        status, error = state["status"], state["error"]
        ended = any(e.get("type") == "turn_end" for e in snapshot)
        if status == "ran" and ended and not self.behaviours.honest_exit:
            # The front end of this broken copy exits 89 once turn_end is written.
            status = "unsupported"
            error = "exit 89 (unsupported) came after the turn: turn_end was already written"
        # It raised before its turn ended: as an outside program, that is its process dying.
        crashed = (
            status == "error" and not ended and str(error).startswith("reference agent raised")
        )
        return RunOutcome(
            status=status,
            events=snapshot,
            hello=hello,
            log=state["log"][:1_000_000],
            error=error,
            crashed=crashed,
        )

    async def _turn(
        self, req: RunRequest, emit: Callable[[dict[str, Any]], None]
    ) -> tuple[str, str | None]:
        loop = asyncio.get_running_loop()
        abort = asyncio.Event()
        done = threading.Event()

        def watch() -> None:
            # Bridge the runner's threading.Event into this loop without blocking it.
            while not done.is_set():
                if req.abort.wait(0.01):
                    loop.call_soon_threadsafe(abort.set)
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            await asyncio.wait_for(
                run_protocol(
                    req.start,
                    emit,
                    abort,
                    base_url=req.base_url,
                    api_key=req.api_key,
                    ca_file=req.ca_file,
                    behaviours=self.behaviours,
                ),
                timeout=req.deadline_s,
            )
        except TimeoutError:
            return "timeout", f"no turn_end within {req.deadline_s:g} s"
        finally:
            done.set()
            watcher.join(1.0)
        return "ran", None
