"""Checks for an agent's MCP client, read from the MCP wire: MCP-01..04.

The MCP exchanges are the journal's ``kind: "mcp"`` entries (one HTTP exchange each: the
JSON-RPC message the agent sent, what the gateway answered, how the connection ended); which
model tool call an MCP ``tools/call`` carried out, and the result the model was then sent, come
from the evidence's tool executions (``conformance.judging.executions``) followed on the chat wire
(``follow_calls``). Agent events are never consulted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.tjs import Call, follow_calls, host_output
from conformance.judging.evidence import Evidence, response_of
from conformance.judging.executions import mcp_messages
from fakes.journal import Entry

__all__: list[str] = []

LIST_CHANGED = "notifications/tools/list_changed"


def _mcp(ev: Evidence) -> list[Entry]:
    return [e for e in ev.journal["entries"] if e.get("kind") == "mcp"]


def _method(e: Entry) -> Any:
    body = e.get("body")
    return body.get("method") if isinstance(body, dict) else None


def _params(e: Entry) -> dict[str, Any]:
    body = e.get("body")
    p = body.get("params") if isinstance(body, dict) else None
    return p if isinstance(p, dict) else {}


def _is_request(e: Entry) -> bool:
    """A message that asks for an answer (a method and an id), not a notification."""
    body = e.get("body")
    return isinstance(body, dict) and isinstance(body.get("method"), str) and "id" in body


def _call_key(e: Entry) -> tuple[Any, str]:
    p = _params(e)
    return p.get("name"), repr(p.get("arguments"))


def _ns(e: Entry) -> int:
    return int(e.get("t_arrival_ns", 0))


def _answer(e: Entry) -> dict[str, Any] | None:
    """The JSON-RPC response to ``e``'s message in the bytes sent, if any."""
    rid = (e.get("body") or {}).get("id") if isinstance(e.get("body"), dict) else None
    for m in mcp_messages(response_of(e)):
        if isinstance(m, dict) and "method" not in m and m.get("id") == rid:
            return m
    return None


def _mcp_calls(ev: Evidence) -> list[tuple[Call, list[Entry]]]:
    """Model tool calls carried out over MCP, with the MCP entries of those executions (as
    journaled, not in the tool host's shape)."""
    raw = {e.get("seq"): e for e in _mcp(ev)}
    out = []
    for call in follow_calls(ev):
        mcp = [raw[x.get("seq")] for x in call.executions if x.get("transport") == "mcp"]
        if mcp:
            out.append((call, mcp))
    return out


# --- MCP-01 ---------------------------------------------------------------------------------
def _cancelled(ev: Evidence) -> set[tuple[Any, Any]]:
    """The requests the agent gave up on (``notifications/cancelled``), by session and id."""
    return {
        (e.get("mcp_session"), _params(e).get("requestId"))
        for e in _mcp(ev)
        if _method(e) == "notifications/cancelled"
    }


def _failure(x: Entry, ev: Evidence, cancelled: set[tuple[Any, Any]]) -> str | None:
    """How an MCP tool call failed, read from its answer; None when it gave output or when
    MCP-02/03 judge it (an expired session, a cut or unreadable answer). An answer later than
    the scenario's tool time limit is not in time whatever the agent's connection did, and a
    call the agent cancelled failed for it whatever came back: on a loaded machine its own
    limit may fire after the late answer went out."""
    resp = response_of(x)
    if not resp or resp.get("end") == "client_gone":
        return "no answer before the agent gave up"
    if resp.get("status") == 404 or _cut(x):
        return None
    body = x.get("body")
    if (x.get("mcp_session"), body.get("id") if isinstance(body, dict) else None) in cancelled:
        return "cancelled by the agent (notifications/cancelled)"
    limit = ev.config.get("tool_timeout_s")
    took = (Evidence.end_ns(x) - _ns(x)) / 1e9 / ev.time_scale
    if isinstance(limit, int | float) and took > limit + ev.slack:
        return f"answered after {took:.2f} s, past the {limit:g} s tool time limit"
    m = _answer(x) or {}
    result = m.get("result")
    if "error" in m or (isinstance(result, dict) and result.get("isError")):
        return "a JSON-RPC error" if "error" in m else "an isError result"
    if resp.get("status") != 200:
        return f"HTTP {resp.get('status')}"
    return None


