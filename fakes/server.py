"""The aiohttp application of the fake gateway: sessions, chat, models, tool host, control API.

Theory of operation: each request is journaled on arrival; chat requests pick a script step
(``SessionState.take_step``), get a pure ``Plan`` (``fakes.plan.make_plan``) and the server
carries it out, recording exactly the bytes written and how the connection ended. A ``reset``
sets SO_LINGER 0 before aborting so the peer sees an RST; a ``close`` shuts the connection
cleanly without the final zero-length chunk, so an HTTP client sees an incomplete body. The body
is written by ``fakes.writer``: every byte that is due in one write, a boundary only at a timed
point or a flush. Delayed headers are held by ``fakes.hold``, which notices a client that leaves
meanwhile. How much of the journal is kept is the app's ``retention`` (``fakes.retention``):
everything by default. The root ``/v1`` serves one session too when asked (``serve_at_root``);
``GET /`` and every path that names no session are answered from ``fakes.index``, so a client
that misses learns where to go.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import ssl
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, cast, overload

from aiohttp import web

from fakes import mcp
from fakes.control import add_control_routes
from fakes.dialects import REGISTRY, anthropic_messages
from fakes.errors import FakesError, ScenarioError
from fakes.hold import hold_headers
from fakes.index import IndexSession, index_doc, prefers_html, render_html, valid_prefixes
from fakes.journal import (
    ChatEntry,
    CountTokensEntry,
    Entry,
    Kind,
    McpEntry,
    ModelsEntry,
    ToolEntry,
    UnknownEntry,
)
from fakes.journal import Response as ResponseRecord
from fakes.loopback import HostCheck, host_check_middleware
from fakes.plan import DIALECTS, Plan, harness_error_plan, make_plan
from fakes.refuse import RefusingPort
from fakes.retention import Retention, digest, kept_text
from fakes.scenario import Scenario, load_scenario
from fakes.session import SessionState, redact_headers
from fakes.toolhost import ClientGone, tool_reply
from fakes.toolnames import with_agent_names
from fakes.writer import BurstResponse, PlanWriter, reset_connection

__all__ = ["MAX_BODY_BYTES", "GatewayApp"]

MAX_BODY_BYTES = 8 * 1024 * 1024  # larger request bodies get 413


def _err(
    status: int, message: str, type_: str = "invalid_request_error", dialect: str = "openai_chat"
) -> web.Response:
    return web.json_response(DIALECTS[dialect].error_body(message, type_), status=status)


class GatewayApp:
    """Holds the sessions and builds the aiohttp ``web.Application``."""

    def __init__(
        self,
        retention: Retention | None = None,
        *,
        allowed_hosts: Iterable[str] = (),
        bind_host: str = "127.0.0.1",
    ) -> None:
        """``allowed_hosts``: host names a request may carry in ``Host`` / ``Origin`` besides
        the loopback ones and ``bind_host`` (``fakes.loopback``)."""
        self.sessions: dict[str, SessionState] = {}
        self.retention = retention or Retention()
        # The session the root ``/v1`` serves too (``serve_at_root``); None: the root serves none.
        self.root_sid: str | None = None
        self.base_url = ""
        # Set by the Gateway that runs this app: what a session's own refusing port needs.
        self.host = "127.0.0.1"
        self.runner: web.AppRunner | None = None
        self.ssl_context: ssl.SSLContext | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.host_check = HostCheck(allowed_hosts, bind_host)
        self.app = web.Application(
            client_max_size=MAX_BODY_BYTES,
            middlewares=[host_check_middleware(self.host_check, _refusal_body)],
        )
        r = self.app.router
        r.add_post("/_control/sessions", self._create)
        r.add_get("/_control/sessions/{sid}/journal", self._journal)
        r.add_delete("/_control/sessions/{sid}", self._drop)
        add_control_routes(r, self.sessions)
        for d in REGISTRY.values():  # one endpoint per dialect (Anthropic's takes ?beta=true too)
            r.add_post("/s/{sid}" + d.PATH, functools.partial(self._chat, dialect=d.NAME))
        r.add_post("/s/{sid}/v1/messages/count_tokens", self._count_tokens)
        r.add_get("/s/{sid}/v1/models", self._models)
        r.add_post("/s/{sid}/tools/{tool}", self._tool)
        r.add_route("*", "/s/{sid}/mcp", self._mcp)
        r.add_get("/s/{sid}/credential", self._credential)
        r.add_route("*", "/s/{sid}/{tail:.*}", self._unknown)
        # The same endpoints without ``/s/{sid}``: they serve ``root_sid``, if any.
        for d in REGISTRY.values():
            r.add_post(d.PATH, functools.partial(self._chat, dialect=d.NAME))
        r.add_post("/v1/messages/count_tokens", self._count_tokens)
        r.add_get("/v1/models", self._models)
        r.add_route("*", "/v1/{tail:.*}", self._unknown)
        r.add_get("/", self._index)
        r.add_route("*", "/{tail:.*}", self._nowhere)

    # -- sessions -------------------------------------------------------------
    def add_session(
        self,
        scenario: Scenario | dict[str, Any],
        time_scale: float = 1.0,
    ) -> SessionState:
        if isinstance(scenario, dict):
            scenario = Scenario.from_dict(scenario)
        if not (isinstance(time_scale, (int, float)) and time_scale > 0):
            raise ScenarioError(f"time_scale: {time_scale!r} must be a number > 0")
        st = SessionState(scenario=scenario, time_scale=float(time_scale), retention=self.retention)
        refuse = scenario.refuse_connections
        if refuse is not None:
            if self.runner is None:
                raise FakesError(
                    f"scenario {scenario.id!r}: refuse_connections needs a running gateway"
                )
            st.refused = RefusingPort(self.host, float(refuse["seconds"]))
            st.refused.open_after(st.refused.seconds * st.time_scale, self.runner, self.ssl_context)
        self.sessions[st.id] = st
        return st

    def serve_at_root(self, sid: str) -> None:
        """Serve session ``sid`` at the root ``/v1`` too (one scenario served)."""
        st = self.sessions.get(sid)
        if st is None:
            raise FakesError(f"unknown session {sid!r}")
        if st.refused is not None:  # the main port never refuses: it would skip the refusal
            raise FakesError(
                f"scenario {st.scenario.id!r} refuses connections on its own port; "
                "it cannot be served at the root"
            )
        self.root_sid = sid

    def _forget(self, sid: str) -> SessionState | None:
        if sid == self.root_sid:
            self.root_sid = None
        return self.sessions.pop(sid, None)

    def drop(self, sid: str) -> bool:
        """Forget a session; its own port, if any, closes in the background. False if unknown."""
        st = self._forget(sid)
        if st is not None and st.refused is not None:
            task = asyncio.get_running_loop().create_task(st.refused.close())
            self._closing.add(task)  # a strong reference until it is done
            task.add_done_callback(self._closing.discard)
        return st is not None

    async def drop_now(self, sid: str) -> bool:
        """Forget a session and close its own port before returning. False if unknown."""
        st = self._forget(sid)
        if st is not None and st.refused is not None:
            await st.refused.close()
        return st is not None

    async def close_ports(self) -> None:
        """Close every session's own port (before the runner stops its sites)."""
        for st in self.sessions.values():
            if st.refused is not None:
                await st.refused.close()

    def urls(self, sid: str) -> dict[str, str]:
        base = self.base_url
        refused = self.sessions[sid].refused if sid in self.sessions else None
        if refused is not None:  # the session's own port, same scheme and host
            scheme = base.split("://", 1)[0] or "http"
            host = f"[{self.host}]" if ":" in self.host else self.host
            base = f"{scheme}://{host}:{refused.port}"
        return {
            "session": sid,
            "base_url": f"{base}/s/{sid}/v1",
            "tool_endpoint": f"{base}/s/{sid}/tools",
            "mcp_endpoint": f"{base}/s/{sid}/mcp",
            "credential_url": f"{base}/s/{sid}/credential",
        }

    def _listed(self) -> tuple[str | None, list[IndexSession]]:
        """The root ``/v1`` URL (or None) and every session, as the index lists them."""
        sessions: list[IndexSession] = []
        for sid, st in self.sessions.items():
            urls = self.urls(sid)
            sessions.append(
                {
                    "session": sid,
                    "scenario": st.scenario.id,
                    "title": st.scenario.title,
                    "base_url": urls["base_url"],
                    "tool_endpoint": urls["tool_endpoint"],
                    "mcp_endpoint": urls["mcp_endpoint"],
                }
            )
        return (f"{self.base_url}/v1" if self.root_sid else None), sessions

    async def _index(self, request: web.Request) -> web.Response:
        doc = index_doc(self.base_url, *self._listed())
        if prefers_html(request.headers.get("Accept", "")):
            return web.Response(text=render_html(doc), content_type="text/html")
        return web.json_response(doc)

    def _not_found(self, request: web.Request, dialect: str = "openai_chat") -> web.Response:
        """404 for a path no session answers; the body lists the prefixes that do."""
        sid = request.match_info.get("sid")
        why = f"unknown session {sid!r}; " if sid else ""
        if sid is None and request.path.startswith("/v1/"):
            why = "the root /v1 serves a session only when one scenario is served; "
        prefixes = valid_prefixes(*self._listed())
        message = f"no such endpoint: {request.method} {request.path} ({why}valid prefixes: "
        message += (", ".join(prefixes) or "none yet, see POST /_control/sessions") + ")"
        body = DIALECTS[dialect].error_body(message, "invalid_request_error")
        body["valid_prefixes"] = prefixes
        return web.json_response(body, status=404)

    async def _create(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
        except Exception as e:  # noqa: BLE001 - any parse failure is the client's
            return _err(400, f"control body is not valid JSON: {e}")
        if not isinstance(data, dict):
            return _err(400, "control body must be a JSON object")
        scale = data.pop("time_scale", 1.0)
        try:
            if "path" in data:
                sc: Scenario | dict[str, Any] = load_scenario(Path(data["path"]))
            else:
                sc = data.get("scenario", data)
            st = self.add_session(sc, scale)
        except ScenarioError as e:
            return _err(400, str(e))
        return web.json_response(self.urls(st.id))

    async def _journal(self, request: web.Request) -> web.Response:
        st = self.sessions.get(request.match_info["sid"])
        if st is None:
            return _err(404, f"unknown session {request.match_info['sid']!r}")
        return web.json_response(st.journal())

    async def _drop(self, request: web.Request) -> web.Response:
        if not await self.drop_now(request.match_info["sid"]):
            return _err(404, f"unknown session {request.match_info['sid']!r}")
        return web.json_response({"dropped": request.match_info["sid"]})

    # -- journaling -----------------------------------------------------------
    @overload
    def _entry(
        self, st: SessionState, request: web.Request, kind: Literal["chat"]
    ) -> ChatEntry: ...
    @overload
    def _entry(
        self, st: SessionState, request: web.Request, kind: Literal["count_tokens"]
    ) -> CountTokensEntry: ...
    @overload
    def _entry(
        self, st: SessionState, request: web.Request, kind: Literal["models"]
    ) -> ModelsEntry: ...
    @overload
    def _entry(
        self, st: SessionState, request: web.Request, kind: Literal["unknown"]
    ) -> UnknownEntry: ...
    @overload
    def _entry(
        self, st: SessionState, request: web.Request, kind: Literal["tool"], **tool: Any
    ) -> ToolEntry: ...
    @overload
    def _entry(
        self, st: SessionState, request: web.Request, kind: Literal["mcp"], **fields: Any
    ) -> McpEntry: ...
    def _entry(self, st: SessionState, request: web.Request, kind: Kind, **fields: Any) -> Entry:
        """A new entry of ``kind`` appended to the journal; ``fields`` holds the own fields of
        a tool or MCP entry, which come last."""
        t_arrival = time.monotonic_ns()  # before any work on the request below
        e: dict[str, Any] = {
            "seq": st.count,
            "kind": kind,
            "step": None,
            "method": request.method,
            "path": request.path,
            "headers": redact_headers(request.headers),
            "body": None,
            "body_error": None,
            "t_arrival_ns": t_arrival,
            "fault": None,
            "fault_params": None,
            "response": None,
            "harness_error": None,
            "dialect": None,  # wire dialect of a scripted request (contracts §2)
            "otherwise": False,  # served by `otherwise` (explicit or default), contracts §2
            **fields,
        }
        # One literal for every kind keeps the field order of the JSON; which TypedDict of the
        # union it is follows from ``kind`` (the overloads say so to callers).
        entry = cast(Entry, e)
        st.add(entry)
        return entry

    async def _read_json(self, request: web.Request, e: Entry) -> Any:
        """Parsed body, or a web.Response (4xx) already recorded in ``e``."""
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            e["body_error"] = f"body larger than {MAX_BODY_BYTES} bytes"
            return _err(
                413,
                f"request body larger than the limit of {MAX_BODY_BYTES} bytes",
                dialect=e.get("dialect") or "openai_chat",
            )
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as ex:
            e["body_error"] = f"invalid JSON: {ex}"
            return _err(
                400,
                f"request body is not valid JSON: {ex}",
                dialect=e.get("dialect") or "openai_chat",
            )
        if self.retention.keeps_whole(len(raw)):
            e["body"] = body
        else:  # a bounded journal keeps a digest of a large body (the handler has it whole)
            e["body_digest"] = digest(raw)
        return body

    # -- handlers -------------------------------------------------------------
    def _session(self, request: web.Request) -> SessionState | None:
        sid = request.match_info.get("sid", self.root_sid)
        return self.sessions.get(sid) if sid is not None else None

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        d = "anthropic_messages"
        st = self._session(request)
        if st is None:
            return self._not_found(request, d)
        e = self._entry(st, request, "count_tokens")
        e["dialect"] = d
        body = await self._read_json(request, e)
        if isinstance(body, web.Response):
            return self._record_simple(e, body)
        problem = anthropic_messages.check_request(body)
        if problem:
            e["body_error"] = problem
            return self._record_simple(e, _err(400, problem, dialect=d))
        count = anthropic_messages.count_tokens(body)
        return self._record_simple(e, web.json_response({"input_tokens": count}))

    async def _chat(self, request: web.Request, dialect: str = "openai_chat") -> web.StreamResponse:
        st = self._session(request)
        if st is None:
            return self._not_found(request, dialect)
        e = self._entry(st, request, "chat")
        e["dialect"] = dialect
        key = _api_key(request)
        e["credential"] = st.key_label(key)
        body = await self._read_json(request, e)
        if isinstance(body, web.Response):
            return self._record_simple(e, body)
        problem = DIALECTS[dialect].check_request(body)
        if problem:
            e["body_error"] = problem
            return self._record_simple(e, _err(400, problem, dialect=dialect))
        # Steps match on a chat-shaped view of the request: scripts are dialect-neutral.
        step, otherwise = st.take_step(DIALECTS[dialect].match_view(body))
        if step is None:
            plan = harness_error_plan(
                f"scenario {st.scenario.id!r}: no script step left that matches this request "
                f"(request #{e['seq']}, stream={bool(body.get('stream'))}) and no `otherwise` "
                "or fault step to serve it",
                dialect,
            )
        else:
            # An `otherwise` entry keeps step null: readers that look a step up by index
            # (checks, the abort watcher) never take it for the scripted request.
            e["step"] = None if otherwise else step.index
            e["otherwise"] = otherwise
            named = with_agent_names(step, body)  # scripted tool names as the agent offers them
            plan = make_plan(named, body, dialect, api_key=key)
            if _says_expired(plan):
                st.expire(key)
        e["harness_error"] = plan.harness_error
        e["fault"] = plan.fault
        e["fault_params"] = dict(step.fault_params or {}) if step is not None else None
        return await self._execute(request, plan, e, st)

    async def _credential(self, request: web.Request) -> web.Response:
        """The session's credential source (RTY-10): the key a refresh gets, once a request was
        answered 401 for expired credentials; null before. Not journaled: it holds a key."""
        st = self._session(request)
        if st is None:
            return self._not_found(request)
        return web.json_response({"api_key": st.refreshed_key})

    async def _models(self, request: web.Request) -> web.StreamResponse:
        st = self._session(request)
        if st is None:
            return self._not_found(request)
        e = self._entry(st, request, "models")
        return self._record_simple(
            e,
            web.json_response(
                {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
            ),
        )

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        st = self._session(request)
        if st is None:
            return self._not_found(request)
        e = self._entry(st, request, "unknown")
        e["harness_error"] = "unknown endpoint"
        return self._record_simple(
            e, _err(404, f"no such endpoint: {request.method} {request.path}")
        )

    async def _nowhere(self, request: web.Request) -> web.Response:
        return self._not_found(request)

    async def _tool(self, request: web.Request) -> web.StreamResponse:
        st = self._session(request)
        if st is None:
            return self._not_found(request)
        name = request.match_info["tool"]
        e = self._entry(
            st, request, "tool", tool=name, call_id=None, arguments=None, behaviour=None
        )
        body = await self._read_json(request, e)
        if isinstance(body, web.Response):
            return self._record_simple(e, body)
        if isinstance(body, dict):
            e["call_id"], e["arguments"] = body.get("call_id"), body.get("arguments")
        script = st.scenario.tool_host.get(name)
        if not script:
            problem = f"tool {name!r} has no scripted behaviour"
            e["harness_error"] = problem
            return self._record_simple(e, _err(500, problem, "harness_error"))
        i = st.tool_cursor.get(name, 0)
        st.tool_cursor[name] = i + 1
        beh = script[min(i, len(script) - 1)]
        e["behaviour"] = next(iter(beh))
        try:
            status, payload = await tool_reply(beh, st.time_scale, request.transport)
        except ClientGone as gone:
            return self._record_gone(e, gone.left_ns)
        return self._record_simple(e, web.json_response(payload, status=status))

    async def _mcp(self, request: web.Request) -> web.StreamResponse:
        st = self._session(request)
        if st is None:
            return self._not_found(request)
        e = self._entry(st, request, "mcp", **mcp.ENTRY_FIELDS)
        try:
            resp = await mcp.serve(st, request, e)  # a cut answer is recorded as it is written
        except ClientGone as gone:  # a hung tools/call the client hung up on
            return self._record_gone(e, gone.left_ns)
        return self._record_simple(e, resp) if isinstance(resp, web.Response) else resp

    # -- carrying out -----------------------------------------------------------
    def _record_gone(self, e: Entry, left_ns: int) -> web.Response:
        """``e`` answered by nothing: the client left at ``left_ns`` while it was held."""
        e["response"] = {
            "status": None,
            "headers": {},
            "stream": False,
            "sent": "",
            "sent_bytes": 0,
            "full_bytes": 0,
            "events_sent": 0,
            "cut_at_byte": None,
            "t_headers_ns": None,
            "t_wall_headers": None,
            "t_end_ns": left_ns,
            "end": "client_gone",
        }
        return web.Response(status=500)  # never reaches the wire

    def _record_simple(self, e: Entry, resp: web.Response) -> web.Response:
        now = time.monotonic_ns()
        data = resp.body if isinstance(resp.body, bytes) else b""
        sent, sent_digest = kept_text(data, (), self.retention)
        r: ResponseRecord = {
            "status": resp.status,
            "headers": redact_headers(resp.headers),
            "stream": False,
            "sent": sent,
            "sent_bytes": len(data),
            "full_bytes": len(data),
            "events_sent": 0,
            "cut_at_byte": None,
            "t_headers_ns": now,
            "t_wall_headers": time.time(),
            "t_end_ns": now,
            "end": "complete",
        }
        if sent_digest is not None:
            r["sent_digest"] = sent_digest
        e["response"] = r
        return resp

    async def _execute(
        self, request: web.Request, plan: Plan, e: ChatEntry, st: SessionState
    ) -> web.StreamResponse:
        scale = st.time_scale
        # An agent on a fast clock: HTTP-dates are rendered, and recorded, in its clock.
        clock: Callable[[float], float] = st.agent_time if st.agent_clock is not None else float
        r: ResponseRecord = {
            "status": plan.status,
            "headers": {},
            "stream": plan.stream,
            "sent": "",
            "sent_bytes": 0,
            "full_bytes": plan.full_bytes,
            "events_sent": 0,
            "cut_at_byte": plan.cut_at_byte,
            "t_headers_ns": None,
            "t_wall_headers": None,
            "t_end_ns": None,
            "end": "complete",
        }
        e["response"] = r
        transport = request.transport
        if plan.reset_before_headers:
            reset_connection(transport)
            r.update({"status": None, "end": "reset", "t_end_ns": time.monotonic_ns()})
            return web.Response(status=500)  # never reaches the wire
        if plan.header_delay:
            # No status is on the wire until the headers are: a client that gives up meanwhile
            # (its request timeout) left a failure without one, ended when it left.
            r["status"] = None
            left = await hold_headers(transport, plan.header_delay * scale)
            if left is not None:
                r.update({"end": "client_gone", "t_end_ns": left})
                return web.Response(status=500)  # never reaches the wire
            r["status"] = plan.status
        headers = dict(plan.headers)
        if plan.retry_after_date is not None:
            # In the agent's clock: an agent on a fast clock reads the date against its own.
            headers["Retry-After"] = email.utils.formatdate(
                clock(time.time()) + plan.retry_after_date, usegmt=True
            )
        resp = BurstResponse(status=plan.status, headers=headers)
        if plan.stream:
            resp.enable_chunked_encoding()
        else:
            resp.content_length = plan.full_bytes
        w = PlanWriter(
            request, resp, plan, r, scale, None if clock is float else clock, st.headers_sent
        )
        try:
            await w.run()
        except (ConnectionError, asyncio.CancelledError) as ex:
            r["t_end_ns"], r["end"] = time.monotonic_ns(), "client_gone"
            if isinstance(ex, asyncio.CancelledError):
                self._record_sent(r, w.data, plan)
                raise
        self._record_sent(r, w.data, plan)
        return resp

    def _record_sent(self, r: ResponseRecord, data: bytes, plan: Plan) -> None:
        """What the journal keeps of the bytes written, and when the response ended. Byte
        counts stay those of the wire; the text kept loses an echoed key."""
        r["sent"], sent_digest = kept_text(data, plan.secrets, self.retention)
        if sent_digest is not None:
            r["sent_digest"] = sent_digest
        if r.get("t_end_ns") is None:  # stamped by the writer as the last byte left, if it did
            r["t_end_ns"] = time.monotonic_ns()


def _refusal_body(request: web.Request, message: str) -> dict[str, Any]:
    """The body of a refused Host / Origin in the error shape of the endpoint asked: JSON-RPC on
    the MCP endpoint, the dialect's on a model endpoint, chat completions' elsewhere."""
    path = request.path.rstrip("/")
    if path.endswith("/mcp"):
        return {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": mcp.SERVER_ERROR, "message": message},
        }
    if path.endswith("/v1/messages/count_tokens"):
        path = path.removesuffix("/count_tokens")
    for d in REGISTRY.values():
        if path.endswith(d.PATH):
            type_ = "permission_error" if d.NAME == "anthropic_messages" else "forbidden_host"
            return d.error_body(message, type_)
    return REGISTRY["openai_chat"].error_body(message, "forbidden_host")


def _says_expired(plan: Plan) -> bool:
    """A 401 whose body says the credentials expired (the wording RTY-10's check reads)."""
    return plan.status == 401 and any(b"expired" in c.data.lower() for c in plan.chunks)


def _api_key(request: web.Request) -> str | None:
    """The API key the request carried: ``Authorization: Bearer``, ``x-api-key`` or ``api-key``."""
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key") or request.headers.get("api-key") or None
