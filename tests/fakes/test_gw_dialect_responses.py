"""The OpenAI Responses dialect: every fault primitive over HTTP(S), event by event.

Healthy streams are also parsed by the official ``openai`` SDK (when installed) so that the
rendering is proven compatible with what agents built on it expect.
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx
import pytest
from gw_content import AFTER_EVENTS_FAULTS, before_fault, content, whole_frames
from gw_wire import Got, reply_strategy, scenario
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fakes.dialects import openai_responses as orr
from fakes.plan import make_plan
from fakes.scenario import Scenario

REPLY = {
    "reasoning": "think first",
    "text": "hello wide world",
    "tool_calls": [{"id": "call_1", "name": "write", "arguments": '{"path": "a.txt"}'}],
    "finish_reason": "tool_calls",
    "chunk_chars": 5,
    "usage": {"prompt_tokens": 3, "completion_tokens": 9},
}
TEXT = {"text": "hello wide world", "chunk_chars": 5}
REQ = {"model": "m", "input": [{"role": "user", "content": "hi"}]}
TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * 4,
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def post(client: httpx.Client, s: Any, stream: bool = True, **kw: Any) -> Got:
    body = {**REQ, "stream": stream, **kw}
    buf = bytearray()
    try:
        with client.stream("POST", s.base_url + "/responses", json=body) as r:
            try:
                for chunk in r.iter_raw():
                    buf += chunk
            except httpx.HTTPError as e:
                return Got(r.status_code, dict(r.headers), bytes(buf), e)
            return Got(r.status_code, dict(r.headers), bytes(buf), None)
    except httpx.HTTPError as e:
        return Got(None, {}, b"", e)


def full(reply: dict[str, Any], terminal: bool = True, **kw: Any) -> bytes:
    return b"".join(orr.frame(*e) for e in orr.stream_events(reply, "m", terminal=terminal, **kw))


def sse(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data or raw text) per SSE block; the bodies here end in blank lines."""
    out: list[tuple[str | None, Any]] = []
    for block in raw.decode().split("\n\n")[:-1]:
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        try:
            out.append((name, json.loads(data) if data is not None else None))
        except json.JSONDecodeError:
            out.append((name, data))
    return out


def names(raw: bytes) -> list[str | None]:
    return [n for n, _ in sse(raw)]


def sdk(gw: Any, s: Any) -> Any:
    openai = pytest.importorskip("openai")
    verify: Any = ssl.create_default_context(cafile=gw.ca_file) if gw.ca_file else True
    return openai.OpenAI(
        base_url=s.base_url,
        api_key="sk-test",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(verify=verify, timeout=5.0),
    )


# -- healthy replies ------------------------------------------------------------------------------


