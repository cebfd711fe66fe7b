"""What every in-process SDK adapter shares: the worker thread and its deadline, events, hosted
tools, and a typed error kind read from whatever the SDK raised.

An SDK adapter writes one function, `turn(ctx)`, that drives the SDK's own agent loop and reports
through `ctx.emit`; `run_turn` runs it on a worker thread, bounded by the run's deadline, and
returns its `RunOutcome` unredacted (the runner redacts). The SDK's request layer is left at its defaults: these adapters
add no retries, no fallback, no time scaling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import httpx

from conformance.adapters.interface import RunOutcome, RunRequest, as_status, redact

__all__ = [
    "DEFAULT_TOOL_TIMEOUT_S",
    "TurnContext",
    "call_tool_async",
    "error_event",
    "error_kind",
    "openai_tools",
    "run_async",
    "run_turn",
]

DEFAULT_TOOL_TIMEOUT_S = 60.0  # the loop's own tool limit when the scenario sets none
_JOIN_SLACK_S = 1.0  # time for the worker to see a closed client and unwind


class TurnContext:
    """One run: the request, an event sink, the hosted tools and a place for cleanups."""

    def __init__(self, req: RunRequest) -> None:
        self.req = req
        self.start = req.start
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._cleanups: list[Callable[[], Any]] = []
        cfg = self.start.get("config") or {}
        self.tool_timeout_s = float(cfg.get("tool_timeout_s") or DEFAULT_TOOL_TIMEOUT_S)
        # Tools go through a client of their own: the SDK's client stays at its defaults.
        self.tool_http = httpx.Client(verify=req.ca_file or True, trust_env=False)
        self.on_cleanup(self.tool_http.close)

    def emit(self, ev: dict[str, Any]) -> None:
        with self._lock:
            self.events.append({**ev, "t_ns": time.monotonic_ns()})

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def on_cleanup(self, fn: Callable[[], Any]) -> None:
        self._cleanups.append(fn)

    def cleanup(self) -> None:
        for fn in reversed(self._cleanups):
            # closing is best effort: the run's outcome is already known
            with contextlib.suppress(Exception):
                fn()

    @property
    def model(self) -> str:
        return str(self.start.get("model") or "conformance-model")

    @property
    def prompt(self) -> str:
        return str(self.start.get("prompt") or "")

    def call_tool(self, name: str, call_id: str, arguments: Any) -> tuple[str, str]:
        """POST one hosted tool call; returns (status, output) and emits the `tool` event.

        `arguments` is the model's JSON text or an already parsed value (SDKs differ).
        """
        status, output = self._post_tool(name, call_id, arguments)
        self.emit(
            {"type": "tool", "call_id": call_id, "name": name, "status": status, "output": output}
        )
        return status, output

    def _post_tool(self, name: str, call_id: str, arguments: Any) -> tuple[str, str]:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError:
                return "error", "Error: tool arguments are not valid JSON"
        try:
            r = self.tool_http.post(
                f"{self.start['tool_endpoint']}/{name}",
                json={"call_id": call_id, "arguments": arguments},
                timeout=self.tool_timeout_s,
            )
            body = r.json()
        except httpx.TimeoutException:
            return "error", f"Error: tool {name} timed out after {self.tool_timeout_s:g} s"
        except (httpx.HTTPError, ValueError) as exc:
            return "error", f"Error: tool {name} failed: {type(exc).__name__}"
        if not isinstance(body, dict):
            return "error", f"Error: tool {name} returned no JSON object"
        if "error" in body:
            err = body["error"] if isinstance(body["error"], dict) else {}
            return "error", f"Error: {err.get('message') or err.get('type') or 'tool failed'}"
        return "ok", str(body.get("output", ""))


def run_async(ctx: TurnContext, coro_fn: Callable[[], Any]) -> Any:
    """Run an async SDK turn on this worker thread's own event loop.

    At the deadline the harness thread cancels the task (thread-safely), so the SDK's pending
    request is abandoned instead of running on after the session closed.
    """
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(coro_fn())

        def cancel() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)

        ctx.on_cleanup(cancel)
        return loop.run_until_complete(task)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def call_tool_async(
    ctx: TurnContext, name: str, call_id: str, arguments: Any
) -> tuple[str, str]:
    """`ctx.call_tool` off the event loop (the hosted tool may hang until its time limit)."""
    return await asyncio.to_thread(ctx.call_tool, name, call_id, arguments)


def openai_tools(start: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenario's tools in chat-completions `tools` form."""
    return [
        {
            "type": "function",
            "function": {k: t[k] for k in ("name", "description", "parameters") if k in t},
        }
        for t in start.get("tools") or []
    ]


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        v = getattr(exc, attr, None)
        if isinstance(v, int) and 100 <= v < 600:
            return v
    resp = getattr(exc, "response", None)
    v = getattr(resp, "status_code", None)
    return v if isinstance(v, int) else None


