"""Thin async driver of the recovery core over aiohttp (HTTP and HTTPS), speaking adapter events.

Theory of operation: every decision lives in :class:`core.TurnCore`; this module only carries
out its actions and reports what happened as events. :func:`run_protocol` emits ``hello`` and
builds a :class:`_Driver`, which applies the core's first actions and then waits for the turn
to end or the user to abort. Each ``SendRequest`` becomes a task that POSTs the body and feeds
the core the headers, one :class:`Chunk` per server-sent event (a minimal SSE reader), then the
end or failure of the body; each ``StartTimer`` a task that sleeps the delay times
``time_scale``; each ``RunTool`` a task running ONE attempt of the tool on the :class:`ToolBox`
executor (a ``batch`` as one unit), reported raw as :class:`ToolOutcome` (the core decides
retries, limits, texts and caps); ``CancelTool`` cancels that task; ``LogToolCall`` appends a
line to ``tool-calls.jsonl`` in the debug directory; ``CallStopHook`` a task posting to the
hosted stop hook. Events are fed to the core at once, in the task that saw them,
and the returned actions carried out there too, so a stream the core gives up on is closed
before anything more is read. Cancel actions cancel those tasks. Once the abort flag is set the
core is fed ``Aborted`` instead of anything else, and a request task checks the flag before it
connects, so nothing is sent after an abort. On ``EndTurn``, an abort, or a bug (shown as an
error), every task still running is cancelled and exactly one ``turn_end`` is emitted.

Everything the agent writes (events, debug dumps, tool-call log lines) passes one
:class:`~conformance.reference.redaction.Redactor` on its way out, so that a key a server echoes
in an error body never reaches them (DBG-02); a refreshed key is added to it.

Wire dialects: the core speaks chat completions. ``start.dialect`` (default ``openai_chat``)
picks a codec (``_wire_*.py``) that renders each request body for its endpoint and turns each
server-sent event, and each 200 JSON body, back into chat chunks / a chat body before the core
sees them; error bodies pass unchanged.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import pkgutil
import random
import ssl as ssl_mod
import urllib.request
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from ._wire_base import ChatCodec, Codec
from .core import (
    Aborted,
    Action,
    Behaviours,
    BodyEnded,
    BodyFailed,
    CallStopHook,
    CancelRequest,
    CancelTimer,
    CancelTool,
    Chunk,
    ConnectFailed,
    Emission,
    EndTurn,
    Event,
    HeadersReceived,
    LogToolCall,
    RefreshCredentials,
    RunTool,
    SendRequest,
    StartTimer,
    StopHookDone,
    TimerFired,
    ToolOutcome,
    TurnCore,
    WriteDebugDump,
)
from .mcp_client import McpClient
from .redaction import Redactor
from .toolbox import BATCH_TOOL, ToolBox, ToolSpec, write_log_line

__all__ = ["DIALECTS", "HELLO", "Behaviours", "UnknownDialect", "codec_for", "run_protocol"]


def _codecs() -> dict[str, Callable[[], Codec]]:
    """Chat completions (the default), then each ``_wire_<name>.py`` module of this package
    that names its ``DIALECT`` and ``CODEC``, in file order: a new dialect is one module."""
    found: dict[str, Callable[[], Codec]] = {"openai_chat": ChatCodec}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if info.name.startswith("_wire_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            if hasattr(module, "DIALECT"):
                found[module.DIALECT] = module.CODEC
    return found


# Wire dialects by their adapter-protocol name (``start.dialect``); the first is the default.
DIALECTS: dict[str, Callable[[], Codec]] = _codecs()


class UnknownDialect(ValueError):
    """``start.dialect`` names a dialect the agent does not speak."""


def codec_for(dialect: str | None) -> Codec:
    """A fresh codec (it remembers credentials for one turn) for ``start.dialect``."""
    name = dialect or "openai_chat"
    if name not in DIALECTS:
        raise UnknownDialect(
            f"start.dialect {name!r} is not spoken by this agent (it speaks {', '.join(DIALECTS)})"
        )
    return DIALECTS[name]()


HELLO: dict[str, Any] = {
    "type": "hello",
    "agent": "conformance-reference",
    "version": "0.1",
    "capabilities": [
        "abort",
        "tools",
        "time_scale",
        "debug_dump",
        "hooks",
        "background_requests",
        "fallback_model",
        "compaction",
        "should_retry_header",
        "stream_fallback_config",
        "training_data_mode",
        "credential_refresh",
        "background_tools",
        "batch_tools",
        "media",
        # Hosted tools taken from MCP (start.tool_transport: mcp).
        "mcp_tools",
        # Wire dialects beyond chat completions (start.dialect): those it has a codec for.
        *(f"dialect:{name}" for name in DIALECTS if name != "openai_chat"),
    ],
}


class _Events:
    """SSE dispatch: ``data:`` lines joined by newlines, an event out on a blank line."""

    def __init__(self) -> None:
        self.buf: list[str] = []

    def line(self, line: str) -> str | None:
        """Take one line (without its end); the event it completes, if any."""
        if not line:
            out, self.buf = ("\n".join(self.buf) if self.buf else None), []
            return out
        if line.startswith("data:"):
            self.buf.append(line[5:].removeprefix(" "))
        return None


async def _sse(resp: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """Minimal SSE. A line may span any number of network reads (``readline`` joins them)."""
    events = _Events()
    while raw := await resp.content.readline():
        if (event := events.line(raw.decode("utf-8", "replace").rstrip("\r\n"))) is not None:
            yield event
    if (event := events.line("")) is not None:  # the body ended: dispatch what is open
        yield event


async def _sse_per_read(resp: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The broken copy's SSE (``sse_across_reads`` off), a classic client bug: each network
    read is parsed as whole events on its own, so a line a read boundary cuts is dropped and an
    event left open at the end of a read is forgotten."""
    while raw := await resp.content.readany():
        events = _Events()
        *lines, _cut = raw.decode("utf-8", "replace").split("\n")  # after the last newline
        for line in lines:
            if (event := events.line(line.rstrip("\r"))) is not None:
                yield event