def _server_said(call: Call) -> str:
    """The message the call's last MCP answer carried, as the evidence renders it in the tool
    host's shape (``conformance.judging.executions``: a JSON-RPC error's ``message``, an ``isError``
    result's text); "" for none."""
    mcp = [x for x in call.executions if x.get("transport") == "mcp"]
    _out, err = host_output(mcp[-1]) if mcp else (None, None)
    return str((err or {}).get("message") or "").strip()


def _went_on(
    ev: Evidence,
    expected: str,
    why_of: Callable[[list[Entry]], str | None],
    what: str,
    said: Callable[[Call], str] | None = None,
) -> Finding:
    """MCP-01 and MCP-03: every call whose executions ``why_of`` names a failure for reached
    the model as a tool result (carrying what ``said`` gives, the server's own message), and
    the turn did not end in an error (``what``: those calls, as the finding names them)."""
    judged = 0
    for call, exs in _mcp_calls(ev):
        why = why_of(exs)
        if why is None:
            continue
        judged += 1
        if call.result is None:
            if not turn_over(ev):
                return not_applicable(expected, f"call {call.id!r}: the turn was cut short")
            return failed(expected, f"call {call.id!r} ({why}): no tool result reached the model")
        message = said(call) if said is not None else ""
        if message and message not in call.result:
            return failed(
                expected,
                f"call {call.id!r} ({why}): the result lacks the server's {message!r}: "
                f"{call.result[:200]!r}",
            )
    if not judged:
        return not_applicable(expected, f"no {what} in this run")
    if "error" in {e.get("reason") for e in ev.turn_ends()}:
        return failed(expected, f"the turn ended in an error after the {what}")
    return passed(expected, f"{judged} {what} reached the model as tool results")


@check("MCP-01")
def check_mcp_01(ev: Evidence) -> Finding:
    """A failed MCP call (JSON-RPC error, isError, no answer in time) reaches the model as a
    tool result, and the turn goes on."""
    expected = (
        "a tool call the MCP server answers with an error, or not in time, becomes a tool result "
        "sent back to the model, carrying the server's message, and the turn goes on"
    )
    cancelled = _cancelled(ev)
    # An answer past the limit used as if it had come in time: the limit was not kept.
    for call, exs in _mcp_calls(ev):
        why = _failure(exs[-1], ev, cancelled) or ""
        done = [x for x in call.executions if x.get("transport") == "mcp"]
        out = host_output(done[-1])[0] if done else None
        if why.startswith("answered after") and out and call.result and out in call.result:
            return failed(expected, f"call {call.id!r} ({why}): its output reached the model")
    return _went_on(
        ev,
        expected,
        lambda exs: _failure(exs[-1], ev, cancelled),
        "failed MCP call(s)",
        said=_server_said,
    )


# --- MCP-02 ---------------------------------------------------------------------------------
@check("MCP-02", final=True)
def check_mcp_02(ev: Evidence) -> Finding:
    """After a 404 on an issued session: initialize anew once, retry the call once."""
    expected = (
        "after HTTP 404 on an issued MCP session: initialize without the expired id, the call "
        "retried once in the new session, no second initialize for it, the expired id never "
        "sent again"
    )
    entries = _mcp(ev)
    chat = [_ns(e) for e in ev.chat()]
    issued = {e.get("mcp_session") for e in entries if _method(e) == "initialize"} - {None}
    expired = [
        (i, e)
        for i, e in enumerate(entries)
        if response_of(e).get("status") == 404 and e.get("mcp_session") in issued
    ]
    if not expired:
        return not_applicable(expected, "no MCP session expired in this run")
    seen: set[tuple[Any, str]] = set()
    judged = 0
    for i, x in expired:
        sid = x.get("mcp_session")
        reused = next((e for e in entries[i + 1 :] if e.get("mcp_session") == sid), None)
        if reused is not None and _method(reused) != "initialize":
            return failed(expected, f"seq {reused.get('seq')}: the expired session id sent again")
        if _method(x) != "tools/call" or _call_key(x) in seen:
            continue
        judged += 1
        seen.add(_call_key(x))
        # Up to the next model request: what the agent did about this call.
        end = min((t for t in chat if t > _ns(x)), default=None)
        after = [e for e in entries[i + 1 :] if end is None or _ns(e) < end]
        # A client of a newer revision may first probe for the stateless one (server/discover,
        # answered 400 here): that probe is part of starting a session, not something instead.
        requests = [e for e in after if _is_request(e) and _method(e) != "server/discover"]
        if not requests or _method(requests[0]) != "initialize":
            if end is None and not turn_over(ev):
                continue  # the run was cut short before it could
            nxt = _method(requests[0]) if requests else "nothing"
            return failed(
                expected, f"seq {x.get('seq')}: after the 404, {nxt} instead of initialize"
            )
        if requests[0].get("headers", {}).get("mcp-session-id"):
            return failed(expected, f"seq {requests[0].get('seq')}: initialize sent a session id")
        retries = [e for e in after if _method(e) == "tools/call" and _call_key(e) == _call_key(x)]
        inits = [e for e in after if _method(e) == "initialize"]
        if not retries:
            return failed(
                expected, f"seq {x.get('seq')}: the call was not retried after initialize"
            )
        if len(retries) > 1 or len(inits) > 1:
            return failed(
                expected,
                f"seq {x.get('seq')}: {len(inits)} initialize and {len(retries)} retries of the "
                "call before the next model request (one each at most)",
            )
    if not judged:
        return passed(expected, f"{len(expired)} expired session(s), no call lost to them")
    return passed(expected, f"{judged} expired call(s): one initialize, one retry each")


