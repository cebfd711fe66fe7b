"""The Anthropic Messages dialect: every fault primitive over HTTP(S), event by event.

Healthy streams are also parsed by the official ``anthropic`` SDK (when installed) so that the
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

from fakes.dialects import anthropic_messages as am
from fakes.plan import make_plan
from fakes.scenario import Scenario

REPLY = {
    "reasoning": "think first",
    "text": "hello wide world",
    "tool_calls": [{"id": "toolu_1", "name": "write", "arguments": '{"path": "a.txt"}'}],
    "finish_reason": "tool_calls",
    "chunk_chars": 5,
    "usage": {"prompt_tokens": 3, "completion_tokens": 9},
}
TEXT = {"text": "hello wide world", "chunk_chars": 5}
REQ = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def post(client: httpx.Client, s: Any, stream: bool = True, path: str = "/messages", **kw: Any):
    body = {**REQ, "stream": stream, **kw}
    buf = bytearray()
    try:
        with client.stream("POST", s.base_url + path, json=body) as r:
            try:
                for chunk in r.iter_raw():
                    buf += chunk
            except httpx.HTTPError as e:
                return Got(r.status_code, dict(r.headers), bytes(buf), e)
            return Got(r.status_code, dict(r.headers), bytes(buf), None)
    except httpx.HTTPError as e:
        return Got(None, {}, b"", e)


def full(reply: dict[str, Any], terminal: bool = True, **kw: Any) -> bytes:
    return b"".join(am.frame(*e) for e in am.stream_events(reply, "m", terminal=terminal, **kw))


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
    anthropic = pytest.importorskip("anthropic")
    verify: Any = ssl.create_default_context(cafile=gw.ca_file) if gw.ca_file else True
    return anthropic.Anthropic(
        base_url=s.base_url.removesuffix("/v1"),
        api_key="sk-test",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(verify=verify, timeout=5.0),
    )


# -- healthy replies ------------------------------------------------------------------------------


def test_stream_is_the_anthropic_event_sequence(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    got = post(client, s)
    assert got.status == 200 and got.error is None
    assert got.headers["content-type"].startswith("text/event-stream")
    assert got.body == full(REPLY)
    ev = sse(got.body)
    assert [n for n, _ in ev] == [
        "message_start",
        "ping",
        *["content_block_start"] + ["content_block_delta"] * 4 + ["content_block_stop"],
        *["content_block_start"] + ["content_block_delta"] * 4 + ["content_block_stop"],
        *["content_block_start"] + ["content_block_delta"] * 4 + ["content_block_stop"],
        "message_delta",
        "message_stop",
    ]
    assert all(d["type"] == n for n, d in ev)  # the data type repeats the event name
    blocks = [d["content_block"] for n, d in ev if n == "content_block_start"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    assert blocks[2]["id"] == "toolu_1" and blocks[2]["name"] == "write"
    deltas = [d["delta"] for n, d in ev if n == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "think first"
    assert deltas[3] == {"type": "signature_delta", "signature": am.signature("think first")}
    assert "".join(d.get("text", "") for d in deltas) == "hello wide world"
    parts = [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]
    assert parts == ['{"pat', 'h": "', "a.txt", '"}'] and len(parts) > 1
    md = ev[-2][1]
    assert md["delta"]["stop_reason"] == "tool_use" and md["usage"] == {"output_tokens": 9}
    assert ev[0][1]["message"]["usage"]["input_tokens"] == 3
    (e,) = s.journal()["entries"]
    assert e["dialect"] == "anthropic_messages" and e["kind"] == "chat" and e["step"] == 0
    assert e["path"].endswith("/v1/messages") and e["response"]["sent"].encode() == got.body
    assert e["response"]["events_sent"] == len(ev)


def test_sdk_parses_stream_and_json(gateway_session, gw):
    s = gateway_session(scenario({"reply": REPLY, "times": 2}))
    c = sdk(gw, s)
    with c.messages.stream(**REQ) as stream:
        kinds = [e.type for e in stream]
        m = stream.get_final_message()
    assert "content_block_delta" in kinds and kinds[-1] == "message_stop"
    assert [b.type for b in m.content] == ["thinking", "text", "tool_use"]
    assert m.content[0].thinking == "think first" and m.content[0].signature
    assert m.content[1].text == "hello wide world"
    assert m.content[2].input == {"path": "a.txt"} and m.content[2].id == "toolu_1"
    assert m.stop_reason == "tool_use" and m.usage.output_tokens == 9
    j = c.messages.create(**REQ)
    assert j.model_dump()["content"] == m.model_dump()["content"]
    assert j.stop_reason == "tool_use" and j.usage.input_tokens == 3


def test_non_stream_json_message(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    got = post(client, s, stream=False)
    body = json.loads(got.body)
    assert body["type"] == "message" and body["role"] == "assistant" and body["model"] == "m"
    assert [b["type"] for b in body["content"]] == ["thinking", "text", "tool_use"]
    assert body["content"][2]["input"] == {"path": "a.txt"}
    assert body["stop_reason"] == "tool_use"
    assert body["usage"] == {"input_tokens": 3, "output_tokens": 9}
    assert s.journal()["entries"][0]["response"]["stream"] is False


def test_beta_query_and_system_prompt_match(gateway_session, client):
    s = gateway_session(
        scenario({"match": {"contains": "SYSTEM-MARK"}, "reply": {"text": "sys"}}),
    )
    got = post(
        client, s, path="/messages?beta=true", system=[{"type": "text", "text": "SYSTEM-MARK"}]
    )
    assert got.status == 200 and sse(got.body)[3][1]["delta"]["text"] == "sys"
    assert s.journal()["entries"][0]["step"] == 0


def test_stop_reason_for_each_finish(gateway_session, client):
    finishes = ["stop", "tool_calls", "length", "content_filter"]
    s = gateway_session(scenario(*({"reply": {"text": "x", "finish_reason": f}} for f in finishes)))
    got = [sse(post(client, s).body)[-2][1]["delta"]["stop_reason"] for _ in finishes]
    assert got == ["end_turn", "tool_use", "max_tokens", "refusal"]


def test_count_tokens_takes_no_step(gateway_session, client):
    s = gateway_session(scenario({"reply": TEXT}))
    got = post(client, s, path="/messages/count_tokens")
    assert got.status == 200 and json.loads(got.body)["input_tokens"] >= 1
    assert post(client, s).status == 200
    e0, e1 = s.journal()["entries"]
    assert e0["kind"] == "count_tokens" and e0["step"] is None and e1["step"] == 0


# -- errors outside the stream --------------------------------------------------------------------


def test_http_error_default_bodies_529_overloaded(gateway_session, client):
    s = gateway_session(
        scenario(
            {"fault": {"http_error": {"status": 529, "headers": {"retry-after": "1"}}}},
            {"fault": {"http_error": {"status": 429}}},
            {"fault": {"http_error": {"status": 500}}},
            {"fault": {"http_error": {"status": 503, "body": "<html>"}}},
        )
    )
    g = post(client, s)
    assert g.status == 529 and g.headers["retry-after"] == "1"
    assert json.loads(g.body) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert json.loads(post(client, s).body)["error"]["type"] == "rate_limit_error"
    assert json.loads(post(client, s).body)["error"]["type"] == "api_error"
    assert post(client, s).body == b"<html>"


def test_sdk_sees_overloaded_error(gateway_session, gw):
    anthropic = pytest.importorskip("anthropic")
    s = gateway_session(scenario({"fault": {"http_error": {"status": 529}}}))
    with pytest.raises(anthropic.APIStatusError) as ei:
        sdk(gw, s).messages.create(**REQ)
    assert ei.value.status_code == 529 and ei.value.body["error"]["type"] == "overloaded_error"


def test_bad_body_and_no_step_left_are_anthropic_errors(gateway_session, client):
    s = gateway_session(scenario({"reply": TEXT}))
    bad = client.post(s.base_url + "/messages", json={"model": "m"})
    assert bad.status_code == 400
    assert bad.json()["type"] == "error" and "'messages'" in bad.json()["error"]["message"]
    assert post(client, s).status == 200
    g = post(client, s)
    err = json.loads(g.body)
    assert g.status == 500 and err["type"] == "error" and err["error"]["type"] == "harness_error"
    j = s.journal()["entries"]
    assert j[0]["body_error"] and j[2]["harness_error"] and j[2]["dialect"] == "anthropic_messages"


def test_one_session_serves_every_dialect(gateway_session, client, gw):
    s = gateway_session(scenario({"reply": TEXT, "times": 3}))
    chat = client.post(s.base_url + "/chat/completions", json={**REQ, "stream": True})
    assert b"chat.completion.chunk" in chat.content
    assert names(post(client, s).body)[0] == "message_start"
    rsp = client.post(s.base_url + "/responses", json={"model": "m", "input": "hi"})
    assert rsp.json()["object"] == "response"
    client.get(s.base_url + "/models")
    j = s.journal()["entries"]
    assert [e["dialect"] for e in j] == [
        "openai_chat",
        "anthropic_messages",
        "openai_responses",
        None,
    ]
    assert [e["step"] for e in j[:3]] == [0, 0, 0]
    gone = client.post(gw.base_url + "/s/no-such-session/v1/messages", json=REQ)
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "invalid_request_error"
    assert gone.json()["type"] == "error"


def test_reset_before_headers(gateway_session, client):
    s = gateway_session(scenario({"fault": {"reset_before_headers": {}}}))
    got = post(client, s)
    assert got.status is None and got.error is not None
    assert s.journal()["entries"][0]["response"]["end"] == "reset"


# -- faults inside the stream ---------------------------------------------------------------------


def test_cut_after_events_is_the_chat_point(gateway_session, client, gw):
    # 4 chat events = role chunk + the 3 reasoning pieces: here the thinking block's 3 deltas,
    # without its signature or stop.
    s = gateway_session(scenario({"reply": REPLY, "fault": {"cut": {"after_events": 4}}}))
    got = post(client, s)
    assert got.error is not None
    assert full(REPLY).startswith(got.body)
    assert names(got.body) == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * 3,
    ]
    assert "".join(d["delta"]["thinking"] for _, d in sse(got.body)[3:]) == REPLY["reasoning"]
    r = s.journal()["entries"][0]["response"]
    assert r["end"] == "reset" and r["events_sent"] == 6 and r["cut_at_byte"] == len(got.body)


def test_cut_at_byte_close_stream_and_json(gateway_session, client):
    at = full(REPLY).index(b"content_block_delta") + 3
    s = gateway_session(
        scenario(
            {"reply": REPLY, "fault": {"cut": {"at_byte": at, "mode": "close"}}},
            {"reply": REPLY, "fault": {"cut": {"at_byte": 20, "mode": "close"}}},
        )
    )
    got = post(client, s)
    assert isinstance(got.error, httpx.RemoteProtocolError) and got.body == full(REPLY)[:at]
    j = post(client, s, stream=False)
    assert j.error is not None and len(j.body) == 20 and int(j.headers["content-length"]) > 20
    assert [e["response"]["end"] for e in s.journal()["entries"]] == ["close", "close"]


def test_stall_with_keepalives_then_continues(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"stall": {"after_events": 2, "seconds": 10, "keepalive": 3}}}
        ),
        time_scale=0.005,
    )
    got = post(client, s)
    blocks = [b + b"\n\n" for b in full(TEXT).split(b"\n\n")[:-1]]
    # 2 chat events (role, first text piece) = message_start, ping, the text block's start
    # and first delta.
    assert got.body == b"".join(blocks[:4]) + b": keep-alive\n\n" * 3 + b"".join(blocks[4:])
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


def test_end_without_finish_omits_message_delta_and_stop(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"end_without_finish": {}}},
            {"reply": TEXT, "fault": {"end_without_finish": {"done": True}}},
            {"reply": REPLY, "fault": {"end_without_finish": {}}},
        )
    )
    a, b, c = (post(client, s) for _ in range(3))
    assert a.error is None and names(a.body)[-1] == "content_block_stop"
    assert "message_delta" not in names(a.body) and "message_stop" not in names(a.body)
    assert names(b.body)[-2:] == ["content_block_stop", "message_stop"]
    # With usage scripted, a message_delta still carries it, but never a stop_reason.
    md = [d for n, d in sse(c.body) if n == "message_delta"]
    assert md[0]["delta"]["stop_reason"] is None and names(c.body)[-1] == "message_delta"


def test_finish_without_done_omits_message_stop(gateway_session, client):
    s = gateway_session(scenario({"reply": TEXT, "fault": {"finish_without_done": {}}}))
    got = post(client, s)
    assert got.body == full(TEXT, terminal=False)
    assert names(got.body)[-1] == "message_delta"
    assert sse(got.body)[-1][1]["delta"]["stop_reason"] == "end_turn"


def test_malformed_event_kinds(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"malformed_event": {"after_events": 3}}},
            {
                "reply": TEXT,
                "fault": {"malformed_event": {"after_events": 2, "kind": "missing_data"}},
            },
        )
    )
    a, b = post(client, s), post(client, s)
    blocks = [x + b"\n\n" for x in full(TEXT).split(b"\n\n")[:-1]]
    bad = am.malformed_frame("bad_json")
    assert a.body == b"".join(blocks[:5]) + bad + b"".join(blocks[5:])  # after 2 text deltas
    assert sse(a.body)[5] == ("content_block_delta", '{"type": "content_block_delta", "delta": ')
    ev_b = sse(b.body)
    assert ev_b[4] == (None, None) and b"data:" not in b.body.split(b"\n\n")[4]
    ra, rb = (e["response"] for e in s.journal()["entries"])
    assert ra["events_sent"] == len(blocks) and rb["events_sent"] == len(blocks)


def test_in_band_error_event_ends_the_stream(gateway_session, client, gw):
    s = gateway_session(
        scenario(
            {
                "reply": TEXT,
                "fault": {
                    "in_band_error": {
                        "after_events": 3,
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    }
                },
            },
            {"reply": TEXT, "fault": {"in_band_error": {}}},
        )
    )
    got = post(client, s)
    assert got.status == 200 and got.error is None
    ev = sse(got.body)
    assert names(got.body) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "error",
    ]
    assert ev[5][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    anthropic = pytest.importorskip("anthropic")
    with (
        pytest.raises(anthropic.APIStatusError, match="simulated in-band error"),
        sdk(gw, s).messages.stream(**REQ) as stream,
    ):
        list(stream)


def test_length_is_max_tokens(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": TEXT, "fault": {"length": {"part": "text", "at": 7}}, "times": 2},
            {
                "reply": {"tool_calls": [{"name": "f", "arguments": '{"x": 1}'}]},
                "fault": {"length": {"part": "arguments", "at": 3}},
                "times": 2,
            },
        )
    )
    ev = sse(post(client, s).body)
    assert "".join(d["delta"].get("text", "") for n, d in ev if n == "content_block_delta") == (
        "hello w"
    )
    assert ev[-2][1]["delta"]["stop_reason"] == "max_tokens" and ev[-1][0] == "message_stop"
    body = json.loads(post(client, s, stream=False).body)
    assert body["content"] == [{"type": "text", "text": "hello w"}]
    assert body["stop_reason"] == "max_tokens"
    ev = sse(post(client, s).body)
    assert [d["delta"]["partial_json"] for n, d in ev if n == "content_block_delta"] == ['{"x']
    body = json.loads(post(client, s, stream=False).body)
    # A JSON body cannot carry a partial object: the cut input is {}.
    assert body["content"][0]["input"] == {} and body["stop_reason"] == "max_tokens"


def test_empty_reply_kinds(gateway_session, client):
    s = gateway_session(
        scenario(
            {"fault": {"empty_reply": {}}, "times": 2},
            {"fault": {"empty_reply": {"kind": "empty_message"}}, "times": 2},
        )
    )
    assert names(post(client, s).body) == ["message_start", "ping", "message_delta", "message_stop"]
    assert json.loads(post(client, s, stream=False).body)["content"] == []
    assert names(post(client, s).body) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert json.loads(post(client, s, stream=False).body)["content"] == [
        {"type": "text", "text": ""}
    ]


def test_stream_only_faults_ignored_without_stream(gateway_session, client):
    s = gateway_session(scenario({"reply": TEXT, "fault": {"in_band_error": {}}}))
    body = json.loads(post(client, s, stream=False).body)
    assert body["content"] == [{"type": "text", "text": "hello wide world"}]
    assert s.journal()["entries"][0]["fault"] is None


def test_frames_escape_unicode_line_separators():
    # Some SSE line splitters (str.splitlines) end lines at these; JSON may escape them.
    raw = full({"text": "a\u2028b\u2029c\x85d", "reasoning": "\u2028"})
    assert not any(ch.encode() in raw for ch in "\u2028\u2029\x85")
    assert all(json.loads(ln[6:]) for ln in raw.decode().split("\n") if ln.startswith("data: "))


# -- properties -----------------------------------------------------------------------------------

replies = reply_strategy(40)


@given(reply=replies, at=st.integers(0, 4000), stream=st.booleans())
@settings(max_examples=100, deadline=None)
def test_cut_at_byte_sends_exact_prefix(reply, at, stream):
    step = Scenario.from_dict(scenario({"reply": reply, "fault": {"cut": {"at_byte": at}}}))
    plan = make_plan(step.script[0], {"model": "m", "stream": stream}, "anthropic_messages")
    if stream:
        whole = full(reply)
    else:
        whole = json.dumps(am.json_body(reply, "m"), ensure_ascii=False).encode()
    assert plan.full_bytes == len(whole)
    assert b"".join(c.data for c in plan.chunks) == whole[:at]


@given(reply=replies, n=st.integers(0, 60))
@settings(max_examples=60, deadline=None)
def test_cut_after_events_sends_whole_events(reply, n):
    step = Scenario.from_dict(scenario({"reply": reply, "fault": {"cut": {"after_events": n}}}))
    plan = make_plan(step.script[0], {"model": "m", "stream": True}, "anthropic_messages")
    frames = [am.frame(*e) for e in am.stream_events(reply, "m")]
    assert [c.data for c in plan.chunks] == frames[: len(plan.chunks)]
    assert plan.cut_at_byte == sum(len(c.data) for c in plan.chunks)


sdk_replies = reply_strategy(40, json_arguments=True)


@given(reply=sdk_replies)
@example(reply={"text": "a\u2028b\x85c\r\nd\n\ndata: x", "reasoning": "é😀", "chunk_chars": 1})
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_sdk_reads_any_content_back(fake_gateway, reply):
    s = fake_gateway.create_session(scenario({"reply": reply}), time_scale=0.001)
    c = sdk(fake_gateway, s)
    try:
        with c.messages.stream(**REQ) as stream:
            m = stream.get_final_message()
    finally:
        c.close()
        fake_gateway.drop_session(s.id)
    blocks = {b.type: b for b in m.content}
    assert (blocks["thinking"].thinking if "thinking" in blocks else "") == reply["reasoning"]
    assert (blocks["text"].text if "text" in blocks else "") == reply["text"]
    calls = [b for b in m.content if b.type == "tool_use"]
    assert [b.input for b in calls] == [
        json.loads(t["arguments"]) for t in reply.get("tool_calls", [])
    ]


# -- dialect-neutral fault positions --------------------------------------------------------------


def _same_point(reply: dict[str, Any], fault: str, n: int, dialect: str) -> None:
    """The fault strikes where the chat rendering's does: same content, nothing more."""
    mine = before_fault(reply, fault, n, dialect)
    chat = before_fault(reply, fault, n, "openai_chat")
    assert content(mine, dialect) == content(chat, "openai_chat", like=dialect), (fault, n)
    if mine and n < len(whole_frames(reply, "openai_chat")):
        # Right after the event completing that content: one event less delivers less.
        assert content(mine[:-1], dialect) != content(mine, dialect), (fault, n)


@pytest.mark.parametrize("fault", list(AFTER_EVENTS_FAULTS))
def test_after_events_strikes_at_the_chat_point(fault):
    whole = whole_frames(REPLY, "openai_chat")
    for n in range(len(whole) + 2):
        _same_point(REPLY, fault, n, "anthropic_messages")


def test_after_events_positions_by_example():
    # 3 chat events = role chunk + 2 reasoning pieces: the thinking block is open, 2 deltas in.
    got = before_fault(REPLY, "cut", 3, "anthropic_messages")
    assert [am.frame(*e) for e in am.stream_events(REPLY, "m")][:5] == got
    assert before_fault(REPLY, "cut", 1, "anthropic_messages") == got[:1]  # message_start
    assert before_fault(REPLY, "cut", 0, "anthropic_messages") == []


@given(reply=replies, n=st.integers(0, 40), fault=st.sampled_from(list(AFTER_EVENTS_FAULTS)))
@settings(max_examples=150, deadline=None)
def test_after_events_strikes_at_the_chat_point_any_reply(reply, n, fault):
    _same_point(reply, fault, n, "anthropic_messages")
