"""Every fault primitive driven through a real HTTP client; assertions on the wire bytes."""

from __future__ import annotations

import email.utils
import json
import time

import httpx
import pytest
from gw_wire import events, full_stream, last_json, post, post_raw, scenario

from fakes.faults import FAULTS
from fakes.plan import make_plan
from fakes.pytest_plugin import sessions_on
from fakes.scenario import Scenario

REPLY = {"text": "hello wide world", "chunk_chars": 5, "usage": {"prompt_tokens": 3}}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_plain_stream_is_full_rendering_and_journaled(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY}))
    got = post(client, s.base_url)
    assert got.status == 200 and got.error is None
    assert got.headers["transfer-encoding"] == "chunked"
    assert got.body == full_stream(REPLY)
    ev = last_json(got.body)
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in ev) == REPLY["text"]
    assert ev[-1]["choices"][0]["finish_reason"] == "stop" and ev[-1]["usage"] == REPLY["usage"]
    j = s.journal()
    (e,) = j["entries"]
    assert e["step"] == 0 and e["kind"] == "chat" and e["response"]["end"] == "complete"
    assert e["response"]["sent"].encode() == got.body
    assert e["response"]["sent_bytes"] == e["response"]["full_bytes"] == len(got.body)


def test_non_stream_json(gateway_session, client):
    s = gateway_session(
        scenario(
            {
                "reply": {
                    "text": "hi",
                    "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}],
                    "finish_reason": "tool_calls",
                }
            }
        )
    )
    got = post(client, s.base_url, stream=False)
    body = json.loads(got.body)
    msg = body["choices"][0]["message"]
    assert msg["content"] == "hi" and msg["tool_calls"][0]["function"]["name"] == "f"
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_tool_call_deltas_head_then_argument_pieces(gateway_session, client):
    reply = {
        "tool_calls": [{"id": "c1", "name": "w", "arguments": '{"a": 12345}'}],
        "finish_reason": "tool_calls",
        "chunk_chars": 4,
    }
    s = gateway_session(scenario({"reply": reply}))
    ev = last_json(post(client, s.base_url).body)
    tc = [
        e["choices"][0]["delta"]["tool_calls"][0]
        for e in ev
        if e["choices"] and "tool_calls" in e["choices"][0]["delta"]
    ]
    assert tc[0]["id"] == "c1" and tc[0]["function"]["name"] == "w"
    assert [t["function"]["arguments"] for t in tc[1:]] == ['{"a"', ": 12", "345}"]


def test_http_error_headers_and_default_body(gateway_session, client):
    s = gateway_session(
        scenario(
            {
                "fault": {
                    "http_error": {
                        "status": 429,
                        "headers": {
                            "Retry-After": "2",
                            "retry-after-ms": 150,
                            "x-should-retry": "true",
                        },
                    }
                }
            }
        )
    )
    got = post(client, s.base_url)
    assert got.status == 429
    assert got.headers["retry-after"] == "2" and got.headers["retry-after-ms"] == "150"
    assert got.headers["x-should-retry"] == "true"
    err = json.loads(got.body)["error"]
    assert set(err) == {"message", "type", "code"}


def test_http_error_custom_string_body(gateway_session, client):
    s = gateway_session(scenario({"fault": {"http_error": {"status": 503, "body": "<html>"}}}))
    got = post(client, s.base_url)
    assert got.status == 503 and got.body == b"<html>"


def test_retry_after_date_is_http_date_n_seconds_ahead(gateway_session, client):
    s = gateway_session(
        scenario({"fault": {"http_error": {"status": 503, "retry_after_date": 30}}})
    )
    got = post(client, s.base_url)
    when = email.utils.parsedate_to_datetime(got.headers["retry-after"]).timestamp()
    assert got.headers["retry-after"].endswith("GMT")
    assert 28 <= when - time.time() <= 31
    assert s.journal()["entries"][0]["response"]["t_wall_headers"] is not None


def test_reset_before_headers(gateway_session, client):
    s = gateway_session(scenario({"fault": {"reset_before_headers": {}}}))
    got = post(client, s.base_url)
    assert got.status is None and got.error is not None
    r = s.journal()["entries"][0]["response"]
    assert r["end"] == "reset" and r["sent_bytes"] == 0


