"""The MCP tool host: a session's hosted tools over MCP's streamable HTTP transport.

Theory of operation: ``POST /s/<sid>/mcp`` carries one JSON-RPC message. ``initialize`` opens an
MCP session (its id goes out in ``Mcp-Session-Id``, the protocol version is the client's when
served, else the newest served); every later message must carry that id (none: 400; unknown or
deleted: 404, the transport's "start again"). ``tools/list`` offers the scenario's ``tools``;
``tools/call`` runs the scenario's scripted behaviour of that tool (``fakes.toolhost``, the same
per-tool cursor as ``POST /s/<sid>/tools/<tool>``) and maps it onto an MCP result. Notifications
and client responses get 202. ``GET`` (a server-initiated stream) is not offered: 405. ``DELETE``
ends the MCP session. The scenario's ``mcp_faults`` (``fakes.mcp_faults``) may break the answer
to a message instead. Bodies are rendered here as bytes, so the journal keeps what was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
import uuid
from typing import Any

from aiohttp import web

from fakes.journal import McpEntry
from fakes.mcp_faults import take_fault
from fakes.session import SessionState, redact_headers
from fakes.toolhost import tool_reply

__all__ = ["PROTOCOL_VERSIONS", "ENTRY_FIELDS", "SESSION_HEADER", "VERSION_HEADER", "serve"]

# The handshake-era revisions (``initialize``); the stateless 2026-07-28 revision, which a client
# probes with ``server/discover``, is not served: the probe gets 400 and clients fall back.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
LIST_CHANGED = "notifications/tools/list_changed"
SERVER_INFO = {"name": "agent-conformance-tool-host", "version": "1"}
# A permission_denied behaviour's text opens with this (the reason follows).
DENIED_PREFIX = "Permission denied: "

# JSON-RPC error codes (JSON-RPC 2.0; -32001 is MCP's request timeout).
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, REQUEST_TIMEOUT, SERVER_ERROR = -32603, -32001, -32000

# An MCP entry's own fields (contracts §2), as a new entry has them.
ENTRY_FIELDS: dict[str, Any] = {
    "mcp_session": None,
    "rpc_method": None,
    "rpc_id": None,
    "tool": None,
    "arguments": None,
    "behaviour": None,
    "result": None,
    "error": None,
}


def _bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _reply(
    e: McpEntry,
    status: int,
    message: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """The HTTP response carrying ``message`` (JSON), or an empty body; the JSON-RPC result or
    error is noted in the entry."""
    if message is None:
        return web.Response(status=status, headers=headers)
    e["result"], e["error"] = message.get("result"), message.get("error")
    return web.Response(
        status=status, body=_bytes(message), content_type="application/json", headers=headers
    )


def _error(e: McpEntry, status: int, code: int, text: str, rpc_id: Any = None) -> web.Response:
    msg = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": text}}
    return _reply(e, status, msg)


def _result(e: McpEntry, rpc_id: Any, result: dict[str, Any], **headers: str) -> web.Response:
    return _reply(e, 200, {"jsonrpc": "2.0", "id": rpc_id, "result": result}, headers or None)


async def serve(st: SessionState, request: web.Request, e: McpEntry) -> web.StreamResponse:
    """Answer one request to the session's MCP endpoint, filling ``e`` as it goes."""
    sid = request.headers.get(SESSION_HEADER)
    e["mcp_session"] = sid
    if request.method == "GET":
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})
    if request.method == "DELETE":
        if sid is None or st.mcp_sessions.pop(sid, None) is None:
            return _reply(e, 404 if sid else 400)
        return _reply(e, 200)
    if request.method != "POST":
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as ex:
        e["body_error"] = "body too large"
        return _error(e, 413, INVALID_REQUEST, f"request body too large: {ex.text}")
    try:
        msg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as ex:
        e["body_error"] = f"invalid JSON: {ex}"
        return _error(e, 400, PARSE_ERROR, f"Parse error: {ex}")
    e["body"] = msg
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        e["body_error"] = "not a JSON-RPC 2.0 message"
        why = "a batch (JSON array) is not accepted" if isinstance(msg, list) else "not JSON-RPC"
        return _error(e, 400, INVALID_REQUEST, f"Invalid Request: {why}; send one message")
    method, rpc_id = msg.get("method"), msg.get("id")
    e["rpc_method"], e["rpc_id"] = method, rpc_id
    if not isinstance(method, str):  # a client's response to a server request: none are made
        return _reply(e, 202)
    if method != "initialize":
        version = request.headers.get(VERSION_HEADER)
        if version is not None and version not in PROTOCOL_VERSIONS:
            why = f"Bad Request: unsupported {VERSION_HEADER} {version!r}"
            return _error(e, 400, INVALID_REQUEST, why, rpc_id)
        if sid is None:
            why = f"Bad Request: {SESSION_HEADER} header required"
            return _error(e, 400, INVALID_REQUEST, why, rpc_id)
        if sid not in st.mcp_sessions:
            return _error(e, 404, INVALID_REQUEST, f"Session not found: {sid!r}", rpc_id)
    fault = take_fault(st.scenario.mcp_faults, st.mcp_counts, method)
    if fault is None:
        return await _answer(st, e, msg, method, rpc_id, request.transport)
    e["fault"], e["fault_params"] = fault
    return await _faulted(st, request, e, msg, fault)


