"""Hosted tool executions in one shape, whichever wire carried them: the tool host's HTTP
endpoint (``kind: "tool"`` entries) or its MCP server (``tools/call`` in ``kind: "mcp"``).

Theory of operation: every tool check reads :class:`~fakes.journal.ToolEntry` fields (``tool``,
``call_id``, ``arguments``, ``behaviour``, the timings) and the tool host's HTTP answer
(``{"output": text}`` or ``{"error": {"type", "message"}}`` in ``response.sent``). An MCP
``tools/call`` is the same execution: :func:`tool_executions` gives it that shape, read from the
wire, so that a check judges a run over MCP exactly as one over HTTP.

- ``tool`` and ``arguments``: as the message named them (``params``), run or not.
- ``behaviour``: the scripted behaviour the gateway ran; None when the call never reached the
  tool (an MCP fault answered instead, or the session was unknown).
- ``response.sent``: the JSON-RPC answer to the call, found by its id in the bytes sent (JSON or
  SSE), rendered as the HTTP tool host renders the same outcome: a result's text as ``output``,
  ``isError`` as an error of the behaviour's type; JSON-RPC error -32000 (the call did not run)
  as a 503 ``transient``, -32001 (the tool timed out) as a 504 ``timeout``, any other as a 502
  ``rpc_error``. No answer to the call in the bytes (cut, broken JSON, another id, an HTTP error):
  the bytes as sent, with the HTTP status, as an unreadable reply over HTTP is.
- ``call_id``: an MCP call carries none of the model's, so it is the id of the model's tool call
  it carries out: in the latest chat response before it that carried tool calls, the call of that
  name (the agent may have joined a server name on: ``<server>__<name>``) with equal arguments,
  else of that name, not already carried out; a call that repeats the last failed execution of a
  call with the same arguments is a retry of it. None when no call matches.
- ``transport``: ``"mcp"``, and ``mcp_session`` kept; the tool host's own entries are returned
  as they are (no ``transport``: HTTP).
"""

from __future__ import annotations

import json
from typing import Any, cast

from conformance.judging.wire_reply import wire_reply
from fakes.journal import ChatEntry, Entry, Response, ToolEntry

__all__ = ["tool_executions", "mcp_messages"]

# JSON-RPC error code -> (HTTP status, error type) of the tool host's answer to the same outcome.
_RPC_ERRORS = {-32000: (503, "transient"), -32001: (504, "timeout")}
_OTHER_RPC_ERROR = (502, "rpc_error")
# An ``isError`` result's type, by the behaviour that gave it (the tool host's types).
_ERROR_TYPES = {"permission_denied": "permission_denied"}


def mcp_messages(resp: Response) -> list[Any]:
    """The JSON-RPC messages in an MCP answer's bytes: one JSON body, or the ``data`` of each
    complete SSE event; whatever does not parse is left out."""
    sent = str(resp.get("sent") or "")
    if not resp.get("stream"):
        try:
            return [json.loads(sent)]
        except ValueError:
            return []
    out: list[Any] = []
    blocks = sent.replace("\r\n", "\n").split("\n\n")
    for block in blocks[:-1]:  # the last block is unterminated (or empty)
        data = "\n".join(
            ln[5:].removeprefix(" ") for ln in block.split("\n") if ln.startswith("data:")
        )
        try:
            out.append(json.loads(data))
        except ValueError:
            continue
    return out


def _answer(entry: Entry, rpc_id: Any) -> dict[str, Any] | None:
    """The JSON-RPC response to ``rpc_id`` the bytes carried, if any."""
    for m in mcp_messages(entry.get("response") or {}):
        if (
            isinstance(m, dict)
            and m.get("id") == rpc_id
            and ("result" in m or "error" in m)
            and "method" not in m
        ):
            return m
    return None