def test_stream_is_the_responses_event_sequence(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    got = post(client, s)
    assert got.status == 200 and got.error is None
    assert got.headers["content-type"].startswith("text/event-stream")
    assert got.body == full(REPLY)
    ev = sse(got.body)
    assert [n for n, _ in ev] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 3,
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        *TEXT_EVENTS[2:-1],
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * 4,
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert all(d["type"] == n for n, d in ev)
    assert [d["sequence_number"] for _, d in ev] == list(range(len(ev)))
    deltas = [(n, d["delta"]) for n, d in ev if n.endswith(".delta")]
    assert "".join(x for n, x in deltas if "reasoning" in n) == "think first"
    assert "".join(x for n, x in deltas if "output_text" in n) == "hello wide world"
    args = [x for n, x in deltas if "function_call" in n]
    assert args == ['{"pat', 'h": "', "a.txt", '"}']
    added = [d["item"] for n, d in ev if n == "response.output_item.added"]
    assert [i["type"] for i in added] == ["reasoning", "message", "function_call"]
    assert added[2]["call_id"] == "call_1" and added[2]["name"] == "write"
    done = ev[-1][1]["response"]
    assert done["status"] == "completed" and done["incomplete_details"] is None
    assert [i["type"] for i in done["output"]] == ["reasoning", "message", "function_call"]
    assert done["usage"]["input_tokens"] == 3 and done["usage"]["output_tokens"] == 9
    (e,) = s.journal()["entries"]
    assert e["dialect"] == "openai_responses" and e["kind"] == "chat" and e["step"] == 0
    assert e["path"].endswith("/v1/responses") and e["response"]["events_sent"] == len(ev)


def test_sdk_parses_stream_and_json(gateway_session, gw):
    s = gateway_session(scenario({"reply": REPLY, "times": 3}))
    c = sdk(gw, s)
    with c.responses.stream(**REQ) as stream:
        kinds = [e.type for e in stream]
        r = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert r.status == "completed" and r.output_text == "hello wide world"
    reasoning, msg, call = r.output
    assert reasoning.summary[0].text == "think first"
    assert call.call_id == "call_1" and json.loads(call.arguments) == {"path": "a.txt"}
    assert r.usage.total_tokens == 12
    raw = [e.type for e in c.responses.create(**REQ, stream=True)]
    assert raw == kinds
    j = c.responses.create(**REQ)
    assert j.output_text == r.output_text and j.output[0].summary == reasoning.summary
    assert j.status == "completed" and j.output[2].name == "write"


def test_non_stream_json_response(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    body = json.loads(post(client, s, stream=False).body)
    assert body["object"] == "response" and body["status"] == "completed"
    assert [i["type"] for i in body["output"]] == ["reasoning", "message", "function_call"]
    assert body["output"][1]["content"][0] == {
        "type": "output_text",
        "text": "hello wide world",
        "annotations": [],
    }
    assert body["output"][2]["arguments"] == '{"path": "a.txt"}'
    assert body["usage"]["total_tokens"] == 12


def test_string_input_and_instructions_match(gateway_session, client):
    s = gateway_session(
        scenario(
            {"match": {"contains": "INSTR-MARK"}, "reply": {"text": "a"}},
            {"match": {"contains": "TOOL-OUT"}, "reply": {"text": "b"}},
        )
    )
    a = post(client, s, input="plain", instructions="INSTR-MARK")
    b = post(
        client,
        s,
        input=[{"type": "function_call_output", "call_id": "call_1", "output": "TOOL-OUT"}],
    )
    assert a.status == b.status == 200
    assert [e["step"] for e in s.journal()["entries"]] == [0, 1]


# -- errors outside the stream --------------------------------------------------------------------


def test_http_error_default_and_custom_bodies(gateway_session, client):
    s = gateway_session(
        scenario(
            {"fault": {"http_error": {"status": 429, "headers": {"retry-after": "2"}}}},
            {"fault": {"http_error": {"status": 503, "body": "<html>"}}},
        )
    )
    g = post(client, s)
    assert g.status == 429 and g.headers["retry-after"] == "2"
    err = json.loads(g.body)["error"]
    assert err["type"] == "rate_limit_error" and err["code"] == "429"
    assert post(client, s).body == b"<html>"


def test_sdk_sees_http_error(gateway_session, gw):
    openai = pytest.importorskip("openai")
    s = gateway_session(scenario({"fault": {"http_error": {"status": 500}}}))
    with pytest.raises(openai.InternalServerError) as ei:
        sdk(gw, s).responses.create(**REQ)
    assert ei.value.status_code == 500


def test_bad_body_and_no_step_left(gateway_session, client):
    s = gateway_session(scenario({"reply": TEXT}))
    bad = client.post(s.base_url + "/responses", json={"model": "m", "messages": []})
    assert bad.status_code == 400 and "'input'" in bad.json()["error"]["message"]
    assert post(client, s).status == 200
    g = post(client, s)
    assert g.status == 500 and json.loads(g.body)["error"]["type"] == "harness_error"


def test_reset_before_headers(gateway_session, client):
    s = gateway_session(scenario({"fault": {"reset_before_headers": {}}}))
    got = post(client, s)
    assert got.status is None and got.error is not None
    assert s.journal()["entries"][0]["response"]["end"] == "reset"


# -- faults inside the stream ---------------------------------------------------------------------


def test_cut_after_events_is_the_chat_point(gateway_session, client):
    # 3 chat events = role chunk + 2 text pieces: here up to the second output_text.delta.
    s = gateway_session(scenario({"reply": TEXT, "fault": {"cut": {"after_events": 3}}}))
    got = post(client, s)
    assert got.error is not None and full(TEXT).startswith(got.body)
    assert names(got.body) == TEXT_EVENTS[:6]
    assert "".join(d["delta"] for _, d in sse(got.body)[4:]) == TEXT["text"][:10]
    r = s.journal()["entries"][0]["response"]
    assert r["end"] == "reset" and r["events_sent"] == 6 and r["cut_at_byte"] == len(got.body)


def test_cut_at_byte_close_stream_and_json(gateway_session, client):
    at = full(TEXT).index(b"output_text.delta") + 4
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"cut": {"at_byte": at, "mode": "close"}}},
            {"reply": TEXT, "fault": {"cut": {"at_byte": 30, "mode": "close"}}},
        )
    )
    got = post(client, s)
    assert isinstance(got.error, httpx.RemoteProtocolError) and got.body == full(TEXT)[:at]
    j = post(client, s, stream=False)
    assert j.error is not None and len(j.body) == 30 and int(j.headers["content-length"]) > 30


