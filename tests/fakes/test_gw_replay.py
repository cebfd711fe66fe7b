"""The ``replay`` step: recorded bytes carried out exactly, and byte faults applied to them."""

from __future__ import annotations

import httpx
import pytest
from gw_wire import post, scenario

from fakes import ScenarioError
from fakes.scenario import Scenario

# Odd framing on purpose: CRLF lines, a comment, no space after "data:", an event split over
# two writes, no [DONE]. A renderer would never produce it; a replay must keep it exactly.
CHUNKS = [
    ": hello\r\n\r\n",
    'data:{"choices":[{"index":0,"delta":{"content":"Hi"}}]}\r\n\r\n',
    'data:{"choices":[{"index":0,"delta":{},',
    '"finish_reason":"stop"}]}\r\n\r\n',
    'data: {"error": {"message": "upstream died"}}\n\n',
]
BODY = "".join(CHUNKS).encode()


def replay(**extra):
    return {
        "status": 200,
        "headers": {"Content-Type": "text/event-stream"},
        "chunks": CHUNKS,
        **extra,
    }


def test_replay_sends_recorded_bytes_status_and_headers(gateway_session, client):
    rp = replay(headers={"Content-Type": "text/event-stream", "X-Upstream": "yes"})
    s = gateway_session(scenario({"replay": rp}))
    got = post(client, s.base_url)
    assert got.error is None and got.status == 200
    assert got.body == BODY
    assert got.headers["x-upstream"] == "yes"
    (e,) = s.journal()["entries"]
    assert e["response"]["sent"].encode() == BODY and e["response"]["end"] == "complete"


def test_replay_non_stream_error_body_with_retry_after(gateway_session, client):
    body = '{"error": {"message": "slow down", "type": "rate_limit"}}'
    rp = {"status": 429, "headers": {"Retry-After": "7"}, "chunks": [body]}
    s = gateway_session(scenario({"replay": rp}))
    got = post(client, s.base_url, stream=False)
    assert got.status == 429 and got.headers["retry-after"] == "7"
    assert got.body == body.encode() and got.headers["content-length"] == str(len(body))


def test_replay_end_close_gives_an_incomplete_body(gateway_session, client):
    s = gateway_session(scenario({"replay": replay(end="close")}))
    got = post(client, s.base_url)
    assert got.body == BODY
    assert isinstance(got.error, httpx.RemoteProtocolError)


def test_cut_at_byte_applies_to_a_replay(gateway_session, client):
    s = gateway_session(scenario({"replay": replay(), "fault": {"cut": {"at_byte": 30}}}))
    got = post(client, s.base_url)
    assert got.body == BODY[:30] and got.error is not None
    (e,) = s.journal()["entries"]
    assert e["fault"] == "cut" and e["response"]["cut_at_byte"] == 30


def test_cut_after_events_counts_chunks_with_data(gateway_session, client):
    # Chunk 0 is a comment, so two events end after chunk 2 (the first half of the finish).
    s = gateway_session(scenario({"replay": replay(), "fault": {"cut": {"after_events": 2}}}))
    got = post(client, s.base_url)
    assert got.body == "".join(CHUNKS[:3]).encode()


def test_in_band_error_replaces_the_rest_of_a_replay(gateway_session, client):
    s = gateway_session(
        scenario({"replay": replay(), "fault": {"in_band_error": {"after_events": 1}}})
    )
    got = post(client, s.base_url)
    assert got.body.startswith("".join(CHUNKS[:2]).encode())
    assert got.body.endswith(b'"type": "server_error"}}\n\n') and b"upstream died" not in got.body


def test_http_error_fault_replaces_a_replay(gateway_session, client):
    s = gateway_session(scenario({"replay": replay(), "fault": {"http_error": {"status": 503}}}))
    got = post(client, s.base_url)
    assert got.status == 503 and b"simulated error 503" in got.body


def test_stall_delays_the_chunk_after_n_events(gateway_session, client):
    s = gateway_session(
        scenario({"replay": replay(), "fault": {"stall": {"after_events": 1, "seconds": 5}}}),
        time_scale=0.01,
    )
    got = post(client, s.base_url)
    assert got.body == BODY
    (e,) = s.journal()["entries"]
    r = e["response"]
    assert e["fault"] == "stall" and r["t_end_ns"] - r["t_headers_ns"] >= 45_000_000


@pytest.mark.parametrize(
    "fault", [{"length": {"part": "text", "at": 1}}, {"end_without_finish": {}}]
)
def test_faults_that_rewrite_a_reply_are_refused_on_replay(fault):
    with pytest.raises(ScenarioError, match="cannot apply to a replay step"):
        Scenario.from_dict(scenario({"replay": replay(), "fault": fault}))