def test_cut_after_events_reset(gateway_session, client, gw):
    s = gateway_session(scenario({"reply": REPLY, "fault": {"cut": {"after_events": 2}}}))
    got = post(client, s.base_url)
    # Over TLS, Python's ssl layer may report the RST as an EOF; the journal says which.
    assert isinstance(
        got.error,
        httpx.ReadError if gw.ca_file is None else (httpx.ReadError, httpx.RemoteProtocolError),
    )
    full = full_stream(REPLY)
    assert full.startswith(got.body) and len(events(got.body)) == 2
    r = s.journal()["entries"][0]["response"]
    assert r["end"] == "reset" and r["events_sent"] == 2 and r["cut_at_byte"] == len(got.body)


def test_cut_at_byte_close_inside_utf8_char(gateway_session, client):
    reply = {"text": "héllo ünïcode", "chunk_chars": 100}
    full = full_stream(reply)
    at = full.index("é".encode()) + 1  # splits the two-byte character
    s = gateway_session(
        scenario({"reply": reply, "fault": {"cut": {"at_byte": at, "mode": "close"}}})
    )
    got = post(client, s.base_url)
    assert isinstance(got.error, httpx.RemoteProtocolError)  # incomplete chunked body
    assert got.body == full[:at]
    r = s.journal()["entries"][0]["response"]
    assert r["end"] == "close" and r["sent_bytes"] == at


def test_cut_non_stream_body_short_of_content_length(gateway_session, client):
    s = gateway_session(
        scenario({"reply": REPLY, "fault": {"cut": {"at_byte": 10, "mode": "close"}}})
    )
    got = post(client, s.base_url, stream=False)
    assert got.error is not None and len(got.body) == 10
    assert int(got.headers["content-length"]) > 10


def test_end_without_finish_no_done(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY, "fault": {"end_without_finish": {}}}))
    got = post(client, s.base_url)
    assert got.error is None
    ev = events(got.body)
    assert "[DONE]" not in ev
    assert all(c["finish_reason"] is None for e in last_json(got.body) for c in e["choices"])


def test_end_without_finish_with_done(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY, "fault": {"end_without_finish": {"done": True}}}))
    got = post(client, s.base_url)
    assert events(got.body)[-1] == "[DONE]"
    assert all(c["finish_reason"] is None for e in last_json(got.body) for c in e["choices"])


def test_finish_without_done(gateway_session, client):
    s = gateway_session(scenario({"reply": REPLY, "fault": {"finish_without_done": {}}}))
    got = post(client, s.base_url)
    assert got.error is None and "[DONE]" not in events(got.body)
    assert last_json(got.body)[-1]["choices"][0]["finish_reason"] == "stop"
    assert got.body == full_stream(REPLY, done=False)


def test_in_band_error_then_clean_close(gateway_session, client):
    s = gateway_session(
        scenario(
            {
                "reply": REPLY,
                "fault": {
                    "in_band_error": {
                        "after_events": 1,
                        "error": {"message": "overloaded", "type": "overloaded_error"},
                    }
                },
            }
        )
    )
    got = post(client, s.base_url)
    assert got.error is None
    ev = events(got.body)
    assert len(ev) == 2 and json.loads(ev[1]) == {
        "error": {"message": "overloaded", "type": "overloaded_error"}
    }


def test_malformed_bad_json_and_missing_data(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": REPLY, "fault": {"malformed_event": {"after_events": 1, "kind": "bad_json"}}},
            {
                "reply": REPLY,
                "fault": {"malformed_event": {"after_events": 2, "kind": "missing_data"}},
            },
        )
    )
    full = full_stream(REPLY)
    blocks = [b + b"\n\n" for b in full.split(b"\n\n")[:-1]]
    got = post(client, s.base_url)
    bad = got.body.split(b"\n\n")[1]
    assert bad.startswith(b"data: {") and _not_json(bad[6:])
    assert got.body == blocks[0] + bad + b"\n\n" + b"".join(blocks[1:])
    got2 = post(client, s.base_url)
    odd = got2.body.split(b"\n\n")[2]
    assert not odd.startswith(b"data:") and odd.startswith(b"{")