def test_stall_with_keepalives_then_continues(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"stall": {"after_events": 4, "seconds": 10, "keepalive": 4}}}
        ),
        time_scale=0.005,
    )
    got = post(client, s)
    blocks = [b + b"\n\n" for b in full(TEXT).split(b"\n\n")[:-1]]
    # 4 chat events (role, 3 text pieces) = created, in_progress, 2 added, 3 deltas.
    assert got.body == b"".join(blocks[:7]) + b": keep-alive\n\n" * 2 + b"".join(blocks[7:])
    r = s.journal()["entries"][0]["response"]
    assert r["t_end_ns"] - r["t_headers_ns"] >= 50e6 * 0.9  # 10 s x 0.005


def test_delay_headers_and_slow_dribble_scaled(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"delay_headers": {"seconds": 8}}},
            {"reply": TEXT, "fault": {"slow_dribble": {"interval": 2}}},
        ),
        time_scale=0.005,
    )
    assert post(client, s).body == full(TEXT)
    got = post(client, s)
    assert got.body == full(TEXT)
    e0, e1 = s.journal()["entries"]
    assert e0["response"]["t_headers_ns"] - e0["t_arrival_ns"] >= 40e6 * 0.9
    n = len(sse(got.body))
    assert e1["response"]["t_end_ns"] - e1["response"]["t_headers_ns"] >= (n - 1) * 10e6 * 0.9


@pytest.mark.parametrize(
    "fault",
    [
        {"end_without_finish": {}},
        {"end_without_finish": {"done": True}},
        {"finish_without_done": {}},
    ],
)
def test_missing_terminal_event(gateway_session, client, fault):
    # Responses has one terminal event, both finish marker and end of stream: all three omit it.
    s = gateway_session(scenario({"reply": TEXT, "fault": fault}))
    got = post(client, s)
    assert got.error is None and names(got.body) == TEXT_EVENTS[:-1]
    assert got.body == full(TEXT, terminal=False)