# --- MCP-03 ---------------------------------------------------------------------------------
def _cut(x: Entry) -> bool:
    """Whether an MCP tool call's answer was cut or could not be read (200, no response to
    the call in the bytes)."""
    resp = response_of(x)
    if resp.get("end") in ("reset", "close"):
        return True
    return resp.get("status") == 200 and _answer(x) is None


@check("MCP-03")
def check_mcp_03(ev: Evidence) -> Finding:
    """A cut or unreadable answer to a call is a tool error sent to the model; the turn goes on."""
    expected = (
        "an answer to an MCP tool call that is cut or cannot be read becomes a tool error sent "
        "back to the model, and the turn goes on"
    )

    def cut(exs: list[Entry]) -> str | None:
        return "a cut answer" if any(_cut(x) for x in exs) else None

    return _went_on(ev, expected, cut, "call(s) with a cut or unreadable answer")


# --- MCP-04 ---------------------------------------------------------------------------------
def _listed(e: Entry) -> set[str] | None:
    """The tool names a tools/list answer carried (None: not one)."""
    m = _answer(e) if _method(e) == "tools/list" else None
    result = m.get("result") if m else None
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return None
    return {str(t.get("name")) for t in tools if isinstance(t, dict)}


def _changed(e: Entry) -> bool:
    return any(
        isinstance(m, dict) and m.get("method") == LIST_CHANGED
        for m in mcp_messages(response_of(e))
    )


@check("MCP-04", final=True)
def check_mcp_04(ev: Evidence) -> Finding:
    """After list_changed: listed again before the next call; no call of an unlisted tool; the
    model's call of one answered with a tool error."""
    expected = (
        "after notifications/tools/list_changed: tools/list before the next tools/call, no "
        "call of a tool the latest list lacks, a tool result for the model's call of one"
    )
    entries = _mcp(ev)
    first = next((i for i, e in enumerate(entries) if _changed(e)), None)
    if first is None:
        return not_applicable(expected, "no MCP answer said the tools changed")
    latest: set[str] | None = None
    stale = True
    for e in entries[first + 1 :]:
        names = _listed(e)
        if names is not None:
            latest, stale = names, False
        if _method(e) == "tools/call":
            name = _params(e).get("name")
            if stale:
                return failed(expected, f"seq {e.get('seq')}: {name!r} called before listing anew")
            if latest is not None and name not in latest:
                return failed(expected, f"seq {e.get('seq')}: {name!r} called, no longer listed")
        if _changed(e):
            stale = True
    if latest is None:
        return not_applicable(expected, "no tool call and no listing after the change")
    t0 = _ns(entries[first])
    for call in follow_calls(ev):
        if _ns(call.entry) < t0 or call.name in latest or call.name.split("__")[-1] in latest:
            continue
        if call.result is None and turn_over(ev):
            return failed(expected, f"call {call.id!r} of {call.name!r}: no tool result")
    return passed(
        expected, f"listed anew after the change; every later call in {listed(sorted(latest))}"
    )