def _not_json(b: bytes) -> bool:
    try:
        json.loads(b)
    except ValueError:
        return True
    return False


def test_length_cuts_part_and_sets_finish(gateway_session, client):
    reply = {"text": "abcdefghij", "reasoning": "rrrrrr", "chunk_chars": 3}
    s = gateway_session(
        scenario(
            {"reply": reply, "fault": {"length": {"part": "text", "at": 4}}},
            {
                "reply": {"tool_calls": [{"id": "c", "name": "f", "arguments": '{"x": 1}'}]},
                "fault": {"length": {"part": "arguments", "at": 3}},
            },
        )
    )
    ev = last_json(post(client, s.base_url).body)
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in ev) == "abcd"
    assert ev[-1]["choices"][0]["finish_reason"] == "length"
    body = json.loads(post(client, s.base_url, stream=False).body)
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"x'
    assert body["choices"][0]["finish_reason"] == "length"


def test_stall_with_keepalives_then_continues(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": REPLY, "fault": {"stall": {"after_events": 2, "seconds": 10, "keepalive": 3}}}
        ),
        time_scale=0.005,
    )
    got = post(client, s.base_url)
    full = full_stream(REPLY)
    blocks = [b + b"\n\n" for b in full.split(b"\n\n")[:-1]]
    ka = b": keep-alive\n\n"
    assert got.body == b"".join(blocks[:2]) + ka * 3 + b"".join(blocks[2:])
    r = s.journal()["entries"][0]["response"]
    # 10 s scaled by 0.005 = 50 ms of stall between headers and end
    assert (r["t_end_ns"] - r["t_headers_ns"]) >= 50e6 * 0.9


def test_delay_headers_and_slow_dribble_scaled(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": REPLY, "fault": {"delay_headers": {"seconds": 8}}},
            {"reply": REPLY, "fault": {"slow_dribble": {"interval": 2}}},
        ),
        time_scale=0.005,
    )
    post(client, s.base_url)
    got = post(client, s.base_url)
    assert got.body == full_stream(REPLY)
    e0, e1 = s.journal()["entries"]
    assert e0["response"]["t_headers_ns"] - e0["t_arrival_ns"] >= 40e6 * 0.9
    n = len(events(got.body))
    dur = e1["response"]["t_end_ns"] - e1["response"]["t_headers_ns"]
    assert dur >= (n - 1) * 10e6 * 0.9


def test_empty_reply_kinds(gateway_session, client):
    s = gateway_session(
        scenario(
            {"fault": {"empty_reply": {"kind": "no_choices"}}},
            {"fault": {"empty_reply": {"kind": "empty_message"}}},
        )
    )
    assert json.loads(post(client, s.base_url, stream=False).body)["choices"] == []
    body = json.loads(post(client, s.base_url, stream=False).body)
    assert body["choices"][0]["message"]["content"] == ""


def test_step_selection_times_and_match(gateway_session, client):
    s = gateway_session(
        scenario(
            {"match": {"stream": False}, "reply": {"text": "json"}},
            {"times": 2, "fault": {"http_error": {"status": 503}}},
            {"match": {"contains": "TITLE"}, "reply": {"text": "t"}},
        )
    )
    assert post(client, s.base_url).status == 503
    assert post(client, s.base_url, stream=False).status == 200
    assert post(client, s.base_url).status == 503
    got = post(client, s.base_url, messages=[{"role": "user", "content": "a title please"}])
    assert got.status == 200
    # Past the script: the last fault step again, journaled as `otherwise` (no step index).
    assert post(client, s.base_url).status == 503
    entries = s.journal()["entries"]
    assert [e["step"] for e in entries] == [1, 0, 1, 2, None]
    assert [e["otherwise"] for e in entries] == [False] * 4 + [True]
    assert entries[-1]["fault"] == "http_error" and entries[-1]["harness_error"] is None


# -- rechunk and pace: the same bytes, other writes (read off the HTTP chunk framing) ----------
FULL = full_stream(REPLY)
BLOCKS = [b + b"\n\n" for b in FULL.split(b"\n\n")[:-1]]