def test_malformed_event_kinds(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"malformed_event": {"after_events": 5}}},
            {
                "reply": TEXT,
                "fault": {"malformed_event": {"after_events": 2, "kind": "missing_data"}},
            },
        )
    )
    a, b = post(client, s), post(client, s)
    blocks = [x + b"\n\n" for x in full(TEXT).split(b"\n\n")[:-1]]
    # After all 4 text deltas (5 chat events), and after the first (2 chat events).
    assert a.body == b"".join(blocks[:8]) + orr.malformed_frame("bad_json") + b"".join(blocks[8:])
    assert sse(a.body)[8][0] == "response.output_text.delta"
    assert isinstance(sse(a.body)[8][1], str)  # the data does not parse
    assert sse(b.body)[5] == (None, None)
    assert b.body.split(b"\n\n")[5] == b'{"type": "response.output_text.delta"}'


def test_in_band_error_is_response_failed(gateway_session, client, gw):
    s = gateway_session(
        scenario(
            {
                "reply": TEXT,
                "fault": {
                    "in_band_error": {
                        "after_events": 5,
                        "error": {"type": "server_error", "message": "boom"},
                    }
                },
            },
            {"reply": TEXT, "fault": {"in_band_error": {"after_events": 2}}},
        )
    )
    got = post(client, s)
    assert got.status == 200 and got.error is None
    ev = sse(got.body)
    assert names(got.body) == [*TEXT_EVENTS[:8], "response.failed"]  # all 4 deltas sent
    failed = ev[-1][1]
    assert failed["sequence_number"] == 8 and failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "boom"}
    kinds = [e.type for e in sdk(gw, s).responses.create(**REQ, stream=True)]
    assert kinds == [*TEXT_EVENTS[:5], "response.failed"]


def test_length_is_response_incomplete(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"length": {"part": "text", "at": 7}}, "times": 2},
            {
                "reply": {"tool_calls": [{"name": "f", "arguments": '{"x": 1}'}]},
                "fault": {"length": {"part": "arguments", "at": 3}},
            },
        )
    )
    ev = sse(post(client, s).body)
    assert ev[-1][0] == "response.incomplete"
    r = ev[-1][1]["response"]
    assert r["status"] == "incomplete"
    assert r["incomplete_details"] == {"reason": "max_output_tokens"}
    assert r["output"][0]["status"] == "incomplete"
    assert r["output"][0]["content"][0]["text"] == "hello w"
    body = json.loads(post(client, s, stream=False).body)
    assert body["status"] == "incomplete" and body["incomplete_details"]["reason"] == (
        "max_output_tokens"
    )
    ev = sse(post(client, s).body)
    assert [d["delta"] for n, d in ev if n == "response.function_call_arguments.delta"] == ['{"x']
    assert ev[-1][0] == "response.incomplete"


def test_empty_reply_kinds(gateway_session, client):
    s = gateway_session(
        scenario(
            {"fault": {"empty_reply": {}}, "times": 2},
            {"fault": {"empty_reply": {"kind": "empty_message"}}, "times": 2},
        )
    )
    ev = sse(post(client, s).body)
    assert [n for n, _ in ev] == ["response.created", "response.in_progress", "response.completed"]
    assert ev[-1][1]["response"]["output"] == []
    assert json.loads(post(client, s, stream=False).body)["output"] == []
    assert names(post(client, s).body) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    out = json.loads(post(client, s, stream=False).body)["output"]
    assert out[0]["content"][0]["text"] == ""


def test_frames_escape_unicode_line_separators():
    # Some SSE line splitters (str.splitlines) end lines at these; JSON may escape them.
    raw = full({"text": "a\u2028b\u2029c\x85d", "reasoning": "\u2028"})
    assert not any(ch.encode() in raw for ch in "\u2028\u2029\x85")
    assert all(json.loads(ln[6:]) for ln in raw.decode().split("\n") if ln.startswith("data: "))


# -- properties -----------------------------------------------------------------------------------

replies = reply_strategy(40)


