"""The tool executor's I/O against a hosted tool server on loopback, and the local tools.

The decisions (unknown tool, arguments, retries, limits, texts, caps) are tested on the core in
``test_core_tools.py``; here one attempt reports raw outcomes, and ``run`` (the per-item loop
of a batch) is checked end to end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from conformance.reference.toolbox import ToolBox, ToolSpec

HINT = "(output truncated, please reduce your output)"
SPECS = [
    ToolSpec(
        "get_weather",
        "Weather for a city.",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    ),
    ToolSpec(
        "write_note",
        "Write a note.",
        {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title"],
        },
    ),
]


class Host:
    """A scripted tool host: replies are popped in order; requests are recorded."""

    def __init__(self) -> None:
        self.replies: list[Callable[[], web.StreamResponse] | tuple[int, dict | str] | float] = []
        self.requests: list[tuple[str, dict]] = []
        self.seen = asyncio.Event()  # set once a request arrived

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.match_info["name"], await request.json()))
        self.seen.set()
        reply = self.replies.pop(0) if self.replies else (200, {"output": "default"})
        if isinstance(reply, float):
            await asyncio.sleep(reply)  # a hang; the client must give up first
            return web.json_response({"output": "late"})
        status, body = reply
        if isinstance(body, str):
            return web.Response(status=status, text=body)
        return web.json_response(body, status=status)


@pytest.fixture
async def host() -> AsyncIterator[tuple[Host, str]]:
    h = Host()
    app = web.Application()
    app.router.add_post("/tools/{name}", h.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield h, f"http://127.0.0.1:{port}/tools"
    await runner.cleanup()


def box(endpoint: str | None, **kw) -> ToolBox:
    kw.setdefault("time_scale", 0.001)
    return ToolBox(SPECS, hosted_endpoint=endpoint, workdir=kw.pop("workdir", None), **kw)


# ---- one attempt: the raw outcome, no retry, no limit, no cap (the core decides) ----------
async def test_attempt_posts_call_id_and_arguments_once(host) -> None:
    h, url = host
    h.replies = [(200, {"output": "sunny"})]
    assert await box(url).attempt("c1", "get_weather", {"city": "Oslo"}) == ("ok", "sunny", "")
    assert h.requests == [("get_weather", {"call_id": "c1", "arguments": {"city": "Oslo"}})]


async def test_TOL_03_attempt_reports_a_structured_error_raw(host) -> None:
    h, url = host
    h.replies = [(200, {"error": {"type": "execution_error", "message": "disk full"}})]
    out = await box(url).attempt("c1", "write_note", {"title": "t"})
    assert out == ("error", "disk full", "execution_error") and len(h.requests) == 1


async def test_attempt_reports_an_unstructured_http_error(host) -> None:
    h, url = host
    h.replies = [(500, "oops")]
    assert await box(url).attempt("c1", "write_note", {"title": "t"}) == (
        "error",
        "HTTP 500 oops",
        "http",
    )


async def test_TOL_05_attempt_reports_the_denial_reason(host) -> None:
    h, url = host
    h.replies = [(200, {"error": {"type": "permission_denied", "message": "writes are disabled"}})]
    out = await box(url).attempt("c1", "write_note", {"title": "t"})
    assert out == ("denied", "writes are disabled", "") and len(h.requests) == 1


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ((503, {"error": {"type": "transient", "message": "busy"}}), "busy"),
        ((200, {"error": {"type": "transient"}}), "HTTP 200"),
        (
            (504, {"error": {"type": "timeout", "message": "upstream timed out"}}),
            "upstream timed out",
        ),
        ((504, ""), "the tool timed out (HTTP 504)"),
    ],
)
async def test_TOL_07_attempt_reports_transient_failures_without_retrying(
    host, reply, text
) -> None:
    h, url = host
    h.replies = [reply, (200, {"output": "not asked for"})]
    assert await box(url).attempt("c1", "get_weather", {"city": "x"}) == ("transient", text, "")
    assert len(h.requests) == 1


async def test_TOL_07_attempt_connection_error_is_transient() -> None:
    out = await box("http://127.0.0.1:1/tools").attempt("c1", "get_weather", {"city": "x"})
    assert out == ("transient", "connection error: ClientConnectorError", "")


async def test_attempt_plain_text_reply_is_output(host) -> None:
    h, url = host
    h.replies = [(200, "raw text")]
    assert await box(url).attempt("c1", "get_weather", {"city": "x"}) == ("ok", "raw text", "")


async def test_attempt_without_endpoint_is_unconfigured() -> None:
    assert await box(None).attempt("c1", "get_weather", {"city": "x"}) == (
        "error",
        "",
        "unconfigured",
    )


async def test_FMT_03_attempt_does_not_cap(host) -> None:
    h, url = host
    big = "x" * 100_000
    h.replies = [(200, {"output": big})]
    assert (await box(url, output_limit=10).attempt("c1", "get_weather", {"city": "x"}))[1] == big


async def test_TOL_04_attempt_has_no_limit_of_its_own_and_stops_when_cancelled(host) -> None:
    h, url = host
    h.replies = [30.0]  # a hang
    task = asyncio.ensure_future(box(url, timeout_s=0.001).attempt("c1", "get_weather", {}))
    await asyncio.wait_for(h.seen.wait(), 5)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ---- the per-item loop (batch items): the same policy, with scaled sleeps ---------------------
async def test_TOL_07_run_retries_a_transient_item_then_succeeds(host) -> None:
    h, url = host
    h.replies = [
        (503, {"error": {"type": "transient", "message": "busy"}}),
        (200, {"output": "ok"}),
    ]
    res = await box(url).run("c1", "get_weather", {"city": "x"}, truncated=False)
    assert (res.status, res.output) == ("ok", "ok") and len(h.requests) == 2


async def test_TOL_07_run_gives_up_after_two_retries(host) -> None:
    h, url = host
    h.replies = [(503, {"error": {"type": "transient", "message": "busy"}})] * 5
    res = await box(url).run("c1", "get_weather", {"city": "x"}, truncated=False)
    assert res.output == "Error: tool 'get_weather' is temporarily unavailable: busy"
    assert len(h.requests) == 3


async def test_TOL_04_run_hang_times_out_with_unscaled_limit(host) -> None:
    h, url = host
    h.replies = [5.0]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    res = await box(url, timeout_s=60, time_scale=0.001).run(
        "c1", "get_weather", {"city": "x"}, truncated=False
    )
    assert loop.time() - t0 < 1.0
    assert res.status == "timeout" and "timed out" in res.output and "60 seconds" in res.output


async def test_DBG_03_run_logs_one_record_per_call_without_arguments(host, tmp_path: Path) -> None:
    h, url = host
    log = tmp_path / "dbg" / "tool-calls.jsonl"
    tb = box(url, log_path=log)
    await tb.run("c1", "get_weather", {"city": "SECRET-CITY"}, truncated=False)
    await tb.run("c2", "nope", "{}", truncated=False)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and "SECRET-CITY" not in log.read_text()
    recs = [json.loads(x) for x in lines]
    assert [(r["call_id"], r["name"], r["status"]) for r in recs] == [
        ("c1", "get_weather", "ok"),
        ("c2", "nope", "unknown"),
    ]
    assert list(recs[0])[0] == "ts"
    assert all({"duration_ms", "arguments_chars", "output_chars"} <= set(r) for r in recs)


def test_specs_for_request_omits_blocked() -> None:
    tb = box(None)
    names = [t["function"]["name"] for t in tb.specs_for_request({"write_note"})]
    assert names == ["get_weather"]
    assert tb.schema_of("get_weather")["required"] == ["city"] and tb.schema_of("zzz") is None


# Local tools


async def test_local_tools_roundtrip(tmp_path: Path) -> None:
    tb = box(None, workdir=tmp_path)
    assert (
        await tb.run(
            "1", "write_file", {"path": "a/b.txt", "content": "hello\nworld\n"}, truncated=False
        )
    ).status == "ok"
    assert (
        await tb.run("2", "read_file", {"path": "a/b.txt"}, truncated=False)
    ).output == "hello\nworld\n"
    assert (
        await tb.run(
            "3",
            "edit_file",
            {"path": "a/b.txt", "old_string": "world", "new_string": "there"},
            truncated=False,
        )
    ).status == "ok"
    assert (tmp_path / "a/b.txt").read_text() == "hello\nthere\n"
    assert (await tb.run("4", "list_dir", {"path": "a"}, truncated=False)).output == "b.txt"
    assert (
        await tb.run("5", "grep", {"pattern": "the"}, truncated=False)
    ).output == "a/b.txt:2:there"
    res = await tb.run("6", "run_shell", {"command": "echo hi; echo oops >&2"}, truncated=False)
    assert res.status == "ok" and res.output.startswith("hi") and "oops" in res.output


async def test_local_edit_missing_string_is_error(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("abc")
    res = await box(None, workdir=tmp_path).run(
        "1", "edit_file", {"path": "f.txt", "old_string": "zzz", "new_string": "y"}, truncated=False
    )
    assert (
        res.status == "error"
        and "not found" in res.output
        and (tmp_path / "f.txt").read_text() == "abc"
    )


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../x"])
async def test_local_paths_confined(tmp_path: Path, path: str) -> None:
    wd = tmp_path / "wd"
    wd.mkdir()
    tb = box(None, workdir=wd)
    res = await tb.run("1", "write_file", {"path": path, "content": "x"}, truncated=False)
    assert res.status == "error" and "outside the working directory" in res.output
    assert not (tmp_path / "outside.txt").exists()
    res = await tb.run("2", "read_file", {"path": path}, truncated=False)
    assert res.status == "error" and "outside" in res.output


async def test_local_shell_timeout_kills_process_group(tmp_path: Path) -> None:
    tb = box(None, workdir=tmp_path, timeout_s=100, time_scale=0.002)  # 0.2 s real
    t0 = asyncio.get_running_loop().time()
    res = await tb.run(
        "1", "run_shell", {"command": "sleep 30 & echo $! > bg.pid; wait"}, truncated=False
    )
    assert asyncio.get_running_loop().time() - t0 < 3.0
    assert res.status == "timeout" and "100 seconds" in res.output
    bg = int((tmp_path / "bg.pid").read_text())
    # The background child is in the killed process group: it must be gone (or a zombie).
    for _ in range(100):
        try:
            state = Path(f"/proc/{bg}/stat").read_text().split()[2]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail(f"background process {bg} survived the timeout")


async def test_local_shell_failure_reports_status(tmp_path: Path) -> None:
    res = await box(None, workdir=tmp_path).run(
        "1", "run_shell", {"command": "echo bad; exit 3"}, truncated=False
    )
    assert res.status == "error" and "status 3" in res.output and "bad" in res.output