@pytest.fixture
def http_session(fake_gateway):
    yield from sessions_on(fake_gateway)


def test_rechunk_writes_pieces_of_n_bytes_then_sizes_in_turn(http_session):
    s = http_session(
        scenario(
            {"reply": REPLY, "fault": {"rechunk": {"bytes": 7}}},
            {"reply": REPLY, "fault": {"rechunk": {"bytes": [3, 10]}}},
        )
    )
    w = post_raw(s.base_url)
    assert w.body == FULL and w.ended
    assert [len(c) for c in w.chunks] == [7] * (len(FULL) // 7) + [len(FULL) % 7]
    w = post_raw(s.base_url)
    assert w.body == FULL and w.ended
    sizes = [len(c) for c in w.chunks]
    assert sizes[:-1] == ([3, 10] * len(FULL))[: len(sizes) - 1] and 0 < sizes[-1] <= 10
    e = s.journal()["entries"][0]
    assert e["fault"] == "rechunk" and e["response"]["end"] == "complete"
    assert e["response"]["sent_bytes"] == len(FULL)
    assert e["response"]["events_sent"] == len(BLOCKS)  # a piece counts the events it ends


def test_rechunk_split_events_cuts_every_event_mid_line(http_session):
    s = http_session(scenario({"reply": REPLY, "fault": {"rechunk": {"split_events": True}}}))
    w = post_raw(s.base_url)
    cuts, pos = [], 0
    for b in BLOCKS:
        cuts.append(pos + b.index(b"\n") // 2)
        pos += len(b)
    want = [FULL[a:b] for a, b in zip([0, *cuts], [*cuts, len(FULL)], strict=True)]
    assert w.chunks == want and w.ended
    assert all(not c.endswith(b"\n") for c in w.chunks[:-1])  # every write ends mid-line


def test_rechunk_a_json_body_in_pieces(http_session):
    s = http_session(
        scenario(
            {"reply": REPLY, "fault": {"rechunk": {"bytes": 16}}},
            {"reply": REPLY, "fault": {"rechunk": {"split_events": True}}},
        )
    )
    whole = post_raw(s.base_url, stream=False)  # content-length: one read, the same bytes
    halves = post_raw(s.base_url, stream=False)
    assert whole.body == halves.body
    assert json.loads(whole.body)["choices"][0]["message"]["content"] == REPLY["text"]


@pytest.mark.parametrize("dialect", ["openai_chat", "anthropic_messages", "openai_responses"])
@pytest.mark.parametrize(
    "fault",
    [
        {"rechunk": {"bytes": [5, 1]}},
        {"rechunk": {"split_events": True, "interval": 0.1}},
        {"pace": {"events_per_s": 20, "first_token": 0.5}},
        {"pace": {"token_latency": 0.05}},
    ],
)
def test_rechunk_and_pace_keep_every_byte_in_every_dialect(dialect, fault):
    reply = {**REPLY, "reasoning": "think", "tool_calls": [{"id": "c", "name": "f"}]}
    plain = make_plan(Scenario.from_dict(scenario({"reply": reply})).script[0], BODY, dialect)
    step = Scenario.from_dict(scenario({"reply": reply, "fault": fault})).script[0]
    for stream in (True, False):
        req = {**BODY, "stream": stream}
        want = make_plan(Scenario.from_dict(scenario({"reply": reply})).script[0], req, dialect)
        got = make_plan(step, req, dialect)
        assert b"".join(c.data for c in got.chunks) == b"".join(c.data for c in want.chunks)
        assert sum(c.event for c in got.chunks) == sum(c.event for c in want.chunks)
        assert got.full_bytes == want.full_bytes
        # pace needs a stream: a JSON reply goes out plain
        assert got.fault == (None if "pace" in fault and not stream else next(iter(fault)))
    n = sum(c.event for c in plain.chunks)
    got = make_plan(step, BODY, dialect)
    if "pace" in fault:
        p = fault["pace"]
        gap = 1 / p["events_per_s"] if "events_per_s" in p else p["token_latency"]
        assert [c.delay for c in got.chunks] == [p.get("first_token", 0)] + [gap] * (n - 1)
    elif "bytes" in fault["rechunk"]:
        sizes = [len(w) for w in _writes(got.chunks)]
        assert sizes[:-1] == ([5, 1] * len(sizes))[: len(sizes) - 1]
    else:  # split_events, 0.1 s apart: one write more than events, each ending mid-line
        writes = _writes(got.chunks)
        assert len(writes) == len(plain.chunks) + 1
        assert all(not w.endswith(b"\n") for w in writes[:-1])
        assert [c.delay for c in got.chunks if c.delay] == [0.1] * (len(writes) - 1)


@pytest.mark.parametrize("dialect", ["openai_chat", "anthropic_messages", "openai_responses"])
def test_split_events_cuts_the_data_line_not_an_event_line_before_it(dialect):
    step = Scenario.from_dict(
        scenario({"reply": REPLY, "fault": {"rechunk": {"split_events": True}}})
    ).script[0]
    writes = _writes(make_plan(step, BODY, dialect).chunks)
    for w in writes[:-1]:
        last = w.rsplit(b"\n", 1)[-1]  # the line this write leaves open
        assert last.startswith(b"data:") and len(last) > len(b"data:"), (dialect, w[-60:])


@pytest.mark.parametrize("dialect", ["openai_chat", "anthropic_messages", "openai_responses"])
@pytest.mark.parametrize(
    "fault",
    [
        {"rechunk": {"split_events": True, "interval": 1}},
        {"rechunk": {"bytes": 1, "interval": 0.5}},
        {"rechunk": {"bytes": [3, 50], "interval": 0.1}},
        {"rechunk": {"bytes": 7}},
        {"pace": {"events_per_s": 20, "first_token": 0.5}},
        {"pace": {"token_latency": 2}},
    ],
)
def test_event_gap_is_the_longest_wait_for_an_event_on_the_plan(dialect, fault):
    step = Scenario.from_dict(scenario({"reply": REPLY, "fault": fault})).script[0]
    plan = make_plan(step, BODY, dialect)
    t = last = worst = 0.0
    for c in plan.chunks:  # the schedule the writer keeps: each chunk due its delay later
        t += c.delay
        if c.event:
            worst, last = max(worst, t - last), t
    sent = b"".join(c.data for c in plan.chunks)
    name, params = next(iter(fault.items()))
    assert FAULTS[name].event_gap_s(params, sent) == pytest.approx(worst)


def _writes(chunks: list) -> list[bytes]:
    """The writes a plan's chunks make: a new one at a delay, and after a flush."""
    out = [b""]
    for c in chunks:
        if c.delay and out[-1]:
            out.append(b"")
        out[-1] += c.data
        if c.flush:
            out.append(b"")
    return [w for w in out if w]


def test_pace_writes_each_event_on_its_own_at_its_rate(http_session):
    scale = 0.05
    s = http_session(
        scenario({"reply": REPLY, "fault": {"pace": {"events_per_s": 20, "first_token": 1}}}),
        time_scale=scale,
    )
    w = post_raw(s.base_url)
    assert w.chunks == BLOCKS and w.ended
    # First token 1 s, then 1/20 s a gap, scaled, as the client saw them; each event is due on
    # the schedule from the headers (a late wake-up catches up), so the bound is from there.
    assert w.t_ns[0] - w.t_headers_ns >= 1 * scale * 1e9 * 0.9
    assert w.t_ns[-1] - w.t_headers_ns >= (1 + (len(BLOCKS) - 1) / 20) * scale * 1e9 * 0.9


def test_cut_reset_follows_the_bytes_before_it_by_the_settle(gateway_session, client):
    # The RST comes 50 ms after the bytes before it, so a client reads them in a turn of its own
    # (fakes/writer.py, RESET_SETTLE_S). Read on the gateway's side, where it cannot flake: the
    # headers go out with those bytes in one write, the reset is stamped as it is sent.
    s = gateway_session(scenario({"reply": REPLY, "fault": {"cut": {"after_events": 2}}}))
    got = post(client, s.base_url)
    assert got.error is not None and len(events(got.body)) == 2
    r = s.journal()["entries"][0]["response"]
    assert r["end"] == "reset" and r["t_end_ns"] - r["t_headers_ns"] >= 50_000_000