def error_kind(exc: BaseException) -> str:
    """A typed error kind (adapter protocol, ERR-01) for what an SDK raised.

    Read from the HTTP status the SDK attached, else from the exception's class: this is the
    information the SDK hands its caller, nothing the wire alone would tell.
    """
    status = _status_of(exc)
    text = str(exc).lower()
    if status is not None:
        if status == 400 and ("context_length_exceeded" in text or "context length" in text):
            return "prompt_too_long"
        table = {
            401: "auth",
            402: "billing",
            403: "permission",
            404: "not_found",
            408: "timeout",
            413: "request_too_large",
            429: "rate_limit",
            529: "overloaded",
        }
        if status in table:
            return table[status]
        if status >= 500:
            return "server"
        if status >= 400:
            return "bad_request"
    names = " ".join(c.__name__ for c in type(exc).__mro__).lower()
    if "timeout" in names:
        return "timeout"
    if any(w in names for w in ("connection", "protocol", "readerror", "networkerror")):
        return "connection"
    return "server"  # an in-band error, a malformed event: the server's reply was broken


def error_event(exc: BaseException) -> dict[str, Any]:
    """The `error` event an agent on this SDK shows for `exc` (its own message, unchanged)."""
    msg = str(exc).strip() or type(exc).__name__
    return {"type": "error", "kind": error_kind(exc), "message": f"{type(exc).__name__}: {msg}"}


def run_turn(
    req: RunRequest,
    *,
    agent: str,
    version: str,
    capabilities: tuple[str, ...],
    turn: Callable[[TurnContext], None],
) -> RunOutcome:
    """Run `turn` on a worker thread within the run's deadline; never raises."""
    ctx = TurnContext(req)
    state: dict[str, Any] = {"log": "", "error": None}
    ctx.emit(
        {"type": "hello", "agent": agent, "version": version, "capabilities": list(capabilities)}
    )

    def worker() -> None:
        try:
            turn(ctx)
        except Exception:  # a bug in the adapter's loop: report it, never raise into the runner
            state["log"] = traceback.format_exc()
            state["error"] = f"{agent} adapter raised: " + state["log"].strip().splitlines()[-1]

    thread = threading.Thread(target=worker, name=f"{agent}-agent", daemon=True)
    thread.start()
    thread.join(req.deadline_s)
    timed_out = thread.is_alive()
    snapshot = ctx.snapshot()  # at the deadline: nothing later counts
    # Cancel an async turn and close the clients, so the worker sends nothing more once its
    # current request ends (a blocking read of a sync client is not interrupted; the daemon
    # thread then lingers until that request ends, but its outcome is no longer read).
    ctx.cleanup()
    if timed_out:
        thread.join(_JOIN_SLACK_S)
    if timed_out:
        status, error = "timeout", f"no turn_end within {req.deadline_s:g} s"
    elif state["error"]:
        status, error = "error", state["error"]
    elif not any(e.get("type") == "turn_end" for e in snapshot):
        status, error = "error", f"{agent} adapter returned without a turn_end"
    else:
        status, error = "ran", None
    key = req.api_key
    return RunOutcome(
        status=as_status(status),
        events=snapshot,
        hello=snapshot[0],
        log=redact(state["log"], key),
        error=redact(error, key) if error else None,
    )