class _Driver:
    def __init__(
        self,
        start: dict[str, Any],
        emit: Callable[[dict[str, Any]], None],
        session: aiohttp.ClientSession,
        abort: asyncio.Event,
        *,
        base_url: str,
        api_key: str,
        ssl: Any,
        behaviours: Behaviours,
        rng: random.Random,
        workdir: Path | None,
        refresh_key: Callable[[], str] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.start = start
        self.redactor = redactor or Redactor(api_key, enabled=behaviours.redact_own_key)
        self.emit = emit
        self.session = session
        self.abort = abort
        self.codec = codec_for(start.get("dialect"))
        self.url = base_url.rstrip("/") + self.codec.path
        self.auth = self.codec.headers(api_key)
        # RTY-10: where a refreshed key comes from (default: the run's credential source).
        self.refresh_key = refresh_key or (
            credential_source(start, api_key, ssl)
            if behaviours.fresh_credentials
            else (lambda: api_key)
        )
        self.ssl = ssl
        self.scale = float(start.get("time_scale", 1.0) or 1.0)
        config = dict(start.get("config") or {})
        debug_dir = start.get("debug_dir")
        self.debug_dir = Path(debug_dir) if debug_dir else None
        self.log_path = self.debug_dir / "tool-calls.jsonl" if self.debug_dir else None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        specs = [
            ToolSpec(t["name"], t.get("description", ""), t.get("parameters") or {})
            for t in start.get("tools") or []
        ]
        mcp = None
        if start.get("tool_transport") == "mcp" and start.get("mcp_endpoint"):
            mcp = McpClient(
                str(start["mcp_endpoint"]),
                session,
                ssl=ssl,
                timeout_s=float(config.get("tool_timeout_s") or 120) * self.scale,
                switches=behaviours.mcp,
            )
        self.tools = ToolBox(
            specs,
            hosted_endpoint=start.get("tool_endpoint"),
            mcp=mcp,
            workdir=workdir,  # local tools (read, write, edit, list, grep, shell) confined here
            time_scale=self.scale,
            timeout_s=float(config.get("tool_timeout_s") or 120),
            session=session,
            ssl=ssl,
            report_skipped=behaviours.report_skipped_items,
        )
        self.core = TurnCore(
            start, behaviours=behaviours, rand=rng.random, tools=self.tools.specs_for_request(set())
        )
        self.tasks: dict[tuple[str, Any], asyncio.Task[Any]] = {}
        self.finished = asyncio.Event()
        self.crash: BaseException | None = None

    # ---- the loop ----------------------------------------------------------------------
    async def run(self) -> str:
        if await self.tools.connect():  # tools over MCP: offer the ones its server lists
            self.core.offer(self.tools.specs_for_request(set()))
        self._apply(self.core.begin(asyncio.get_running_loop().time()))
        stopper = asyncio.ensure_future(self.abort.wait())
        finished = asyncio.ensure_future(self.finished.wait())
        try:
            await asyncio.wait({stopper, finished}, return_when=asyncio.FIRST_COMPLETED)
            if self.crash is not None:
                raise self.crash
            if self.abort.is_set():
                self.feed(Aborted())
                if not self.core.ended and not self.core.b.stop_on_abort:
                    await self.finished.wait()  # broken copy: the turn goes on after the abort
                    if self.crash is not None:
                        raise self.crash
        finally:
            for f in (stopper, finished):
                f.cancel()
            await asyncio.wait({stopper, finished})
            await self.shutdown()
        return self.core.reason or "error"

    def feed(self, event: Event) -> None:
        """Hand one event to the core and carry out its actions at once, in the calling task.

        At once, so that a stream the core gives up on is closed before more is read.
        """
        if self.core.ended:
            return
        if self.abort.is_set() and self.core.b.stop_on_abort:
            event = Aborted()  # the abort wins over whatever else arrived
        self._apply(self.core.handle(event, asyncio.get_running_loop().time()))

    async def shutdown(self) -> None:
        """Cancel every task still running and let them finish cancelling; end the MCP
        session, if any (not after an abort: nothing is sent then)."""
        if self.abort.is_set():
            self.tools.hush()
        tasks = {t for t in self.tasks.values() if t is not asyncio.current_task()}
        self.tasks.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        await self.tools.close()

    def _spawn(self, key: tuple[str, Any], coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks[key] = task
        task.add_done_callback(lambda t, key=key: self._forget(key, t))

    def _forget(self, key: tuple[str, Any], task: asyncio.Task[Any]) -> None:
        if self.tasks.get(key) is task:
            del self.tasks[key]
        if not task.cancelled() and task.exception() is not None and self.crash is None:
            # A bug in a task must end the turn, not leave it waiting forever.
            self.crash = task.exception()
            self.finished.set()

    def _cancel(self, key: tuple[str, Any]) -> None:
        task = self.tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def _apply(self, actions: list[Action]) -> None:
        for a in actions:
            started = self._task_for(a)
            if started is not None:
                self._spawn(*started)
                continue
            cancelled = _task_key(a)
            if cancelled is not None:
                self._cancel(cancelled)
                continue
            self._carry_out(a)

    def _task_for(self, a: Action) -> tuple[tuple[str, Any], Any] | None:
        """The key and coroutine of the task an action starts, or None when it starts none."""
        if isinstance(a, SendRequest):
            return ("req", a.request_id), self._request(a)
        if isinstance(a, StartTimer):
            return ("timer", a.timer_id), self._timer(a)
        if isinstance(a, RunTool):
            return ("tool", a.call_id), self._tool(a)
        if isinstance(a, CallStopHook):
            return ("hook", None), self._stop_hook()
        return None

    def _carry_out(self, a: Action) -> None:
        """An action that starts or cancels no task."""
        if isinstance(a, Emission):
            self.emit(a.event())
        elif isinstance(a, RefreshCredentials):
            key = self.refresh_key()
            self.redactor.add(key)
            self.auth = self.codec.headers(key)
        elif isinstance(a, LogToolCall):
            if self.log_path is not None:
                write_log_line(self.log_path, self.redactor.obj(a.record))
        elif isinstance(a, WriteDebugDump):
            self._dump(a)
        elif isinstance(a, EndTurn):
            if a.reason == "error" and self._hook_after_error():
                # Broken copy: the stop hook runs after an API error as after a completed
                # turn (ERR-03); its answer changes nothing, the turn has ended.
                self._spawn(("hook", None), self._hook_then_finish())
            else:
                self.finished.set()
        else:  # pragma: no cover - a new action the driver does not know
            raise TypeError(f"unknown action {a!r}")

    # ---- carrying out actions ----------------------------------------------------------
    async def _request(self, a: SendRequest) -> None:
        if self.abort.is_set() and self.core.b.stop_on_abort:
            return  # nothing is sent after an abort
        rid = a.request_id
        put = self.feed
        headers_seen = False
        model = str(a.body.get("model") or "")
        # The core speaks chat completions; the codec renders and reads the wire dialect.
        body = self.codec.request(a.body)
        try:
            async with self.session.post(
                self.url, json=body, headers=self.auth, ssl=self.ssl
            ) as resp:
                headers_seen = True
                put(HeadersReceived(rid, resp.status, dict(resp.headers), datetime.now(UTC)))
                if resp.status == 200 and a.body.get("stream"):
                    decoder = self.codec.decoder(model)
                    sse = _sse if self.core.b.sse_across_reads else _sse_per_read
                    async for data in sse(resp):
                        for piece in decoder.feed(data):
                            put(Chunk(rid, piece))
                            if self.tasks.get(("req", rid)) is not asyncio.current_task():
                                # Cancelled by the core; stop before reading what is buffered.
                                return
                    put(BodyEnded(rid, ""))
                else:
                    text = (await resp.read()).decode("utf-8", "replace")
                    if resp.status == 200:
                        text = self.codec.full_body(text, model)
                    put(BodyEnded(rid, text))
        except (TimeoutError, aiohttp.ClientError) as exc:
            reason = str(exc) or type(exc).__name__
            if headers_seen:
                put(BodyFailed(rid, reason))
            else:
                kind = "timeout" if isinstance(exc, TimeoutError) else "reset"
                put(ConnectFailed(rid, kind, reason))

    async def _timer(self, a: StartTimer) -> None:
        await asyncio.sleep(a.delay_s * self.scale)
        self.feed(TimerFired(a.timer_id))

    async def _tool(self, a: RunTool) -> None:
        if a.name == BATCH_TOOL:
            res = await self.tools.run_batch(a.call_id, a.arguments)
            self.feed(ToolOutcome(a.call_id, "final", res.output, res.status))
            return
        kind, text, error_type = await self.tools.attempt(a.call_id, a.name, a.arguments)
        if self.tools.take_changes():  # the MCP server's tools changed: offer them from now on
            self.core.offer(self.tools.specs_for_request(set()))
        self.feed(ToolOutcome(a.call_id, kind, text, error_type))

    def _hook_after_error(self) -> bool:
        config = self.start.get("config") or {}
        return (
            not self.core.b.no_hook_after_error
            and bool(config.get("stop_hook"))
            and bool(self.start.get("tool_endpoint"))
        )

    async def _hook_then_finish(self) -> None:
        try:
            await self._post_stop_hook()
        finally:
            self.finished.set()

    async def _stop_hook(self) -> None:
        """POST the hosted ``stop_hook`` once; report its block reason, if any."""
        self.feed(StopHookDone(await self._post_stop_hook()))

    async def _post_stop_hook(self) -> str | None:
        """POST the hosted ``stop_hook`` once; its block reason, if any."""
        endpoint = str(self.start.get("tool_endpoint") or "")
        blocked: str | None = None
        try:
            async with self.session.post(
                endpoint.rstrip("/") + "/stop_hook",
                json={"call_id": "stop_hook", "arguments": {}},
                ssl=self.ssl,
            ) as resp:
                data = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
            data = None
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("type") == "blocked":
            blocked = str(err.get("message") or "no reason given")
        return blocked

    def _dump(self, a: WriteDebugDump) -> None:
        """Debug dump of a rejected request (no headers; an echoed key redacted); never fails
        the turn."""
        if self.debug_dir is None:
            return
        try:
            self.debug_dir.mkdir(parents=True, exist_ok=True)
            text = json.dumps(self.redactor.obj(a.record), ensure_ascii=False, indent=1)
            (self.debug_dir / f"http-400-{a.index}.json").write_text(text)
        except OSError:
            pass


def _redacting(
    emit: Callable[[dict[str, Any]], None], redactor: Redactor
) -> Callable[[dict[str, Any]], None]:
    return lambda event: emit(redactor.obj(event))


async def run_protocol(
    start: dict[str, Any],
    emit: Callable[[dict[str, Any]], None],
    abort: asyncio.Event,
    *,
    base_url: str,
    api_key: str,
    ca_file: str | None = None,
    behaviours: Behaviours = Behaviours(),  # noqa: B008 - frozen dataclass
    rng: random.Random | None = None,
    workdir: Path | None = None,
    refresh_key: Callable[[], str] | None = None,
) -> str:
    """Run one turn for ``start``; emits ``hello``, the events, exactly one ``turn_end``.

    Returns the ``turn_end`` reason (``completed``, ``error`` or ``aborted``). ``refresh_key``
    reads the key from its source after a 401 for expired credentials (default:
    :func:`credential_source`).
    Every event reaches ``emit`` with the key (whole or masked) replaced by ``[REDACTED]``.
    """
    redactor = Redactor(api_key, enabled=behaviours.redact_own_key)
    emit = _redacting(emit, redactor)  # the one way out for events
    emit(dict(HELLO))
    ssl_ctx: Any = ssl_mod.create_default_context(cafile=ca_file) if ca_file else None
    reason, crashed = "error", False
    driver: _Driver | None = None
    async with aiohttp.ClientSession() as session:
        try:
            driver = _Driver(
                start,
                emit,
                session,
                abort,
                base_url=base_url,
                api_key=api_key,
                ssl=ssl_ctx,
                behaviours=behaviours,
                rng=rng or random.Random(),
                workdir=workdir,
                refresh_key=refresh_key,
                redactor=redactor,
            )
            reason = await driver.run()
        except Exception as exc:  # a bug must still end the turn
            if not behaviours.contain_crashes:
                crashed = True  # a broken copy: the bug takes the agent down (ERR-05)
                raise
            emit({"type": "error", "kind": "bad_request", "message": f"agent error: {exc}"})
            reason = "aborted" if abort.is_set() else "error"
        finally:
            if driver is not None:
                await driver.shutdown()
            if not crashed:
                emit({"type": "turn_end", "reason": reason})
    return reason


def credential_source(start: dict[str, Any], api_key: str, ssl: Any) -> Callable[[], str]:
    """Where a refreshed key comes from (RTY-10): the run's credential source,
    ``start.credential_url`` (``GET`` gives ``{"api_key": ...}``, null while none is issued),
    else the key given at the start."""
    url = start.get("credential_url")
    if not url:
        return lambda: api_key

    def fetch() -> str:
        # Synchronous on purpose: the refresh and the resend are one step of the core, and the
        # source is the local gateway. A source that fails leaves the key as it was.
        try:
            with urllib.request.urlopen(str(url), timeout=5, context=ssl or None) as r:
                key = json.load(r).get("api_key")
        except (OSError, ValueError, AttributeError):
            key = None
        return key if isinstance(key, str) and key else api_key

    return fetch


def _task_key(a: Action) -> tuple[str, Any] | None:
    """The key of the task an action cancels, or None when it cancels none."""
    if isinstance(a, CancelRequest):
        return ("req", a.request_id)
    if isinstance(a, CancelTimer):
        return ("timer", a.timer_id)
    if isinstance(a, CancelTool):
        return ("tool", a.call_id)
    return None