async def _faulted(
    st: SessionState,
    request: web.Request,
    e: McpEntry,
    msg: dict[str, Any],
    fault: tuple[str, dict[str, Any]],
) -> web.StreamResponse:
    """The answer to ``msg`` as the MCP fault ``fault`` (name, parameters) makes it."""
    (name, p), method, rpc_id = fault, str(msg["method"]), msg.get("id")
    if name == "session_expired":
        sid = e["mcp_session"]
        st.mcp_sessions.pop(sid or "", None)
        return _error(e, 404, INVALID_REQUEST, f"Session not found: {sid!r}", rpc_id)
    if name == "rpc_error":
        code, text = int(p.get("code", INTERNAL_ERROR)), str(p.get("message", "Internal error"))
        return _error(e, 200, code, text, rpc_id)
    if name == "http_error":
        return web.Response(status=int(p["status"]), text=str(p.get("body", "")))
    if name == "delay":
        await asyncio.sleep(float(p["seconds"]) * st.time_scale)
    if name == "list_changed":  # from this message on, tools/list offers the new tools
        st.mcp_tools = [dict(t) for t in p.get("tools", [])]
    resp = await _answer(st, e, msg, method, rpc_id, request.transport)
    body = resp.body if isinstance(resp.body, bytes) else b""
    if not body:  # a 202 has nothing to break
        return resp
    if name == "malformed":
        return _malformed(e, resp, str(p["kind"]))
    if name == "cut":
        at = p.get("at_byte")
        return await _write(
            request,
            e,
            resp,
            body,
            cut_at=min(int(at), len(body) - 1) if at is not None else len(body) // 2,
        )
    if name in ("sse", "list_changed"):
        notes = [{"jsonrpc": "2.0", "method": LIST_CHANGED}] if name == "list_changed" else []
        sse, n = _sse(notes, resp)
        return await _write(request, e, resp, sse, events=n)
    return resp


async def _answer(
    st: SessionState, e: McpEntry, msg: dict[str, Any], method: str, rpc_id: Any, transport: Any
) -> web.Response:
    """The answer to a message that passed the transport's checks (``transport``: the
    request's, on which a hung tool notices the client leave)."""
    if method == "initialize":
        return _initialize(st, e, msg)
    if "id" not in msg:  # a notification (initialized, cancelled, ...): accepted, no answer
        return _reply(e, 202)
    params = msg.get("params")
    if method == "ping":
        return _result(e, rpc_id, {})
    if method == "tools/list":
        return _result(e, rpc_id, {"tools": [_tool(t) for t in _offered(st)]})
    if method == "tools/call":
        return await _call(st, e, rpc_id, params if isinstance(params, dict) else {}, transport)
    return _error(e, 200, METHOD_NOT_FOUND, f"Method not found: {method}", rpc_id)


async def _write(
    request: web.Request,
    e: McpEntry,
    resp: web.Response,
    body: bytes,
    *,
    events: int = 0,
    cut_at: int | None = None,
) -> web.StreamResponse:
    """Write ``body`` with ``resp``'s status and headers (its full length announced), reset
    after ``cut_at`` bytes when given; recorded here as written. ``events``: SSE events in it."""
    headers = {k: v for k, v in resp.headers.items() if k.lower() != "content-length"}
    if events:
        headers["Content-Type"] = "text/event-stream"
        headers["Cache-Control"] = "no-cache"
    out = web.StreamResponse(status=resp.status, headers=headers)
    out.content_length = len(body)
    sent = body if cut_at is None else body[:cut_at]
    t_headers, wall = time.monotonic_ns(), time.time()
    end: Any = "complete"
    try:
        await out.prepare(request)
        await out.write(sent)
        if cut_at is None:
            await out.write_eof()
    except ConnectionError:  # the client left first
        end = "client_gone"
    if cut_at is not None:
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport else None
        if sock is not None:  # SO_LINGER 0: the close is an RST, as the model wire's `cut` sends
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if transport is not None:
            transport.abort()
        end = "reset" if end == "complete" else end
    e["response"] = {
        "status": out.status,
        "headers": redact_headers(out.headers),
        "stream": bool(events),
        "sent": sent.decode("utf-8", "replace"),
        "sent_bytes": len(sent),
        "full_bytes": len(body),
        "events_sent": sent.count(b"\n\n") if events else 0,
        "cut_at_byte": cut_at,
        "t_headers_ns": t_headers,
        "t_wall_headers": wall,
        "t_end_ns": time.monotonic_ns(),
        "end": end,
    }
    return out


