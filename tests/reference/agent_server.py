"""A tiny scripted OpenAI-compatible server on 127.0.0.1:0 for agent tests (no sleeps)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

__all__ = ["Script", "sse_reply", "start_server"]

Handler = Callable[[web.Request, dict], Any]


class Script:
    """Serves chat steps in order and records every request body; hosts tools too."""

    def __init__(self, steps: list[Handler], tools: dict[str, str] | None = None) -> None:
        self.steps = list(steps)
        self.requests: list[dict] = []
        self.tool_calls: list[tuple[str, dict]] = []
        self.tools = tools or {}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        if not self.steps:
            return web.json_response({"error": {"message": "script exhausted"}}, status=500)
        return await self.steps.pop(0)(request, body)

    async def tool(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.tool_calls.append((name, await request.json()))
        return web.json_response({"output": self.tools.get(name, "")})


async def start_server(script: Script) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", script.chat)
    app.router.add_post("/tools/{name}", script.tool)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def chunk(delta: dict, finish: str | None = None) -> bytes:
    ev = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(ev)}\n\n".encode()


def sse_reply(
    parts: list[dict], finish: str | None, *, usage: dict | None = None, cut: bool = False
) -> Handler:
    """A streaming reply of ``parts`` deltas; ``cut`` drops the connection mid-stream."""

    async def handler(request: web.Request, body: dict) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, delta in enumerate(parts):
            last = i == len(parts) - 1
            await resp.write(chunk(delta, finish if last and not cut else None))
        if cut:
            request.transport.close()  # type: ignore[union-attr]
            return resp
        if usage:
            await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    return handler


def json_reply(
    message: dict,
    finish: str = "stop",
    *,
    status: int = 200,
    headers: dict | None = None,
    usage: dict | None = None,
) -> Handler:
    async def handler(request: web.Request, body: dict) -> web.Response:
        if status != 200:
            return web.json_response(
                {"error": {"message": "fault"}}, status=status, headers=headers
            )
        data: dict[str, Any] = {
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]
        }
        if usage:
            data["usage"] = usage
        return web.json_response(data, headers=headers)

    return handler
