"""The reference agent's MCP client: hosted tools over MCP's streamable HTTP transport.

Theory of operation: one client per turn, one MCP session at a time. :meth:`McpClient.connect`
sends ``initialize`` (the session id comes back in ``Mcp-Session-Id``, the protocol version in
the result) and ``notifications/initialized``, then lists the tools (``tools/list``, following
``nextCursor``). Every later message carries the session id and ``MCP-Protocol-Version``. Each
message is one POST; the answer is JSON or an SSE stream, read until the response with the
message's id (a ``notifications/tools/list_changed`` on the way marks the list stale).

:meth:`McpClient.attempt` runs one tool call and reports it as the tool executor does, ``(kind,
text, error_type)`` with kind ``ok`` / ``error`` / ``transient`` / ``denied``, never raising for
what the server or the connection did (the recovery core then decides, as for HTTP):

- a result: its text; ``isError`` an ``error`` (``denied`` when the text says permission was
  denied); JSON-RPC error -32000 (the call did not run) or -32001 (the tool timed out):
  ``transient``, as a 503 / 504 over HTTP; any other JSON-RPC error: ``error``;
- 404 on a session the server issued (it expired): initialize again once and retry the call
  once; a second 404 for the call is an ``error``;
- the connection cut after the request went out, an unreadable answer, an answer to another
  id, an HTTP error status: ``error`` (the call may have run: not retried); no connection at
  all, or HTTP 503: ``transient``;
- a stale list is listed again before the next call, and after the call that made it stale; a
  tool the server no longer lists is not called: ``error``.

A time limit on each message (``timeout_s``, scaled by the caller) bounds the handshake; the
recovery core's tool limit bounds a call as over HTTP, and a call given up on is followed by
``notifications/cancelled`` naming it (not after the user's abort: :meth:`McpClient.hush`). Switches (``Behaviours``) break one
recovery each, for the broken copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

__all__ = ["McpClient", "McpTool", "McpSwitches", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = "2025-06-18"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
LIST_CHANGED = "notifications/tools/list_changed"
_TRANSIENT_CODES = {-32000: "the tool could not run now", -32001: "the tool timed out"}
_DENIED = ("permission denied", "permission_denied")


class _Expired(Exception):
    """404 on a session the server had issued: initialize again."""


class _Failed(Exception):
    """The message got no usable answer; ``kind`` is ``error`` or ``transient``; ``cut``: the
    answer was cut or unreadable."""

    def __init__(self, kind: str, text: str, *, cut: bool = False) -> None:
        super().__init__(text)
        self.kind = kind
        self.cut = cut


@dataclass(frozen=True)
class McpTool:
    """One tool the server lists."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class McpSwitches:
    """The MCP recoveries, all on; off is a broken copy's bug."""

    error_results: bool = True  # off: a failed call (JSON-RPC error, isError) raises
    error_messages: bool = True  # off: a failed call's result drops the server's message
    reinitialize: bool = True  # off: an expired session is a tool error, not initialized again
    cut_results: bool = True  # off: a cut or unreadable answer raises
    follow_list_changes: bool = True  # off: list_changed is ignored, the old list kept


