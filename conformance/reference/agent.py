"""Async agent loop over an OpenAI-compatible chat-completions endpoint, speaking adapter events.

Theory of operation: :func:`run_protocol` emits ``hello``, runs one user turn as a task raced
against the ``abort`` event (an abort cancels everything in flight: nothing is sent after it),
and always ends with exactly one ``turn_end``. A turn is a loop of model requests. Each request
is first tried streaming with its own retry budget (:func:`retry.decide`, waits scaled by
``time_scale``); when the body fails after the headers, ends without ``finish_reason``, carries
a malformed or in-band error event, or goes idle, the partial messages are removed by id and the
identical request is resent once with ``stream: false`` (its own retry budget). Tool calls of a
failed attempt are never run. A ``length`` finish first raises the output limit once, then
appends the hidden continuation message, bounded by :class:`TruncationCounter`. Errors are
withheld until recovery is exhausted, then surfaced once, typed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import ssl as ssl_mod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from . import retry
from .continuation import (
    CONTINUATION_TEXT,
    DEFAULT_MAX_TOKENS,
    OUTPUT_LIMIT_ERROR,
    TruncationCounter,
    assistant_to_wire,
    raised_limit,
)
from .loops import LoopDetector
from .toolbox import ToolBox, ToolSpec

__all__ = ["HELLO", "Behaviours", "run_protocol"]

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
    ],
}

IDLE_TIMEOUT_S = 60.0  # unscaled: no chunk for this long = stream failure
MAX_EMPTY_REPLIES = 3  # bounded retries of empty 200 replies


MISSING_RESULT = "[No result: this tool call was interrupted before it returned.]"


def repair_history(messages: list[dict]) -> tuple[list[dict], int]:
    """Add a placeholder result after any tool call left without one; returns (messages, count)."""
    out: list[dict] = []
    added = 0
    i = 0
    while i < len(messages):
        msg = messages[i]
        out.append(msg)
        i += 1
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        if not calls:
            continue
        answered: set[str] = set()
        while i < len(messages) and messages[i].get("role") == "tool":
            answered.add(str(messages[i].get("tool_call_id")))
            out.append(messages[i])
            i += 1
        for call in calls:
            cid = str(call.get("id"))
            if cid not in answered:
                out.append({"role": "tool", "tool_call_id": cid, "content": MISSING_RESULT})
                added += 1
    return out, added


PRIVATE_FIELDS = ("signature", "reasoning_signature", "thinking_blocks")
OVERLOADS_BEFORE_FALLBACK = 3


def strip_private(messages: list[dict]) -> list[dict]:
    """History without vendor-private fields, for a different (fallback) model."""
    return [{k: v for k, v in m.items() if k not in PRIVATE_FIELDS} for m in messages]


@dataclass(frozen=True)
class Behaviours:
    """One switch per recovery behaviour; all on. Switching one off breaks only that one."""

    honour_retry_after: bool = True
    backoff: bool = True
    retry_5xx: bool = True
    retry_connection_errors: bool = True
    stream_fallback: bool = True
    remove_partial_messages: bool = True
    continuation: bool = True
    output_truncation: bool = True
    reasoning_preservation: bool = True
    withhold_errors: bool = True
    idle_watchdog: bool = True
    history_repair: bool = True
    model_fallback: bool = True
    context_recovery: bool = True
    loop_detection: bool = True


class _Surface(Exception):
    """A failure recovery could not fix: shown to the user as a typed error."""

    def __init__(
        self, kind: str, message: str, *, fallback_ok: bool = False, body: str = ""
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.fallback_ok = fallback_ok
        self.body = body  # the error reply's text, for context-window recovery


_CTX_MAX = re.compile(r"maximum context length is (\d+)")
_CTX_INPUT = re.compile(r"(\d+) in the messages")


def corrected_max_tokens(error_text: str) -> int | None:
    """RTY-11: a lower ``max_tokens`` that fits the window stated in a 400, or None."""
    m, i = _CTX_MAX.search(error_text), _CTX_INPUT.search(error_text)
    if not (m and i):
        return None
    room = int(m.group(1)) - int(i.group(1)) - 16  # small margin for counting differences
    return room if room > 0 else None


class _BodyFailed(Exception):
    """The stream failed after the response headers."""


@dataclass
class _Reply:
    content: str
    reasoning: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    usage: dict[str, Any] | None
    msg_id: str | None


class _Turn:
    def __init__(
        self,
        start: dict,
        emit: Callable[[dict], None],
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        api_key: str,
        ssl: Any,
        behaviours: Behaviours,
        rng: random.Random,
    ) -> None:
        self.start = start
        self.emit = emit
        self.session = session
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.auth = {"Authorization": f"Bearer {api_key}"}
        self.ssl = ssl
        self.b = behaviours
        self.rng = rng
        self.scale = float(start.get("time_scale", 1.0) or 1.0)
        self.config = dict(start.get("config") or {})
        self.ids = 0
        self.dumps = 0
        self.model = str(start.get("model", ""))
        self.overloads = 0
        self.compaction_failures = 0
        self.key = api_key or "\0"
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.workdir: Path | None = None

    def _new_id(self) -> str:
        self.ids += 1
        return f"m{self.ids}"

    async def _sleep(self, delay_s: float) -> None:
        await asyncio.sleep(max(0.0, delay_s) * self.scale)

    # ---- one request, both modes -------------------------------------------------------
    async def request(self, body: dict) -> _Reply:
        if self.start.get("stream", True) is False:
            return await self._mode(body, stream=False)
        fallback = self.b.stream_fallback and self.config.get("stream_fallback", True) is not False
        try:
            return await self._mode(body, stream=True)
        except _BodyFailed as exc:
            if not fallback:
                raise _Surface("stream", f"The response stream failed: {exc}") from exc
            why = f"stream failed ({exc})"
        except _Surface as exc:
            if not (fallback and exc.fallback_ok):
                raise
            why = exc.message
        try:
            return await self._mode(body, stream=False)
        except _Surface as exc:
            raise _Surface(
                exc.kind, f"{exc.message}; {why}; after a non-streaming fallback"
            ) from exc

    async def _mode(self, body: dict, *, stream: bool) -> _Reply:
        retries = 0
        empties = 0
        while True:
            payload = {**body, "stream": stream}
            headers_seen = False
            try:
                async with self.session.post(
                    self.url, json=payload, headers=self.auth, ssl=self.ssl
                ) as resp:
                    headers_seen = True
                    if resp.status != 200:
                        text = (await resp.read()).decode("utf-8", "replace")[:500]
                        status, hdrs, conn = resp.status, dict(resp.headers), None
                        if status == 400:
                            self._dump(payload, text)
                    elif stream:
                        return await self._read_stream(resp)
                    else:
                        reply = self._parse_full(await resp.json(content_type=None))
                        if reply is not None:
                            return reply
                        empties += 1
                        if empties > MAX_EMPTY_REPLIES:
                            raise _Surface("server", "The model kept returning empty replies")
                        continue
            except _BodyFailed:
                raise
            except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError) as exc:
                if headers_seen and stream:
                    raise _BodyFailed(str(exc) or type(exc).__name__) from exc
                status, hdrs, text = None, {}, str(exc)
                conn = "timeout" if isinstance(exc, asyncio.TimeoutError) else "reset"
            self.overloads = self.overloads + 1 if status == 529 else 0
            fb = self.config.get("fallback_model")
            if (
                self.b.model_fallback
                and fb
                and self.model != fb
                and self.overloads >= OVERLOADS_BEFORE_FALLBACK
            ):
                # Switch models and resend at once; the new model starts a fresh budget.
                self.model, self.overloads, retries = str(fb), 0, 0
                body = {**body, "model": self.model, "messages": strip_private(body["messages"])}
                continue
            d = retry.decide(
                retries_done=retries,
                now=datetime.now(UTC),
                rand=self.rng.random,
                status=status,
                connection_error=conn if status is None else None,
                headers=hdrs,
                honour_retry_after=self.b.honour_retry_after,
                backoff=self.b.backoff,
            )
            allowed = d.retry
            if status is None and not self.b.retry_connection_errors:
                allowed = False
            if status is not None and status >= 500 and not self.b.retry_5xx:
                allowed = False
            if not allowed:
                exhausted = d.retry or retries > 0 or "after" in d.reason
                msg = f"{d.reason}: {text}" if text else d.reason
                if retries:
                    msg += f" (after {retries} retries)"
                raise _Surface(
                    "prompt_too_long" if "context_length_exceeded" in text else d.kind,
                    msg,
                    body=text,
                    fallback_ok=exhausted
                    and d.delay_s is None
                    and (status is None or status in retry.RETRYABLE_STATUSES or status >= 500),
                )
            if not self.b.withhold_errors:
                self.emit({"type": "error", "kind": d.kind, "message": d.reason})
            retries += 1
            self.emit(
                {"type": "retry", "attempt": retries, "delay_s": d.delay_s, "reason": d.reason}
            )
            await self._sleep(d.delay_s or 0.0)

    def _dump(self, payload: dict, error: str) -> None:
        """Debug dump of a rejected request (no headers, so no key); never fails the turn."""
        debug_dir = self.start.get("debug_dir")
        if not debug_dir:
            return
        self.dumps += 1
        record = {
            "messages": payload.get("messages"),
            "model": payload.get("model"),
            "config": self.config,
            "error": error,
        }
        try:
            path = Path(debug_dir)
            path.mkdir(parents=True, exist_ok=True)
            text = json.dumps(record, ensure_ascii=False, indent=1).replace(self.key, "[REDACTED]")
            (path / f"http-400-{self.dumps}.json").write_text(text)
        except OSError:
            pass

    def _parse_full(self, data: Any) -> _Reply | None:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices:
            return None
        ch = choices[0]
        msg = ch.get("message") or {}
        reply = _Reply(
            msg.get("content") or "",
            msg.get("reasoning_content") or "",
            list(msg.get("tool_calls") or []),
            ch.get("finish_reason"),
            data.get("usage"),
            None,
        )
        if not (reply.content or reply.reasoning or reply.tool_calls):
            return None
        reply.msg_id = self._new_id()
        self._show(reply)
        return reply

    def _show(self, r: _Reply) -> None:
        self.emit(
            {
                "type": "message",
                "id": r.msg_id,
                "role": "assistant",
                "text": r.content,
                "reasoning": r.reasoning or None,
                "tool_calls": r.tool_calls or None,
                "meta": False,
            }
        )

    async def _read_stream(self, resp: aiohttp.ClientResponse) -> _Reply:
        r = _Reply("", "", [], None, None, None)
        calls: dict[int, dict[str, Any]] = {}
        try:
            async for event in self._sse(resp):
                if event == "[DONE]":
                    break
                try:
                    data = json.loads(event)
                except json.JSONDecodeError as exc:
                    raise _BodyFailed(f"malformed event: {event[:80]!r}") from exc
                if not isinstance(data, dict) or "error" in data:
                    raise _BodyFailed(f"error event: {event[:200]}")
                if data.get("usage"):
                    r.usage = data["usage"]
                for ch in data.get("choices") or []:
                    delta = ch.get("delta") or {}
                    r.content += delta.get("content") or ""
                    r.reasoning += delta.get("reasoning_content") or ""
                    for tc in delta.get("tool_calls") or []:
                        slot = calls.setdefault(
                            tc.get("index", 0),
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        slot["id"] = tc.get("id") or slot["id"]
                        fn = tc.get("function") or {}
                        slot["function"]["name"] += fn.get("name") or ""
                        slot["function"]["arguments"] += fn.get("arguments") or ""
                    if ch.get("finish_reason"):
                        r.finish_reason = ch["finish_reason"]
                r.tool_calls = [calls[i] for i in sorted(calls)]
                if r.content or r.reasoning or r.tool_calls:
                    r.msg_id = r.msg_id or self._new_id()
                    self._show(r)
            if r.finish_reason is None:
                raise _BodyFailed("stream ended without finish_reason")
        except _BodyFailed:
            self._withdraw(r)
            raise
        except (TimeoutError, aiohttp.ClientError) as exc:
            self._withdraw(r)
            raise _BodyFailed(str(exc) or type(exc).__name__) from exc
        return r

    def _withdraw(self, r: _Reply) -> None:
        if r.msg_id is not None and self.b.remove_partial_messages:
            self.emit({"type": "removed", "id": r.msg_id})

    async def _sse(self, resp: aiohttp.ClientResponse):
        """Minimal SSE: ``data:`` lines joined by newlines, dispatched on a blank line."""
        buf: list[str] = []
        idle = IDLE_TIMEOUT_S * self.scale if self.b.idle_watchdog else None
        while True:
            try:
                raw = await asyncio.wait_for(resp.content.readline(), idle)
            except TimeoutError as exc:
                raise _BodyFailed("no data for the idle time limit") from exc
            if not raw:
                if buf:
                    yield "\n".join(buf)
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                if buf:
                    yield "\n".join(buf)
                    buf = []
            elif line.startswith("data:"):
                buf.append(line[5:].removeprefix(" "))

    # ---- the turn ----------------------------------------------------------------------
    async def run(self) -> str:
        cfg = self.config
        specs = [
            ToolSpec(t["name"], t.get("description", ""), t.get("parameters") or {})
            for t in self.start.get("tools") or []
        ]
        debug_dir = self.start.get("debug_dir")
        log_path = Path(debug_dir) / "tool-calls.jsonl" if debug_dir else None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
        loops = LoopDetector()
        tools = ToolBox(
            specs,
            hosted_endpoint=self.start.get("tool_endpoint"),
            workdir=self.workdir,
            time_scale=self.scale,
            timeout_s=float(cfg.get("tool_timeout_s") or 120),
            session=self.session,
            ssl=self.ssl,
            log_path=log_path,
        )
        messages: list[dict] = list(self.start.get("history") or [])
        if self.b.history_repair:
            repaired, added = repair_history(messages)
            if added and cfg.get("training_data_mode"):
                # Fabricated results would poison training data: refuse instead of repairing.
                self.emit(
                    {
                        "type": "error",
                        "kind": "bad_request",
                        "message": (
                            f"History has {added} tool call(s) without results; training-data mode "
                            "refuses to add placeholder results."
                        ),
                    }
                )
                return "error"
            messages = repaired
        messages.append({"role": "user", "content": self.start.get("prompt", "")})
        user_limit = cfg.get("max_output_tokens")
        max_tokens = user_limit or DEFAULT_MAX_TOKENS
        raised = lowered = compacted = False
        counter = TruncationCounter()
        calls_left = int(cfg.get("max_tool_calls") or 50)
        for _ in range(calls_left + 20):  # every path bounded
            wire = strip_private(messages) if self.model != self.start.get("model") else messages
            body: dict[str, Any] = {"model": self.model, "messages": wire, "max_tokens": max_tokens}
            blocked = loops.blocked_tools() if self.b.loop_detection else set()
            offered = tools.specs_for_request(blocked)
            if offered:
                body["tools"] = offered
            try:
                reply = await self.request(body)
                loops.on_request_sent()
            except _Surface as exc:
                fixed = corrected_max_tokens(exc.body) if self.b.context_recovery else None
                if fixed is not None and fixed < max_tokens and not lowered:
                    max_tokens, lowered = fixed, True
                    continue
                if (
                    exc.kind == "prompt_too_long"
                    and self.b.context_recovery
                    and not compacted
                    and self.compaction_failures < 3
                ):
                    compacted = True  # one reactive compaction per user turn
                    summary = await self.compact(messages)
                    if summary is not None:
                        messages = [
                            {
                                "role": "user",
                                "content": f"Summary of the conversation so far:\n{summary}",
                            },
                            {"role": "assistant", "content": "Understood."},
                            {"role": "user", "content": self.start.get("prompt", "")},
                        ]
                        continue
                self.emit({"type": "error", "kind": exc.kind, "message": exc.message})
                return "error"
            if reply.usage:
                for k in self.usage:
                    self.usage[k] += int(reply.usage.get(k) or 0)
            truncated = reply.finish_reason == "length"
            if truncated and not reply.tool_calls:
                new = raised_limit(user_limit, max_tokens, already_raised=raised)
                if self.b.output_truncation and new is not None:
                    # Resend the same messages with a larger limit; this reply is superseded.
                    raised, max_tokens = True, new
                    if reply.msg_id:
                        self.emit({"type": "removed", "id": reply.msg_id})
                    continue
                if not self.b.continuation:
                    return self._done(messages, reply)
                if not counter.on_truncation(has_tool_calls=False):
                    self.emit(
                        {"type": "error", "kind": "output_limit", "message": OUTPUT_LIMIT_ERROR}
                    )
                    return "error"
                self._append(messages, reply)
                messages.append({"role": "user", "content": CONTINUATION_TEXT})
                self.emit(
                    {
                        "type": "message",
                        "id": self._new_id(),
                        "role": "user",
                        "text": CONTINUATION_TEXT,
                        "reasoning": None,
                        "tool_calls": None,
                        "meta": True,
                    }
                )
                continue
            if not reply.tool_calls:
                return self._done(messages, reply)
            counter.on_tool_calls()
            self._append(messages, reply)
            reminders: list[str] = []
            for call in reply.tool_calls:
                fn = call.get("function") or {}
                if calls_left <= 0:
                    self.emit(
                        {
                            "type": "error",
                            "kind": "bad_request",
                            "message": "Too many tool calls in this turn; stopping.",
                        }
                    )
                    return "error"
                calls_left -= 1
                res = await tools.run(
                    call.get("id", ""),
                    fn.get("name", ""),
                    fn.get("arguments") or "{}",
                    truncated=truncated,
                )
                self.emit(
                    {
                        "type": "tool",
                        "call_id": res.call_id,
                        "name": res.name,
                        "status": res.status,
                        "output": res.output,
                    }
                )
                messages.append(
                    {"role": "tool", "tool_call_id": res.call_id, "content": res.output}
                )
                if self.b.loop_detection:
                    note = loops.record_tool(res.name, fn.get("arguments"), res.is_error)
                    if note:
                        reminders.append(note)
            for note in reminders:
                # After all tool results, so the call/result pairing stays intact.
                messages.append({"role": "user", "content": note})
                self.emit(
                    {
                        "type": "message",
                        "id": self._new_id(),
                        "role": "user",
                        "text": note,
                        "reasoning": None,
                        "tool_calls": None,
                        "meta": True,
                    }
                )
        self.emit({"type": "error", "kind": "bad_request", "message": "Turn step limit reached."})
        return "error"

    def _append(self, messages: list[dict], r: _Reply) -> None:
        wire = assistant_to_wire(
            r.content, r.reasoning, r.tool_calls, preserve_reasoning=self.b.reasoning_preservation
        )
        if wire is not None:
            messages.append(wire)

    def _done(self, messages: list[dict], r: _Reply) -> str:
        self._append(messages, r)
        return "completed"

    async def stop_hook(self) -> None:
        """Call the hosted ``stop_hook`` once; a ``blocked`` error is shown to the user."""
        endpoint = self.start.get("tool_endpoint")
        if not endpoint:
            return
        url = endpoint.rstrip("/") + "/stop_hook"
        try:
            async with self.session.post(
                url, json={"call_id": "stop_hook", "arguments": {}}, ssl=self.ssl
            ) as resp:
                data = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
            return
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("type") == "blocked":
            reason = err.get("message") or "no reason given"
            self.emit(
                {
                    "type": "message",
                    "id": self._new_id(),
                    "role": "system",
                    "text": f"Stop hook blocked: {reason}",
                    "reasoning": None,
                    "tool_calls": None,
                    "meta": False,
                }
            )

    async def compact(self, messages: list[dict]) -> str | None:
        """A summarize request (no tools, non-streaming); the summary or None on failure."""
        body = {
            "model": self.model,
            "stream": False,
            "max_tokens": 2048,
            "messages": [
                {"role": "system", "content": "Summarize the conversation below concisely."},
                {"role": "user", "content": json.dumps(messages, ensure_ascii=False)[-200000:]},
            ],
        }
        try:
            async with self.session.post(
                self.url, json=body, headers=self.auth, ssl=self.ssl
            ) as resp:
                data = await resp.json(content_type=None) if resp.status == 200 else None
        except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
            data = None
        try:
            text = data["choices"][0]["message"]["content"]  # type: ignore[index]
        except (TypeError, KeyError, IndexError):
            text = None
        if not text:
            self.compaction_failures += 1
            return None
        self.compaction_failures = 0
        return str(text)

    async def title(self) -> None:
        """One auxiliary title request: non-streaming, no tools; a 429/529 is not retried."""
        body = {
            "model": self.start.get("model", ""),
            "stream": False,
            "max_tokens": 32,
            "messages": [
                {
                    "role": "system",
                    "content": "Write a short title for this "
                    "conversation. Reply with the title only.",
                },
                {"role": "user", "content": str(self.start.get("prompt", ""))},
            ],
        }
        try:
            async with self.session.post(
                self.url, json=body, headers=self.auth, ssl=self.ssl
            ) as resp:
                await resp.read()
        except (TimeoutError, aiohttp.ClientError):
            pass


async def run_protocol(
    start: dict,
    emit: Callable[[dict], None],
    abort: asyncio.Event,
    *,
    base_url: str,
    api_key: str,
    ca_file: str | None = None,
    behaviours: Behaviours = Behaviours(),
    rng: random.Random | None = None,
    workdir: Path | None = None,
) -> str:
    """Run one turn for ``start``; emits ``hello``, the events, exactly one ``turn_end``.

    Returns the ``turn_end`` reason (``completed``, ``error`` or ``aborted``).
    """
    emit(dict(HELLO))
    ssl_ctx: Any = ssl_mod.create_default_context(cafile=ca_file) if ca_file else None
    reason = "error"
    async with aiohttp.ClientSession() as session:
        turn = _Turn(
            start,
            emit,
            session,
            base_url=base_url,
            api_key=api_key,
            ssl=ssl_ctx,
            behaviours=behaviours,
            rng=rng or random.Random(),
        )
        turn.workdir = workdir  # local tools (read, write, edit, list, grep, shell) confined here

        async def whole() -> str:
            if turn.config.get("background_title"):
                await turn.title()
            result = await turn.run()
            if result == "completed" and turn.config.get("stop_hook"):
                await turn.stop_hook()
            return result

        task = asyncio.ensure_future(whole())
        stopper = asyncio.ensure_future(abort.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if abort.is_set():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                reason = "aborted"
            else:
                try:
                    reason = task.result()
                except Exception as exc:  # a bug must still end the turn
                    emit({"type": "error", "kind": "bad_request", "message": f"agent error: {exc}"})
                    reason = "error"
                if turn.usage["prompt_tokens"] or turn.usage["completion_tokens"]:
                    emit({"type": "usage", **turn.usage})
        finally:
            stopper.cancel()
            if not task.done():
                task.cancel()
            emit({"type": "turn_end", "reason": reason})
    return reason
