"""Property tests: cuts send exact prefixes; any content survives SSE framing."""

from __future__ import annotations

import json

import httpx
import httpx_sse
from gw_wire import full_stream, reply_strategy, scenario
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fakes.plan import make_plan
from fakes.scenario import Scenario

replies = reply_strategy(60)


@given(reply=replies, at=st.integers(0, 5000), stream=st.booleans())
@settings(max_examples=150, deadline=None)
def test_cut_at_byte_sends_exact_prefix(reply, at, stream):
    sc = Scenario.from_dict(scenario({"reply": reply, "fault": {"cut": {"at_byte": at}}}))
    plan = make_plan(sc.script[0], {"model": "m", "stream": stream, "messages": []})
    sent = b"".join(c.data for c in plan.chunks)
    if stream:
        full = full_stream(reply)
    else:
        full = json.dumps(
            json.loads(
                b"".join(
                    c.data
                    for c in make_plan(
                        Scenario.from_dict(scenario({"reply": reply})).script[0],
                        {"stream": False, "model": "m"},
                    ).chunks
                )
            ),
            ensure_ascii=False,
        ).encode()
    assert plan.full_bytes == len(full)
    assert sent == full[:at]


@given(reply=replies)
@example(reply={"text": "a\u2028b\x85c\r\nd\n\ndata: x", "reasoning": "é😀", "chunk_chars": 1})
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_content_survives_sse_framing(fake_gateway, reply):
    s = fake_gateway.create_session(scenario({"reply": reply}), time_scale=0.001)
    try:
        with (
            httpx.Client(timeout=5) as c,
            httpx_sse.connect_sse(
                c,
                "POST",
                s.base_url + "/chat/completions",
                json={"model": "m", "messages": [], "stream": True},
            ) as es,
        ):
            datas = [ev.data for ev in es.iter_sse()]
    finally:
        fake_gateway.drop_session(s.id)
    assert datas[-1] == "[DONE]"
    deltas = [json.loads(d)["choices"][0]["delta"] for d in datas[:-1]]
    assert "".join(d.get("content") or "" for d in deltas) == reply["text"]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == reply["reasoning"]
    for i, call in enumerate(reply.get("tool_calls") or []):
        args = "".join(
            t["function"].get("arguments", "")
            for d in deltas
            for t in d.get("tool_calls") or []
            if t["index"] == i
        )
        assert args == call["arguments"]
