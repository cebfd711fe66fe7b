"""The reference agent's tool executor: the I/O of tool calls (TOL-01..09, DBG-03).

Theory of operation: every decision about a tool call lives in the recovery core (with the
pure :mod:`tool_policy`); this class carries out ONE attempt and reports its raw outcome.
``attempt`` runs a local tool (when a working directory is set and the tool is a local one) or
POSTs to the hosted tool endpoint, with no retry, no time limit and no cap: it returns
``(kind, text, error_type)`` with kind ``ok`` / ``error`` / ``transient`` / ``denied``. HTTP 503,
``transient``, connection errors and a tool-reported timeout (504, ``timeout``) are transient.
With an MCP client (``start.tool_transport: mcp``) the hosted tools are the ones its server
lists (:meth:`ToolBox.connect`) and an attempt is one MCP ``tools/call`` (:mod:`.mcp_client`);
when the server's list changes, :meth:`ToolBox.take_changes` says so once.

A tool named ``batch`` (TOL-09, docs/contracts.md §5) is run here as one unit: each item is one
call of the tool it names, in order, decided with the same :mod:`tool_policy` functions (retries
with scaled sleeps and the per-item time limit included); the result has one line per item,
completed, failed or skipped. ``run`` is that per-item loop, also usable on its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from conformance.reference import tool_policy as policy
from conformance.reference.local_tools import LOCAL_SPECS, LocalToolError, run_local
from conformance.reference.mcp_client import McpClient, McpTool

__all__ = ["ToolBox", "ToolResult", "ToolSpec"]

BATCH_TOOL = policy.BATCH_TOOL
_LINE_CHARS = 200  # an item's output as shown on its result line


@dataclass(frozen=True)
class ToolSpec:
    """One tool offered to the model (OpenAI function shape)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """Outcome of one tool call; ``status`` is ok|error|timeout|denied|unknown|invalid."""

    call_id: str
    name: str
    output: str
    is_error: bool
    status: str


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
        output_limit: int = policy.OUTPUT_LIMIT,
        session: aiohttp.ClientSession | None = None,
        ssl: Any = None,
        log_path: Path | None = None,
        report_skipped: bool = True,
        mcp: McpClient | None = None,
    ) -> None:
        """``report_skipped=False`` is a broken copy: a batch's skipped items go unreported."""
        if time_scale <= 0 or timeout_s <= 0 or output_limit < 0:
            raise ValueError("ToolBox: time_scale and timeout_s must be > 0, output_limit >= 0")
        self._workdir = workdir
        self._specs: dict[str, ToolSpec] = {}
        self._local: set[str] = set()
        self._host(specs)
        self._mcp = mcp
        self._endpoint = hosted_endpoint.rstrip("/") if hosted_endpoint else None
        self._scale = time_scale
        self._timeout_s = timeout_s
        self._limit = output_limit
        self._session = session
        self._ssl = ssl
        self._log_path = log_path
        self._report_skipped = report_skipped

    def _host(self, specs: list[ToolSpec]) -> None:
        """The hosted tools are ``specs``; local tools fill in the names they leave free."""
        self._specs = {s.name: s for s in specs}
        self._local = set()
        if self._workdir is not None:
            for name, (desc, params) in LOCAL_SPECS.items():
                if name not in self._specs:
                    self._specs[name] = ToolSpec(name, desc, params)
                    self._local.add(name)

    async def connect(self) -> bool:
        """Take the hosted tools from the MCP server (no MCP client: nothing to do); False when
        it could not be reached (the tools of ``start`` stay offered, calls connect again)."""
        if self._mcp is None:
            return False
        await self._mcp.start()
        return self.take_changes()

    def take_changes(self) -> bool:
        """Whether the MCP server's tools were listed anew since the last look (then taken)."""
        if self._mcp is None or not self._mcp.changed or self._mcp.tools is None:
            return False
        self._mcp.changed = False
        self._host([_spec(t) for t in self._mcp.tools])
        return True

    async def close(self) -> None:
        if self._mcp is not None:
            await self._mcp.close()

    def hush(self) -> None:
        """The user aborted: the MCP client sends nothing more."""
        if self._mcp is not None:
            self._mcp.hush()

    def specs_for_request(self, blocked: set[str]) -> list[dict[str, Any]]:
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

    def schema_of(self, name: str) -> dict[str, Any] | None:
        """The JSON Schema of ``name``'s parameters, or None for an unknown tool."""
        spec = self._specs.get(name)
        return spec.parameters if spec else None

    def _schemas(self) -> dict[str, dict[str, Any]]:
        return {n: s.parameters for n, s in self._specs.items()}

    # ---- one attempt (the driver's tool I/O) ---------------------------------------------
    async def attempt(self, call_id: str, name: str, args: dict[str, Any]) -> tuple[str, str, str]:
        """Execute one attempt: ``(kind, text, error_type)``; never raises for tool failures.

        No time limit here: the caller cancels the attempt (a shell's process group is killed).
        """
        if name in self._local and self._workdir is not None:
            try:
                return "ok", await run_local(name, args, self._workdir, None), ""
            except LocalToolError as exc:
                return "error", str(exc), "local"
        if self._mcp is not None:
            return await self._mcp.attempt(name, args)
        if not self._endpoint:
            return "error", "", "unconfigured"
        session = self._session or aiohttp.ClientSession()
        try:
            return await self._post(session, call_id, name, args)
        finally:
            if self._session is None:
                await session.close()

    async def _post(
        self, session: aiohttp.ClientSession, call_id: str, name: str, args: dict[str, Any]
    ) -> tuple[str, str, str]:
        url = f"{self._endpoint}/{name}"
        try:
            async with session.post(
                url, json={"call_id": call_id, "arguments": args}, ssl=self._ssl
            ) as resp:
                body = await resp.text()
                status = resp.status
        except aiohttp.ClientError as exc:
            return "transient", f"connection error: {type(exc).__name__}", ""
        try:
            data = json.loads(body) if body else {}
        except json.JSONDecodeError:
            data = None
        err = data.get("error") if isinstance(data, dict) else None
        etype = err.get("type", "execution_error") if isinstance(err, dict) else None
        message = str(err.get("message", "")) if isinstance(err, dict) else ""
        if status == 503 or etype == "transient":
            return "transient", message or f"HTTP {status}", ""
        if status == 504 or etype == "timeout":
            # The tool reports its own timeout: transient (seed 004 §7.3.2), retried like a 503.
            # Only the agent's own limit is a final timeout.
            return "transient", message or f"the tool timed out (HTTP {status})", ""
        if etype == "permission_denied":
            return "denied", message, ""
        if err is not None:
            return "error", message, str(etype)
        if status != 200:
            return "error", f"HTTP {status} {body[:200]}", "http"
        if isinstance(data, dict) and "output" in data:
            out = data["output"]
            return "ok", out if isinstance(out, str) else json.dumps(out, ensure_ascii=False), ""
        return "ok", body, ""

    # ---- a whole call with the policy (batch items, and callers without a core) ---------------
    async def run(
        self, call_id: str, name: str, raw_arguments: str | dict[str, Any], *, truncated: bool
    ) -> ToolResult:
        """Execute one tool call with the policy; never raises for tool-side failures."""
        start = time.monotonic()
        args_size = (
            len(raw_arguments) if isinstance(raw_arguments, str) else len(json.dumps(raw_arguments))
        )
        result, attempts = await self._run(call_id, name, raw_arguments, truncated)
        self._log(result, time.monotonic() - start, args_size, attempts)
        return result

    async def _run(
        self, call_id: str, name: str, raw: str | dict[str, Any], truncated: bool
    ) -> tuple[ToolResult, int]:
        pre = policy.precheck(name, raw, truncated=truncated, schemas=self._schemas())
        if pre.parsed is None:
            return ToolResult(call_id, name, pre.output, True, pre.status), 0
        args = pre.parsed.arguments or {}
        if name == BATCH_TOOL:
            return await self.run_batch(call_id, args), 1
        attempts = 1
        try:
            async with asyncio.timeout(self._timeout_s * self._scale):
                status, output, attempts = await self._attempts(call_id, name, args)
        except TimeoutError:
            status, output = "timeout", policy.timeout_text(name, self._timeout_s)
        output = policy.final_output(output, pre.parsed.warning, self._limit)
        return ToolResult(call_id, name, output, status != "ok", status), attempts

    async def _attempts(
        self, call_id: str, name: str, args: dict[str, Any]
    ) -> tuple[str, str, int]:
        last = ""
        for n in range(1, policy.RETRIES + 2):
            if n > 1:
                await asyncio.sleep(policy.backoff_s(n - 1) * self._scale)
            kind, text, etype = await self.attempt(call_id, name, args)
            if kind == "ok":
                return "ok", text, n
            if kind == "denied":
                return "denied", policy.denied_text(name, text), n
            if kind == "error":
                # No endpoint: nothing was attempted.
                return (
                    "error",
                    policy.error_text(name, etype, text),
                    (0 if etype == "unconfigured" else n),
                )
            last = text
        return "error", policy.unavailable_text(name, last), policy.RETRIES + 1

    async def run_batch(self, call_id: str, args: dict[str, Any]) -> ToolResult:
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
                if self._report_skipped:
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

    def _log(self, result: ToolResult, duration: float, args_size: int, attempts: int) -> None:
        if self._log_path is None:
            return
        record = policy.log_record(
            result.call_id,
            result.name,
            result.status,
            duration,
            attempts,
            args_size,
            len(result.output),
        )
        write_log_line(self._log_path, record)


def _spec(t: McpTool) -> ToolSpec:
    return ToolSpec(t.name, t.description, t.parameters)


def write_log_line(path: Path, record: dict[str, Any]) -> None:
    """Append one tool-call log line, the wall-clock ``ts`` first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"ts": time.time(), **record}) + "\n")