class McpClient:
    """An MCP client of one server (``endpoint``) over an aiohttp session."""

    def __init__(
        self,
        endpoint: str,
        session: aiohttp.ClientSession,
        *,
        ssl: Any = None,
        timeout_s: float = 120.0,
        switches: McpSwitches = McpSwitches(),  # noqa: B008 - frozen
    ) -> None:
        self._endpoint = endpoint
        self._session = session
        self._ssl = ssl
        self._timeout_s = timeout_s
        self._sw = switches
        self._sid: str | None = None
        self._version: str | None = None
        self._ids = 0
        self.tools: list[McpTool] | None = None  # None: never listed
        self.stale = False  # the server said its tools changed
        self.changed = False  # the list was listed again since the caller last looked
        self._quiet = False  # after the user's abort nothing more is sent
        self._notices: set[asyncio.Task[Any]] = set()  # cancellations on their way

    # ---- session --------------------------------------------------------------------------
    async def connect(self) -> list[McpTool]:
        """Initialize a session and list the tools."""
        await self._initialize()
        return await self._list()

    async def start(self) -> list[McpTool] | None:
        """:meth:`connect`, or None when the server could not be reached (a call tries again)."""
        try:
            return await self.connect()
        except (_Failed, _Expired):
            return None

    async def _initialize(self) -> None:
        self._sid = self._version = None
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "conformance-reference", "version": "0.1"},
        }
        result, sid = await self._request("initialize", params)
        if not sid:
            raise _Failed("error", "the MCP server issued no session id")
        self._sid = sid
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self._version = str(version or PROTOCOL_VERSION)
        await self._notify("notifications/initialized")

    async def _list(self) -> list[McpTool]:
        tools: list[McpTool] = []
        cursor: Any = None
        for _ in range(100):  # a server that pages without end is not followed forever
            result, _ = await self._request("tools/list", {"cursor": cursor} if cursor else {})
            for t in (result or {}).get("tools") or []:
                if isinstance(t, dict) and isinstance(t.get("name"), str):
                    schema = t.get("inputSchema")
                    tools.append(
                        McpTool(
                            t["name"],
                            str(t.get("description") or ""),
                            schema if isinstance(schema, dict) else {"type": "object"},
                        )
                    )
            cursor = (result or {}).get("nextCursor")
            if not cursor:
                break
        self.tools, self.stale, self.changed = tools, False, True
        return tools

    async def close(self) -> None:
        """Let the cancellations go out, then end the session (best effort: the server may be
        gone)."""
        if self._notices:
            await asyncio.wait(self._notices, timeout=self._timeout_s)
        if self._sid is None or self._quiet:
            return
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._session.delete(
                    self._endpoint, headers=self._headers(), ssl=self._ssl
                ) as resp:
                    await resp.read()
        except (TimeoutError, aiohttp.ClientError):
            pass
        self._sid = None

    def hush(self) -> None:
        """The user aborted: send nothing more (no cancellation, no end of session)."""
        self._quiet = True
        for task in self._notices:
            task.cancel()

    # ---- one tool call ---------------------------------------------------------------------
    async def attempt(self, name: str, args: dict[str, Any]) -> tuple[str, str, str]:
        """One call of ``name``: ``(kind, text, error_type)`` (module docstring)."""
        try:
            return await self._attempt(name, args)
        except _Failed as exc:
            return exc.kind, str(exc), "mcp"
        except _Expired:
            return "error", "the MCP session expired", "mcp"

    async def _attempt(self, name: str, args: dict[str, Any]) -> tuple[str, str, str]:
        if self._sid is None:
            await self.connect()  # the first call, or the handshake failed before
        elif self.stale and self._sw.follow_list_changes:
            try:
                await self._list()
            except _Expired:
                await self.connect()
        if self.tools is not None and all(t.name != name for t in self.tools):
            text = f"the MCP server no longer offers the tool {name!r}"
            return "error", text, "gone"
        params = {"name": name, "arguments": args}
        try:
            message = await self._call(params)
        except _Expired:
            if not self._sw.reinitialize:
                return "error", "the MCP session expired", "mcp"
            await self._initialize()
            try:
                message = await self._call(params)
            except _Expired:
                return "error", "the MCP session expired again after initializing anew", "mcp"
        if self.stale and self._sw.follow_list_changes:
            # The next request offers the model the tools as they are; on failure the list is
            # taken again before the next call.
            with contextlib.suppress(_Failed, _Expired):
                await self._list()
        return self._outcome(message)

    async def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            # No time limit of its own: the recovery core's tool limit bounds a call.
            result, _ = await self._request("tools/call", params, whole=True, limit=False)
        except _Failed as exc:
            if exc.cut and not self._sw.cut_results:
                raise RuntimeError(f"the MCP answer could not be read: {exc}") from None
            raise
        message: dict[str, Any] = result  # with ``whole``: the response message itself
        return message

    def _outcome(self, message: dict[str, Any]) -> tuple[str, str, str]:
        err = message.get("error")
        if isinstance(err, dict):
            code, text = err.get("code"), str(err.get("message") or "")
            if not self._sw.error_results:
                raise RuntimeError(f"MCP error {code}: {text}")
            if code in _TRANSIENT_CODES:
                return "transient", text or _TRANSIENT_CODES[code], ""
            if not self._sw.error_messages:
                return "error", f"MCP error {code}", "mcp"
            return "error", f"MCP error {code}: {text}", "mcp"
        result = message.get("result")
        result = result if isinstance(result, dict) else {}
        content = result.get("content")
        parts: list[Any] = content if isinstance(content, list) else []
        text = "\n".join(
            str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
        )
        if result.get("isError"):
            if not self._sw.error_results:
                raise RuntimeError(f"MCP tool error: {text}")
            if any(w in text.lower() for w in _DENIED):
                return "denied", text, ""
            if not self._sw.error_messages:
                return "error", "the MCP tool reported an error", "execution_error"
            return "error", text, "execution_error"
        return "ok", text, ""

    # ---- the wire ------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if self._sid:
            headers[SESSION_HEADER] = self._sid
        if self._version:
            headers[VERSION_HEADER] = self._version
        return headers

    async def _notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._session.post(
                    self._endpoint, json=msg, headers=self._headers(), ssl=self._ssl
                ) as resp:
                    await resp.read()
        except (TimeoutError, aiohttp.ClientError):
            pass  # a notification has no answer to wait for

    async def _request(
        self, method: str, params: dict[str, Any], *, whole: bool = False, limit: bool = True
    ) -> tuple[Any, str | None]:
        """Send one request; its result (the whole response message with ``whole``) and the
        session id the answer carried. ``limit``: bounded by ``timeout_s``."""
        self._ids += 1
        rid = self._ids
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        sent = False
        try:
            async with asyncio.timeout(self._timeout_s if limit else None):
                async with self._session.post(
                    self._endpoint, json=msg, headers=self._headers(), ssl=self._ssl
                ) as resp:
                    sent = True
                    if resp.status == 404 and self._sid and method != "initialize":
                        self._sid = None  # never sent again
                        raise _Expired()
                    if resp.status >= 400:
                        body = (await resp.read()).decode("utf-8", "replace")[:200]
                        kind = "transient" if resp.status == 503 else "error"
                        raise _Failed(kind, f"MCP server answered HTTP {resp.status} {body}")
                    answer = await self._answer(resp, rid)
                    sid = resp.headers.get(SESSION_HEADER)
        except asyncio.CancelledError:
            if method == "tools/call" and not self._quiet:
                # Given up (the tool limit): the server is told, as MCP's cancellation asks.
                notice = {"requestId": rid, "reason": "the client stopped waiting"}
                task = asyncio.ensure_future(self._notify("notifications/cancelled", notice))
                self._notices.add(task)
                task.add_done_callback(self._notices.discard)
            raise
        except TimeoutError:
            raise _Failed("error", f"no answer from the MCP server to {method}") from None
        except aiohttp.ClientConnectorError as exc:
            raise _Failed("transient", f"cannot reach the MCP server: {exc}") from None
        except aiohttp.ClientError as exc:
            why = "cut while reading its answer" if sent else "lost"
            raise _Failed(
                "error", f"connection to the MCP server {why}: {exc!r}", cut=sent
            ) from None
        if whole:
            return answer, sid
        if "error" in answer:
            err = answer["error"] if isinstance(answer["error"], dict) else {}
            raise _Failed("error", f"MCP error {err.get('code')}: {err.get('message')}")
        return answer.get("result"), sid

    async def _answer(self, resp: aiohttp.ClientResponse, rid: int) -> dict[str, Any]:
        """The response to ``rid`` in a JSON or SSE answer; notifications on the way noted."""
        if resp.content_type == "text/event-stream":
            data: list[str] = []
            async for raw in resp.content:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    found = self._message("\n".join(data), rid)
                    data = []
                    if found is not None:
                        return found
            raise _Failed("error", "the MCP server's stream ended without an answer", cut=True)
        found = self._message((await resp.read()).decode("utf-8", "replace"), rid)
        if found is None:
            raise _Failed(
                "error", "the MCP server's answer is not the response to the call", cut=True
            )
        return found

    def _message(self, text: str, rid: int) -> dict[str, Any] | None:
        try:
            msg = json.loads(text)
        except ValueError:
            raise _Failed("error", "the MCP server's answer is not valid JSON", cut=True) from None
        if not isinstance(msg, dict):
            return None
        if msg.get("method") == LIST_CHANGED:
            self.stale = self._sw.follow_list_changes
            return None
        if msg.get("id") == rid and ("result" in msg or "error" in msg):
            return msg
        return None