def test_reply_and_replay_together_are_refused():
    with pytest.raises(ScenarioError):
        Scenario.from_dict(scenario({"replay": replay(), "reply": {"text": "x"}}))


def test_replay_chunks_must_be_strings():
    with pytest.raises(ScenarioError, match="chunks"):
        Scenario.from_dict(scenario({"replay": {"chunks": [1]}}))


# -- a recording is in one dialect -----------------------------------------------------------------

MSG_REQ = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
RESP_REQ = {"model": "m", "input": "hi"}
ANTHROPIC_CHUNKS = [
    'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_r"}}\n\n',
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    '"delta": {"type": "text_delta", "text": "Hi"}}\n\n',
    'event: message_stop\ndata: {"type": "message_stop"}\n\n',
]


@pytest.mark.parametrize(
    ("path", "req", "recorded"),
    [
        ("/messages", MSG_REQ, None),
        ("/responses", RESP_REQ, "openai_chat"),
        (
            "/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "x"}]},
            "anthropic_messages",
        ),
    ],
)
def test_replay_of_another_dialect_is_a_harness_error(gateway_session, client, path, req, recorded):
    rp = replay() if recorded is None else replay(dialect=recorded)
    s = gateway_session(scenario({"replay": rp}))
    r = client.post(s.base_url + path, json={**req, "stream": True})
    assert r.status_code == 500 and b"upstream died" not in r.content and b"Hi" not in r.content
    (e,) = s.journal()["entries"]
    want = recorded or "openai_chat"
    assert f"dialect {want!r}" in e["harness_error"] and "step 0" in e["harness_error"]
    assert e["dialect"] in e["harness_error"] and e["response"]["status"] == 500
    if path == "/messages":
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == "harness_error"
    else:
        assert r.json()["error"]["type"] == "harness_error"


def test_replay_in_its_own_dialect_is_sent_byte_for_byte(gateway_session, client):
    rp = replay(dialect="anthropic_messages", chunks=ANTHROPIC_CHUNKS)
    s = gateway_session(scenario({"replay": rp}))
    r = client.post(s.base_url + "/messages", json={**MSG_REQ, "stream": True})
    assert r.status_code == 200 and r.content == "".join(ANTHROPIC_CHUNKS).encode()
    (e,) = s.journal()["entries"]
    assert e["harness_error"] is None and e["dialect"] == "anthropic_messages"


def test_in_band_error_on_a_replay_speaks_its_dialect(gateway_session, client):
    rp = replay(dialect="anthropic_messages", chunks=ANTHROPIC_CHUNKS)
    fault = {"in_band_error": {"after_events": 2, "error": {"type": "api_error", "message": "x"}}}
    s = gateway_session(scenario({"replay": rp, "fault": fault}))
    r = client.post(s.base_url + "/messages", json={**MSG_REQ, "stream": True})
    assert r.content == "".join(ANTHROPIC_CHUNKS[:2]).encode() + (
        b'event: error\ndata: {"type": "error", "error": {"type": "api_error", "message": "x"}}\n\n'
    )


def test_http_error_on_a_replay_is_rendered_in_the_request_dialect(gateway_session, client):
    # The fault replaces the recording, so any dialect can be answered: in its own shape.
    s = gateway_session(scenario({"replay": replay(), "fault": {"http_error": {"status": 529}}}))
    r = client.post(s.base_url + "/messages", json={**MSG_REQ, "stream": True})
    assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"
    assert s.journal()["entries"][0]["harness_error"] is None


def test_replay_dialect_must_be_known():
    with pytest.raises(ScenarioError, match="dialect"):
        Scenario.from_dict(scenario({"replay": replay(dialect="gemini")}))


def test_a_replayed_stall_sends_keepalives_on_a_stream_only():
    # A rendered stall fills its pause with keep-alive comments; a replayed one did not (the
    # two applications had drifted apart until the fault became one class).
    from fakes.plan import make_plan
    from fakes.scenario import Step

    stall = {"stall": {"after_events": 1, "seconds": 10, "keepalive": 3}}
    step = Step(index=0, reply=None, replay=replay(), fault=stall)
    streamed = make_plan(step, {"stream": True})
    kinds = [c.data == b": keep-alive\n\n" for c in streamed.chunks]
    assert kinds == [False, False, True, True, True, False, False, False]
    assert [c.delay for c in streamed.chunks] == [0.0, 0.0, 3.0, 3.0, 3.0, 1.0, 0.0, 0.0]
    assert b"".join(c.data for c, k in zip(streamed.chunks, kinds, strict=True) if not k) == BODY
    assert streamed.chunks[5].event

    whole = make_plan(step, {"stream": False})
    assert b"".join(c.data for c in whole.chunks) == BODY
    assert sum(c.delay for c in whole.chunks) == pytest.approx(10.0)
