"""The reference agent's tool executor (TOL-01..09, TJS-*, FMT-*, DBG-03).

Theory of operation: ``ToolBox.run`` never raises for tool problems; every outcome
becomes a ``ToolResult`` whose ``output`` is what the model sees. Order: unknown
name -> arguments parsed and validated (``tool_args``) -> executed locally (when a
working directory is set and the tool is a local one) or on the hosted tool endpoint
-> output capped (``formatting``) -> truncation warning appended -> one JSON line
logged. Hosted transient failures (HTTP 503, connection errors) are retried up to 2
more times with a short scaled backoff; the whole call, retries included, is bounded
by ``timeout_s * time_scale`` real seconds, reported in unscaled seconds. A tool named
``batch`` (TOL-09, docs/contracts.md §5) is run here: each item is one call of the tool it
names, in order; the result has one line per item, completed, failed or skipped.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from conformance.reference.formatting import cap_output
from conformance.reference.local_tools import LOCAL_SPECS, LocalToolError, run_local
from conformance.reference.tool_args import parse_tool_arguments

__all__ = ["ToolBox", "ToolResult", "ToolSpec"]

_RETRIES = 2
_BACKOFF_S = 0.5  # unscaled; doubled on each retry
BATCH_TOOL = "batch"
_LINE_CHARS = 200  # an item's output as shown on its result line


@dataclass(frozen=True)
class ToolSpec:
    """One tool offered to the model (OpenAI function shape)."""

    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class ToolResult:
    """Outcome of one tool call; ``status`` is ok|error|timeout|denied|unknown|invalid."""

    call_id: str
    name: str
    output: str
    is_error: bool
    status: str


class _Transient(Exception):
    pass


class ToolBox:
    """Runs tool calls against hosted tools and, with ``workdir``, local tools."""

    def __init__(
        self,
        specs: list[ToolSpec],
        *,
        hosted_endpoint: str | None,
        workdir: Path | None,
        time_scale: float = 1.0,
        timeout_s: float = 120.0,
        output_limit: int = 30000,
        session: aiohttp.ClientSession | None = None,
        ssl: Any = None,
        log_path: Path | None = None,
    ) -> None:
        if time_scale <= 0 or timeout_s <= 0 or output_limit < 0:
            raise ValueError("ToolBox: time_scale and timeout_s must be > 0, output_limit >= 0")
        self._specs: dict[str, ToolSpec] = {s.name: s for s in specs}
        self._local: set[str] = set()
        if workdir is not None:
            for name, (desc, params) in LOCAL_SPECS.items():
                if name not in self._specs:
                    self._specs[name] = ToolSpec(name, desc, params)
                    self._local.add(name)
        self._endpoint = hosted_endpoint.rstrip("/") if hosted_endpoint else None
        self._workdir = workdir
        self._scale = time_scale
        self._timeout_s = timeout_s
        self._limit = output_limit
        self._session = session
        self._ssl = ssl
        self._log_path = log_path

    def specs_for_request(self, blocked: set[str]) -> list[dict]:
        """OpenAI ``tools`` entries, leaving out ``blocked`` tool names."""
        return [
            {
                "type": "function",
                "function": {
                    "name": s.name,
                    "description": s.description,
                    "parameters": s.parameters,
                },
            }
            for s in self._specs.values()
            if s.name not in blocked
        ]

    def schema_of(self, name: str) -> dict | None:
        """The JSON Schema of ``name``'s parameters, or None for an unknown tool."""
        spec = self._specs.get(name)
        return spec.parameters if spec else None

    async def run(
        self, call_id: str, name: str, raw_arguments: str | dict, *, truncated: bool
    ) -> ToolResult:
        """Execute one tool call; never raises for tool-side failures."""
        start = time.monotonic()
        args_size = (
            len(raw_arguments) if isinstance(raw_arguments, str) else len(json.dumps(raw_arguments))
        )
        result, attempts = await self._run(call_id, name, raw_arguments, truncated)
        self._log(result, time.monotonic() - start, args_size, attempts)
        return result

    async def _run(
        self, call_id: str, name: str, raw: str | dict, truncated: bool
    ) -> tuple[ToolResult, int]:
        if name not in self._specs:
            names = sorted(self._specs)
            close = difflib.get_close_matches(name, names, n=1)
            msg = f"Error: tool {name!r} does not exist. Available tools: {', '.join(names) or '(none)'}."
            if close:
                msg += f" Did you mean {close[0]!r}?"
            return ToolResult(call_id, name, msg, True, "unknown"), 0
        parsed = parse_tool_arguments(raw, truncated=truncated, schema=self.schema_of(name))
        if not parsed.ok:
            return ToolResult(call_id, name, f"Error: {parsed.error}", True, "invalid"), 0
        args = parsed.arguments or {}
        if name == BATCH_TOOL:
            return await self._run_batch(call_id, args), 1
        limit = self._timeout_s * self._scale
        attempts = 1
        try:
            async with asyncio.timeout(limit):
                if name in self._local and self._workdir is not None:
                    status, output = await self._run_local(name, args, limit)
                else:
                    status, output, attempts = await self._run_hosted(call_id, name, args)
        except TimeoutError:
            status = "timeout"
            output = (
                f"Error: tool {name!r} timed out after {self._timeout_s:g} seconds and was stopped."
            )
        output = cap_output(output, self._limit)
        if parsed.warning:
            output += "\n\n" + parsed.warning
        return ToolResult(call_id, name, output, status != "ok", status), attempts

    async def _run_batch(self, call_id: str, args: dict) -> ToolResult:
        """TOL-09: run the items in order; one line per item: completed, failed or skipped."""
        items = args.get("items")
        if not isinstance(items, list) or not items:
            msg = "Error: batch needs a non-empty 'items' list of {tool, arguments}."
            return ToolResult(call_id, BATCH_TOOL, msg, True, "invalid")
        stop_on_error = args.get("stop_on_error") is True
        lines, failures, stopped = [], 0, False
        for n, item in enumerate(items, 1):
            item = item if isinstance(item, dict) else {}
            tool, item_args = str(item.get("tool", "")), item.get("arguments")
            item_args = item_args if isinstance(item_args, dict) else {}
            shown = f"[{n}] {tool}({json.dumps(item_args, ensure_ascii=False)[:_LINE_CHARS]})"
            if stopped:
                lines.append(f"{shown}: skipped (not run: an earlier item failed)")
                continue
            if tool == BATCH_TOOL:
                res = ToolResult(
                    call_id, tool, "Error: a batch cannot contain a batch.", True, "invalid"
                )
            else:
                res, _ = await self._run(f"{call_id}.{n}", tool, item_args, False)
            first = " ".join(res.output.split())[:_LINE_CHARS]
            if res.is_error:
                failures += 1
                stopped = stop_on_error
                lines.append(f"{shown}: failed: {first}")
            else:
                lines.append(f"{shown}: completed: {first}")
        head = f"batch of {len(items)} item(s), {failures} failed:"
        status = "error" if failures else "ok"
        return ToolResult(call_id, BATCH_TOOL, "\n".join([head, *lines]), bool(failures), status)

    async def _run_local(self, name: str, args: dict, limit: float) -> tuple[str, str]:
        try:
            return "ok", await run_local(name, args, self._workdir, limit)
        except LocalToolError as exc:
            return "error", f"Error: tool {name!r} failed: {exc}"

    async def _run_hosted(self, call_id: str, name: str, args: dict) -> tuple[str, str, int]:
        if not self._endpoint:
            return "error", f"Error: tool {name!r} cannot run here: no tool endpoint configured.", 0
        session = self._session or aiohttp.ClientSession()
        try:
            last = ""
            for attempt in range(_RETRIES + 1):
                if attempt:
                    await asyncio.sleep(_BACKOFF_S * (2 ** (attempt - 1)) * self._scale)
                try:
                    return (*await self._post(session, call_id, name, args), attempt + 1)
                except _Transient as exc:
                    last = str(exc)
            return "error", f"Error: tool {name!r} is temporarily unavailable: {last}", _RETRIES + 1
        finally:
            if self._session is None:
                await session.close()

    async def _post(
        self, session: aiohttp.ClientSession, call_id: str, name: str, args: dict
    ) -> tuple[str, str]:
        url = f"{self._endpoint}/{name}"
        try:
            async with session.post(
                url, json={"call_id": call_id, "arguments": args}, ssl=self._ssl
            ) as resp:
                body = await resp.text()
                status = resp.status
        except aiohttp.ClientError as exc:
            raise _Transient(f"connection error: {type(exc).__name__}") from None
        try:
            data = json.loads(body) if body else {}
        except json.JSONDecodeError:
            data = None
        err = data.get("error") if isinstance(data, dict) else None
        etype = err.get("type", "execution_error") if isinstance(err, dict) else None
        message = str(err.get("message", "")) if isinstance(err, dict) else ""
        if status == 503 or etype == "transient":
            raise _Transient(message or f"HTTP {status}")
        if status == 504 or etype == "timeout":
            # The tool reports its own timeout: transient (seed 004 §7.3.2), retried like a 503.
            # Only the agent's own limit (asyncio.timeout around the run) is a final timeout.
            raise _Transient(message or f"the tool timed out (HTTP {status})")
        if etype == "permission_denied":
            return "denied", (
                f"Error: permission denied for tool {name!r}: {message or 'no reason given'}. "
                "The call was not executed and will not be retried. To obtain permission, ask the "
                f"user to allow {name!r}; otherwise choose another approach."
            )
        if err is not None:
            return "error", f"Error: tool {name!r} failed ({etype}): {message or 'no message'}"
        if status != 200:
            return "error", f"Error: tool {name!r} failed: HTTP {status} {body[:200]}"
        if isinstance(data, dict) and "output" in data:
            out = data["output"]
            return "ok", out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
        return "ok", body

    def _log(self, result: ToolResult, duration: float, args_size: int, attempts: int) -> None:
        if self._log_path is None:
            return
        record = {
            "ts": time.time(),
            "call_id": result.call_id,
            "name": result.name,
            "status": result.status,
            "duration_ms": round(duration * 1000, 3),
            "attempts": attempts,
            "arguments_chars": args_size,
            "output_chars": len(result.output),
        }
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