def _text(result: Any) -> str:
    content = result.get("content") if isinstance(result, dict) else None
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _as_tool_host(entry: Entry, behaviour: Any) -> tuple[Response | None, bool]:
    """The MCP answer as the HTTP tool host renders the same outcome (module docstring), and
    whether it is a tool's output."""
    resp = entry.get("response")
    if not resp:
        return None, False
    body = entry.get("body")
    m = _answer(entry, body.get("id") if isinstance(body, dict) else None)
    if m is None or resp.get("status") != 200:
        return resp, False
    status, payload = 200, cast(dict[str, Any], {})
    if "error" in m:
        err = m["error"] if isinstance(m["error"], dict) else {}
        status, etype = _RPC_ERRORS.get(err.get("code"), _OTHER_RPC_ERROR)  # type: ignore[arg-type]
        payload = {"error": {"type": etype, "message": str(err.get("message", ""))}}
    elif isinstance(m["result"], dict) and m["result"].get("isError"):
        etype = _ERROR_TYPES.get(str(behaviour), "execution_error")
        payload = {"error": {"type": etype, "message": _text(m["result"])}}
    else:
        payload = {"output": _text(m["result"])}
    sent = json.dumps(payload, ensure_ascii=False)
    out = cast(Response, {**resp, "status": status, "stream": False, "sent": sent})
    return out, "output" in payload


def _args_equal(raw: str, args: Any) -> bool:
    try:
        return bool(json.loads(raw or "{}") == (args if args is not None else {}))
    except ValueError:
        return False


def _names(call_name: str, tool: str) -> bool:
    return call_name == tool or call_name.endswith("__" + tool)


class _Matcher:
    """Tells which model tool call each MCP call carries out (module docstring)."""

    def __init__(self, chat: list[ChatEntry]) -> None:
        self._responses = [
            (int(e.get("t_arrival_ns", 0)), calls)
            for e in chat
            if (calls := wire_reply(e).tool_calls)
        ]
        self._done: dict[str, bool] = {}  # call id -> its last execution succeeded

    def call_id(self, t_arrival: int, tool: str, args: Any, ok: bool) -> str | None:
        before = [calls for t, calls in self._responses if t <= t_arrival]
        if not before:
            return None
        named = [c for c in before[-1] if c.get("id") and _names(str(c.get("name")), tool)]
        same = [c for c in named if _args_equal(str(c.get("arguments")), args)]
        fresh = [c for c in same if c["id"] not in self._done]
        retried = [c for c in same if self._done.get(c["id"]) is False]
        others = [c for c in named if c["id"] not in self._done]
        hits = fresh or retried[-1:] or others
        if not hits:
            return None
        hit = hits[0]
        self._done[hit["id"]] = ok
        return str(hit["id"])


def _from_mcp(entry: Entry, matcher: _Matcher) -> ToolEntry:
    body = entry.get("body")
    params = body.get("params") if isinstance(body, dict) else None
    params = params if isinstance(params, dict) else {}
    fields = cast(dict[str, Any], entry)
    behaviour = fields.get("behaviour")
    tool = fields.get("tool") if fields.get("tool") is not None else params.get("name")
    args = fields.get("arguments") if fields.get("tool") is not None else params.get("arguments")
    resp, ok = _as_tool_host(entry, behaviour)
    cid = matcher.call_id(int(entry.get("t_arrival_ns", 0)), str(tool), args, ok)
    out = {k: v for k, v in fields.items() if k not in ("rpc_method", "rpc_id", "result", "error")}
    out.update(
        kind="tool",
        tool=tool,
        call_id=cid,
        arguments=args,
        behaviour=behaviour,
        response=resp,
        transport="mcp",
    )
    return cast(ToolEntry, out)


def _is_call(entry: Entry) -> bool:
    body = entry.get("body")
    return (
        entry.get("kind") == "mcp"
        and isinstance(body, dict)
        and body.get("method") == "tools/call"
        and "id" in body
    )


def tool_executions(entries: list[Entry]) -> list[ToolEntry]:
    """Every hosted tool execution in ``entries`` (a canonical journal's), over HTTP or MCP, in
    the tool host's shape, in journal order (that of arrival)."""
    chat = sorted(
        (cast(ChatEntry, e) for e in entries if e.get("kind") == "chat"),
        key=lambda e: (e.get("t_arrival_ns", 0), e.get("seq", 0)),
    )
    matcher = _Matcher(chat)
    out: list[ToolEntry] = []
    for e in entries:  # in journal order: the order of arrival
        if e.get("kind") == "tool":
            out.append(cast(ToolEntry, e))
        elif _is_call(e):
            out.append(_from_mcp(e, matcher))
    return out
