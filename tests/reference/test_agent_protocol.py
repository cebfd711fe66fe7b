"""run_protocol against a scripted server: retries, stream fallback, continuation, tools, abort."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from agent_server import Script, json_reply, sse_reply, start_server
from aiohttp import web

from conformance.reference import HELLO, Behaviours, run_protocol
from conformance.reference.continuation import CONTINUATION_TEXT

KEY = "sk-test-secret"


def start_msg(base: str, **extra) -> dict:
    msg = {
        "type": "start",
        "protocol": 1,
        "model": "m",
        "prompt": "say hi",
        "tools": [],
        "tool_endpoint": f"{base}/tools",
        "time_scale": 0.001,
        "config": {"fallback_model": None, "max_output_tokens": None},
    }
    msg.update(extra)
    return msg


async def run(script: Script, behaviours: Behaviours = Behaviours(), abort=None, **extra):  # noqa: B008
    runner, base = await start_server(script)
    events: list[dict] = []
    try:
        reason = await asyncio.wait_for(
            run_protocol(
                start_msg(base, **extra),
                events.append,
                abort or asyncio.Event(),
                base_url=f"{base}/v1",
                api_key=KEY,
                behaviours=behaviours,
                rng=random.Random(1),
            ),
            10,
        )
    finally:
        await runner.cleanup()
    assert events[0] == HELLO
    assert [e["type"] for e in events].count("turn_end") == 1
    assert events[-1] == {"type": "turn_end", "reason": reason}
    return reason, events


def of(events, kind):
    return [e for e in events if e["type"] == kind]


async def test_RTY_429_then_success_retries_with_unscaled_delay():
    s = Script(
        [
            json_reply({}, status=429, headers={"retry-after": "2"}),
            sse_reply(
                [{"content": "hi"}], "stop", usage={"prompt_tokens": 3, "completion_tokens": 1}
            ),
        ]
    )
    reason, events = await run(s)
    assert reason == "completed"
    assert len(s.requests) == 2 and s.requests[0] == s.requests[1]
    assert of(events, "retry") == [
        {"type": "retry", "attempt": 1, "delay_s": 2.0, "reason": "HTTP 429: retry-after 2 s"}
    ]
    assert of(events, "error") == []
    assert of(events, "usage") == [{"type": "usage", "prompt_tokens": 3, "completion_tokens": 1}]


async def test_RTY_400_not_retried_surfaces_typed_error():
    s = Script([json_reply({}, status=400)])
    reason, events = await run(s)
    assert reason == "error" and len(s.requests) == 1
    assert of(events, "error")[0]["kind"] == "bad_request"


async def test_STR_cut_mid_stream_removes_partial_then_non_stream_resend():
    s = Script(
        [
            sse_reply([{"content": "part"}, {"content": "ial"}], "stop", cut=True),
            json_reply({"role": "assistant", "content": "whole"}),
        ]
    )
    reason, events = await run(s)
    assert reason == "completed"
    assert [r["stream"] for r in s.requests] == [True, False]
    first, second = dict(s.requests[0]), dict(s.requests[1])
    first.pop("stream"), second.pop("stream")
    assert first == second
    partial_ids = {e["id"] for e in of(events, "message") if e["text"].startswith("part")}
    assert of(events, "removed") == [{"type": "removed", "id": i} for i in partial_ids]
    assert of(events, "message")[-1]["text"] == "whole"
    assert of(events, "error") == []


async def test_STR_end_without_finish_reason_falls_back_and_skips_failed_tool_calls():
    call = {"index": 0, "id": "c1", "function": {"name": "echo", "arguments": "{}"}}
    s = Script(
        [
            sse_reply([{"tool_calls": [call]}], None),
            json_reply({"role": "assistant", "content": "done"}),
        ]
    )
    tools = [{"name": "echo", "description": "", "parameters": {"type": "object"}}]
    reason, events = await run(s, tools=tools)
    assert reason == "completed"
    assert s.tool_calls == [] and of(events, "tool") == []
    assert len(of(events, "removed")) == 1


async def test_STR_fallback_switched_off_surfaces_stream_error():
    s = Script([sse_reply([{"content": "x"}], "stop", cut=True)])
    reason, events = await run(s, behaviours=Behaviours(stream_fallback=False))
    assert reason == "error" and len(s.requests) == 1
    assert of(events, "error")[0]["kind"] == "stream"


async def test_TRN_length_raises_limit_then_continues_with_meta_message():
    s = Script(
        [
            sse_reply([{"content": "aaa"}], "length"),
            sse_reply([{"content": "bbb"}], "length"),
            sse_reply([{"content": "ccc"}], "stop"),
        ]
    )
    reason, events = await run(s)
    assert reason == "completed"
    assert [r["max_tokens"] for r in s.requests] == [8192, 32768, 32768]
    assert s.requests[1]["messages"] == s.requests[0]["messages"]
    last = s.requests[2]["messages"]
    assert last[-1] == {"role": "user", "content": CONTINUATION_TEXT}
    assert last[-2] == {"role": "assistant", "content": "bbb"}
    meta = [e for e in of(events, "message") if e["meta"]]
    assert [m["text"] for m in meta] == [CONTINUATION_TEXT]


async def test_TRN_fourth_consecutive_truncation_ends_with_output_limit_error():
    s = Script([sse_reply([{"content": f"p{i}"}], "length") for i in range(5)])
    reason, events = await run(s)
    assert reason == "error" and len(s.requests) == 5  # raise once + 3 continuations + last
    assert of(events, "error")[0]["kind"] == "output_limit"


async def test_TOL_tool_call_round_trip():
    call = {"index": 0, "id": "c1", "function": {"name": "echo", "arguments": '{"x": 1}'}}
    s = Script(
        [sse_reply([{"tool_calls": [call]}], "tool_calls"), sse_reply([{"content": "ok"}], "stop")],
        tools={"echo": "pong"},
    )
    tools = [{"name": "echo", "description": "", "parameters": {"type": "object"}}]
    reason, events = await run(s, tools=tools)
    assert reason == "completed"
    assert s.tool_calls == [("echo", {"call_id": "c1", "arguments": {"x": 1}})]
    assert of(events, "tool") == [
        {"type": "tool", "call_id": "c1", "name": "echo", "status": "ok", "output": "pong"}
    ]
    msgs = s.requests[1]["messages"]
    assert msgs[-1] == {"role": "tool", "tool_call_id": "c1", "content": "pong"}
    assert msgs[-2]["tool_calls"][0]["function"]["name"] == "echo"
    assert s.requests[0]["tools"][0]["function"]["name"] == "echo"


async def test_CTL_abort_during_retry_wait_sends_nothing_more():
    s = Script([json_reply({}, status=429, headers={"retry-after": "30"})])
    abort = asyncio.Event()

    def emit_hook(e):
        if e["type"] == "retry":
            abort.set()

    runner, base = await start_server(s)
    events: list[dict] = []

    def emit(e):
        events.append(e)
        emit_hook(e)

    try:
        st = start_msg(base, time_scale=1.0)
        reason = await asyncio.wait_for(
            run_protocol(st, emit, abort, base_url=f"{base}/v1", api_key=KEY), 5
        )
    finally:
        await runner.cleanup()
    assert reason == "aborted" and len(s.requests) == 1
    assert events[-1] == {"type": "turn_end", "reason": "aborted"}
    assert KEY not in repr(events)


@pytest.mark.parametrize("flag", ["honour_retry_after"])
async def test_behaviour_switch_off_changes_wire(flag):
    s = Script(
        [
            json_reply({}, status=429, headers={"retry-after": "2"}),
            sse_reply([{"content": "hi"}], "stop"),
        ]
    )
    reason, events = await run(s, behaviours=Behaviours(**{flag: False}))
    assert reason == "completed"
    assert of(events, "retry")[0]["delay_s"] != 2.0


async def test_DBG_01_http_400_writes_redacted_debug_dump(tmp_path):
    s = Script([json_reply({}, status=400)])
    reason, events = await run(s, debug_dir=str(tmp_path / "debug"))
    assert reason == "error"
    dumps = list((tmp_path / "debug").glob("*.json"))
    assert len(dumps) == 1
    record = json.loads(dumps[0].read_text())
    assert set(record) >= {"messages", "model", "config", "error"}
    assert record["messages"] == s.requests[0]["messages"]
    assert "fault" in record["error"]
    assert KEY not in dumps[0].read_text()


HISTORY = [
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "h1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "h2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "h1", "content": "a.txt"},
]


async def test_CTX_03_unpaired_tool_calls_get_placeholder_before_sending():
    s = Script([sse_reply([{"content": "ok"}], "stop")])
    reason, _ = await run(s, history=HISTORY)
    assert reason == "completed"
    sent = s.requests[0]["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["h1", "h2"]
    assert sent[3]["role"] == "tool" and sent[3]["content"]
    assert sent[4] == {"role": "user", "content": "say hi"}


async def test_CTX_04_training_data_mode_refuses_repair():
    s = Script([sse_reply([{"content": "ok"}], "stop")])
    reason, events = await run(
        s, history=HISTORY, config={"training_data_mode": True, "max_output_tokens": None}
    )
    assert reason == "error" and s.requests == []
    assert "training-data mode" in of(events, "error")[0]["message"]


async def test_ERR_03_stop_hook_called_once_and_block_shown():
    s = Script([sse_reply([{"content": "done"}], "stop")])

    async def blocked(request):
        s.tool_calls.append(("stop_hook", await request.json()))
        return web.json_response({"error": {"type": "blocked", "message": "tests failing"}})

    s.tool = blocked  # type: ignore[method-assign]
    reason, events = await run(s, config={"stop_hook": True, "max_output_tokens": None})
    assert reason == "completed"
    assert s.tool_calls == [("stop_hook", {"call_id": "stop_hook", "arguments": {}})]
    assert "tests failing" in of(events, "message")[-1]["text"]


async def test_RTY_09_background_title_429_not_retried():
    s = Script([json_reply({}, status=429), sse_reply([{"content": "hi"}], "stop")])
    reason, events = await run(s, config={"background_title": True, "max_output_tokens": None})
    assert reason == "completed" and len(s.requests) == 2
    title = s.requests[0]
    assert title["stream"] is False and "tools" not in title
    assert "title" in json.dumps(title["messages"]).lower()
    assert of(events, "retry") == [] and of(events, "error") == []


async def test_MFB_three_overloads_switch_to_fallback_model_without_private_fields():
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "signature": "sig", "thinking_blocks": []},
    ]
    s = Script([json_reply({}, status=529)] * 3 + [sse_reply([{"content": "hi"}], "stop")])
    cfg = {"fallback_model": "backup", "max_output_tokens": None}
    reason, events = await run(s, history=history, config=cfg)
    assert reason == "completed"
    assert [r["model"] for r in s.requests] == ["m", "m", "m", "backup"]
    assert "signature" in json.dumps(s.requests[0]["messages"])
    assert "signature" not in json.dumps(s.requests[3]["messages"])
    assert "thinking_blocks" not in json.dumps(s.requests[3]["messages"])


async def test_MFB_switched_off_keeps_model():
    s = Script([json_reply({}, status=529)] * 3 + [sse_reply([{"content": "hi"}], "stop")])
    cfg = {"fallback_model": "backup", "max_output_tokens": None}
    reason, _ = await run(s, behaviours=Behaviours(model_fallback=False), config=cfg)
    assert reason == "completed"
    assert [r["model"] for r in s.requests] == ["m"] * 4


async def test_CTL_abort_mid_stream_never_falls_back():
    never = asyncio.Event()

    async def hang(request, body):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"index": 0, "delta": {"content": "par"}}]}\n\n')
        await never.wait()  # released by cancellation when the test server shuts down
        return resp

    s = Script([hang, json_reply({"role": "assistant", "content": "x"})])
    abort = asyncio.Event()
    runner, base = await start_server(s)
    events: list[dict] = []

    def emit(e):
        events.append(e)
        if e["type"] == "message":
            abort.set()

    try:
        reason = await asyncio.wait_for(
            run_protocol(start_msg(base), emit, abort, base_url=f"{base}/v1", api_key=KEY), 5
        )
    finally:
        never.set()
        await runner.cleanup()
    assert reason == "aborted"
    assert len(s.requests) == 1  # no non-streaming resend after the abort
    assert [e["type"] for e in events].count("turn_end") == 1


async def test_LOP_03_tool_call_cap_ends_turn():
    call = {"index": 0, "id": "c", "function": {"name": "echo", "arguments": "{}"}}
    s = Script([sse_reply([{"tool_calls": [call]}], "tool_calls")] * 5, tools={"echo": "x"})
    tools = [{"name": "echo", "description": "", "parameters": {"type": "object"}}]
    cfg = {"max_tool_calls": 2, "max_output_tokens": None}
    reason, events = await run(s, tools=tools, config=cfg)
    assert reason == "error"
    assert len(s.tool_calls) == 2 and len(s.requests) == 3


def error_400(message: str, code: str | None = None):
    async def handler(request, body):
        err = {"message": message, "type": "invalid_request_error", "code": code}
        return web.json_response({"error": err}, status=400)

    return handler


async def test_RTY_11_window_overflow_lowers_max_tokens_and_retries():
    msg = (
        "This model's maximum context length is 10000 tokens. However, you requested 13192 "
        "tokens (5000 in the messages, 8192 in the completion)."
    )
    s = Script([error_400(msg), sse_reply([{"content": "hi"}], "stop")])
    reason, events = await run(s)
    assert reason == "completed"
    assert s.requests[0]["max_tokens"] == 8192
    assert 0 < s.requests[1]["max_tokens"] <= 10000 - 5000
    assert s.requests[1]["messages"] == s.requests[0]["messages"]


async def test_CTX_prompt_too_long_compacts_once_then_retries():
    s = Script(
        [
            error_400("prompt is too long", "context_length_exceeded"),
            json_reply({"role": "assistant", "content": "SUMMARY-TEXT"}),
            sse_reply([{"content": "hi"}], "stop"),
        ]
    )
    reason, events = await run(s)
    assert reason == "completed"
    compaction = s.requests[1]
    assert "tools" not in compaction and "summarize" in json.dumps(compaction).lower()
    assert "SUMMARY-TEXT" in json.dumps(s.requests[2]["messages"])


async def test_CTX_overflow_again_surfaces_original_error():
    s = Script(
        [
            error_400("prompt is too long", "context_length_exceeded"),
            json_reply({"role": "assistant", "content": "S"}),
            error_400("prompt is too long", "context_length_exceeded"),
        ]
    )
    reason, events = await run(s)
    assert reason == "error" and len(s.requests) == 3
    assert [e["kind"] for e in of(events, "error")] == ["prompt_too_long"]


async def test_LOP_01_repeated_failing_call_gets_same_arguments_reminder(tmp_path):
    call = {"index": 0, "id": "c", "function": {"name": "echo", "arguments": '{"x": 1}'}}
    s = Script(
        [sse_reply([{"tool_calls": [call]}], "tool_calls")] * 3
        + [sse_reply([{"content": "giving up"}], "stop")]
    )

    async def failing(request):
        s.tool_calls.append(("echo", await request.json()))
        return web.json_response({"error": {"type": "execution_error", "message": "boom"}})

    s.tool = failing  # type: ignore[method-assign]
    tools = [{"name": "echo", "description": "", "parameters": {"type": "object"}}]
    reason, events = await run(s, tools=tools, debug_dir=str(tmp_path / "d"))
    assert reason == "completed" and len(s.requests) == 4
    after = s.requests[3]["messages"]
    assert after[-1]["role"] == "user"
    assert "echo" in after[-1]["content"] and "same arguments" in after[-1]["content"]
    assert "same arguments" not in json.dumps(s.requests[2]["messages"])
    lines = (tmp_path / "d" / "tool-calls.jsonl").read_text().splitlines()
    assert len(lines) == 3  # DBG-03: one record per tool call


async def test_switch_remove_partial_messages_off_keeps_partial_but_still_falls_back():
    s = Script(
        [
            sse_reply([{"content": "part"}], "stop", cut=True),
            json_reply({"role": "assistant", "content": "whole"}),
        ]
    )
    reason, events = await run(s, behaviours=Behaviours(remove_partial_messages=False))
    assert reason == "completed" and [r["stream"] for r in s.requests] == [True, False]
    assert of(events, "removed") == []


async def test_switch_continuation_off_ends_after_truncation():
    s = Script([sse_reply([{"content": "a"}], "length")])
    cfg = {"max_output_tokens": 100}
    reason, events = await run(s, behaviours=Behaviours(continuation=False), config=cfg)
    assert reason == "completed" and len(s.requests) == 1
    assert [e for e in of(events, "message") if e["meta"]] == []


async def test_switch_backoff_off_retries_immediately():
    s = Script([json_reply({}, status=503), sse_reply([{"content": "hi"}], "stop")])
    reason, events = await run(s, behaviours=Behaviours(backoff=False))
    assert reason == "completed" and of(events, "retry")[0]["delay_s"] == 0.0
