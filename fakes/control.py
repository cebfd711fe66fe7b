"""The control endpoints a harness in another process needs beyond creating, reading and dropping
sessions (those are in ``fakes.server``): the abort watcher's wait for a step's headers, the
agent's fast clock, the measurement of the gateway loop's timer overshoot, and the restart of a
session's scenario (a user of ``fakes serve`` runs a client again without restarting the
server)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fakes.clock import overshoot
from fakes.plan import DIALECTS
from fakes.session import SessionState

__all__ = ["add_control_routes"]


def _err(status: int, message: str) -> web.Response:
    body = DIALECTS["openai_chat"].error_body(message, "invalid_request_error")
    return web.json_response(body, status=status)


def add_control_routes(router: Any, sessions: dict[str, SessionState]) -> None:
    """Add the endpoints below to ``router``, serving the sessions of ``sessions``."""

    def session(request: web.Request) -> SessionState | None:
        return sessions.get(request.match_info["sid"])

    def unknown(request: web.Request) -> web.Response:
        return _err(404, f"unknown session {request.match_info['sid']!r}")

    async def headers_out(request: web.Request) -> web.Response:
        """Wait (up to ``?timeout=`` s, at most 5) until the response served by script step
        ``step`` has its headers out: ``{"sent": true|false}``. The abort watcher of a harness
        in another process waits here instead of polling the journal."""
        st = session(request)
        if st is None:
            return unknown(request)
        try:
            step = int(request.match_info["step"])
            timeout = min(5.0, max(0.0, float(request.query.get("timeout", "1"))))
        except ValueError:
            return _err(400, "step must be an integer and timeout a number of seconds")
        return web.json_response({"sent": await st.wait_headers(step, timeout)})

    async def agent_clock(request: web.Request) -> web.Response:
        """The session's agent runs on a fast clock: body ``{"origin", "speed"}`` (real wall
        time it started from, its speed); HTTP-dates are then rendered in that clock."""
        st = session(request)
        if st is None:
            return unknown(request)
        try:
            data = await request.json()
            origin, speed = float(data["origin"]), float(data["speed"])
        except (ValueError, KeyError, TypeError) as e:
            return _err(400, f"agent clock: a JSON body {{origin, speed}} of numbers: {e}")
        if not speed > 0:
            return _err(400, f"agent clock speed must be > 0, got {speed!r}")
        st.agent_clock = (origin, speed)
        return web.json_response({"origin": origin, "speed": speed})

    async def calibrate(request: web.Request) -> web.Response:
        """Timer overshoot of this gateway's event loop over ``?seconds=`` (at most 2)."""
        try:
            seconds = min(2.0, max(0.01, float(request.query.get("seconds", "0.3"))))
        except ValueError:
            return _err(400, "seconds must be a number")
        return web.json_response(await overshoot(seconds))

    async def restart(request: web.Request) -> web.Response:
        """Start the session's scenario over (``SessionState.restart``), same id and URLs:
        ``{"session", "restarted": true, "dropped_entries"}``; 409 for a session that refuses
        connections on a port of its own."""
        st = session(request)
        if st is None:
            return unknown(request)
        if st.refused is not None:
            return _err(
                409,
                f"session {st.id!r} (scenario {st.scenario.id!r}) refuses connections on a port "
                "of its own, whose window cannot be replayed: drop it and create a new session "
                "(POST /_control/sessions)",
            )
        dropped = st.restart()
        return web.json_response({"session": st.id, "restarted": True, "dropped_entries": dropped})

    router.add_get("/_control/sessions/{sid}/headers/{step}", headers_out)
    router.add_post("/_control/sessions/{sid}/restart", restart)
    router.add_put("/_control/sessions/{sid}/agent_clock", agent_clock)
    router.add_get("/_control/calibrate", calibrate)