def _sse(before: list[dict[str, Any]], resp: web.Response) -> tuple[bytes, int]:
    """The SSE body carrying the messages ``before``, then ``resp``'s message; and its events."""
    messages = [_bytes(m) for m in before]
    if isinstance(resp.body, bytes) and resp.body:
        messages.append(resp.body)
    return b"".join(b"event: message\ndata: " + m + b"\n\n" for m in messages), len(messages)


def _malformed(e: McpEntry, resp: web.Response, kind: str) -> web.Response:
    """``resp`` broken as the ``malformed`` fault says (its headers kept)."""
    body = resp.body if isinstance(resp.body, bytes) else b""
    if kind == "bad_json":
        e["result"] = e["error"] = None  # no JSON-RPC message went out
        body = body[: len(body) // 2]
    else:  # wrong_id: the answer to a request never made
        message = json.loads(body)
        message["id"] = f"{message.get('id')}-other"
        body = _bytes(message)
    headers = {k: v for k, v in resp.headers.items() if k.lower() != "content-length"}
    return web.Response(status=resp.status, body=body, headers=headers)


def _initialize(st: SessionState, e: McpEntry, msg: dict[str, Any]) -> web.Response:
    params = msg.get("params")
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
    sid = uuid.uuid4().hex
    st.mcp_sessions[sid] = version
    e["mcp_session"] = sid
    result = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": SERVER_INFO,
    }
    return _result(e, msg.get("id"), result, **{SESSION_HEADER: sid})


def _offered(st: SessionState) -> list[dict[str, Any]]:
    """The tools offered now: the scenario's, until a ``list_changed`` fault changed them."""
    return st.scenario.tools if st.mcp_tools is None else st.mcp_tools


def _tool(t: dict[str, Any]) -> dict[str, Any]:
    out = {"name": t["name"], "inputSchema": t.get("parameters") or {"type": "object"}}
    if "description" in t:
        out["description"] = t["description"]
    return out


def _text(text: str, is_error: bool) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


async def _call(
    st: SessionState, e: McpEntry, rpc_id: Any, params: dict[str, Any], transport: Any
) -> web.Response:
    name, args = params.get("name"), params.get("arguments")
    e["tool"], e["arguments"] = name, args
    if not isinstance(name, str) or not any(t["name"] == name for t in _offered(st)):
        return _error(e, 200, INVALID_PARAMS, f"Unknown tool: {name!r}", rpc_id)
    script = st.scenario.tool_host.get(name)
    if not script:
        problem = e["harness_error"] = f"tool {name!r} has no scripted behaviour"
        return _error(e, 200, INTERNAL_ERROR, problem, rpc_id)
    i = st.tool_cursor.get(name, 0)
    st.tool_cursor[name] = i + 1
    beh = script[min(i, len(script) - 1)]
    kind = e["behaviour"] = next(iter(beh))
    _status, payload = await tool_reply(beh, st.time_scale, transport)
    reply: dict[str, Any] = payload if isinstance(payload, dict) else {}
    err: dict[str, Any] | None = reply.get("error")
    if kind == "transient" and err:  # the call did not run: a protocol error, a client may retry
        return _error(e, 200, SERVER_ERROR, str(err["message"]), rpc_id)
    if kind == "hang":  # the host gave up waiting for the tool
        return _error(e, 200, REQUEST_TIMEOUT, "tool timed out", rpc_id)
    if kind == "permission_denied" and err:  # MCP has no denial of its own: the text says it
        return _result(e, rpc_id, _text(f"{DENIED_PREFIX}{err['message']}", True))
    if err:  # error: the tool ran and failed
        return _result(e, rpc_id, _text(str(err["message"]), True))
    return _result(e, rpc_id, _text(str(reply.get("output", "")), False))