@given(reply=replies, at=st.integers(0, 6000), stream=st.booleans())
@settings(max_examples=100, deadline=None)
def test_cut_at_byte_sends_exact_prefix(reply, at, stream):
    step = Scenario.from_dict(scenario({"reply": reply, "fault": {"cut": {"at_byte": at}}}))
    plan = make_plan(step.script[0], {"model": "m", "stream": stream}, "openai_responses")
    if stream:
        whole = full(reply)
    else:
        whole = json.dumps(orr.json_body(reply, "m"), ensure_ascii=False).encode()
    assert plan.full_bytes == len(whole)
    assert b"".join(c.data for c in plan.chunks) == whole[:at]


@given(reply=replies, n=st.integers(0, 80))
@settings(max_examples=60, deadline=None)
def test_cut_after_events_sends_whole_events(reply, n):
    step = Scenario.from_dict(scenario({"reply": reply, "fault": {"cut": {"after_events": n}}}))
    plan = make_plan(step.script[0], {"model": "m", "stream": True}, "openai_responses")
    frames = [orr.frame(*e) for e in orr.stream_events(reply, "m")]
    assert [c.data for c in plan.chunks] == frames[: len(plan.chunks)]
    assert plan.cut_at_byte == sum(len(c.data) for c in plan.chunks)


@given(reply=replies)
@example(reply={"text": "a\u2028b\x85c\r\nd\n\ndata: x", "reasoning": "é😀", "chunk_chars": 1})
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_sdk_reads_any_content_back(fake_gateway, reply):
    s = fake_gateway.create_session(scenario({"reply": reply}), time_scale=0.001)
    c = sdk(fake_gateway, s)
    try:
        with c.responses.stream(**REQ) as stream:
            r = stream.get_final_response()
    finally:
        c.close()
        fake_gateway.drop_session(s.id)
    assert r.output_text == reply["text"]
    summaries = [x.summary[0].text for x in r.output if x.type == "reasoning"]
    assert summaries == ([reply["reasoning"]] if reply["reasoning"] else [])
    calls = [(x.name, x.arguments) for x in r.output if x.type == "function_call"]
    assert calls == [(t["name"], t["arguments"]) for t in reply.get("tool_calls", [])]


# -- dialect-neutral fault positions --------------------------------------------------------------


def _same_point(reply: dict[str, Any], fault: str, n: int) -> None:
    """The fault strikes where the chat rendering's does: same content, nothing more."""
    mine = before_fault(reply, fault, n, "openai_responses")
    chat = before_fault(reply, fault, n, "openai_chat")
    theirs = content(chat, "openai_chat", like="openai_responses")
    assert content(mine, "openai_responses") == theirs, (fault, n)
    if mine and n < len(whole_frames(reply, "openai_chat")):
        # Right after the event completing that content: one event less delivers less.
        assert content(mine[:-1], "openai_responses") != theirs, (fault, n)


@pytest.mark.parametrize("fault", list(AFTER_EVENTS_FAULTS))
def test_after_events_strikes_at_the_chat_point(fault):
    whole = whole_frames(REPLY, "openai_chat")
    for n in range(len(whole) + 2):
        _same_point(REPLY, fault, n)


def test_after_events_positions_by_example():
    frames = whole_frames(REPLY, "openai_responses")
    # Role chunk only: response.created, not yet in_progress.
    assert before_fault(REPLY, "stall", 1, "openai_responses") == frames[:1]
    # Role + 3 reasoning pieces + 1 text piece: the message item is open, one delta in.
    got = before_fault(REPLY, "malformed_event", 5, "openai_responses")
    assert names(b"".join(got))[-3:] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    # Everything but [DONE] in chat: the terminal event is both markers here, so all of it.
    n = len(whole_frames(REPLY, "openai_chat")) - 1
    assert before_fault(REPLY, "cut", n, "openai_responses") == frames


@given(reply=replies, n=st.integers(0, 40), fault=st.sampled_from(list(AFTER_EVENTS_FAULTS)))
@settings(max_examples=150, deadline=None)
def test_after_events_strikes_at_the_chat_point_any_reply(reply, n, fault):
    _same_point(reply, fault, n)
