"""Requests beyond the script: `otherwise:` (explicit or default) in every dialect, and the
harness error that stays only when a scenario has neither."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from gw_wire import scenario

from fakes import ScenarioError, load_scenario

DIALECTS = {
    "openai_chat": ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    "anthropic_messages": (
        "/messages",
        {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "openai_responses": ("/responses", {"input": "hi"}),
}


def send(client: httpx.Client, s: Any, dialect: str, stream: bool = True, **headers: str):
    path, body = DIALECTS[dialect]
    return client.post(
        s.base_url + path, json={"model": "m", "stream": stream, **body}, headers=headers
    )


def text_of(r: httpx.Response) -> str:
    return r.content.decode()


@pytest.fixture(params=list(DIALECTS))
def dialect(request: Any) -> str:
    return request.param


def test_explicit_otherwise_serves_every_extra_request(gateway_session, client, dialect):
    s = gateway_session(
        scenario(
            {"reply": {"text": "first"}},
            {"fault": {"http_error": {"status": 503}}},
            otherwise={"fault": {"http_error": {"status": 429, "headers": {"Retry-After": "1"}}}},
        )
    )
    got = [send(client, s, dialect, stream=i % 2 == 0) for i in range(5)]
    assert [r.status_code for r in got] == [200, 503, 429, 429, 429]
    assert got[4].headers["retry-after"] == "1"
    entries = s.journal()["entries"]
    assert [e["step"] for e in entries] == [0, 1, None, None, None]
    assert [e["otherwise"] for e in entries] == [False, False, True, True, True]
    extra = entries[2]
    assert extra["fault"] == "http_error" and extra["harness_error"] is None
    assert extra["fault_params"] == {"status": 429, "headers": {"Retry-After": "1"}}
    assert extra["dialect"] == dialect and extra["response"]["status"] == 429


def test_explicit_otherwise_reply_is_rendered_in_the_dialect(gateway_session, client, dialect):
    s = gateway_session(
        scenario({"fault": {"http_error": {"status": 500}}}, otherwise={"reply": {"text": "Late"}})
    )
    assert send(client, s, dialect).status_code == 500
    streamed, whole = send(client, s, dialect), send(client, s, dialect, stream=False)
    assert streamed.status_code == whole.status_code == 200
    assert "text/event-stream" in streamed.headers["content-type"] and "Late" in text_of(streamed)
    assert "Late" in json.dumps(whole.json())
    last = s.journal()["entries"][-1]
    assert last["otherwise"] and last["step"] is None and last["fault"] is None
    assert last["fault_params"] == {}


def test_default_is_the_last_fault_step_with_its_match_ignored(gateway_session, client, dialect):
    s = gateway_session(
        scenario(
            {"match": {"stream": True}, "fault": {"http_error": {"status": 502}}},
            {
                "match": {"stream": True},
                "fault": {"cut": {"after_events": 1}},
                "reply": {"text": "a"},
            },
            {"match": {"stream": False}, "reply": {"text": "fallback"}},
        )
    )
    assert send(client, s, dialect).status_code == 502
    with pytest.raises(httpx.HTTPError):
        send(client, s, dialect)  # the scripted cut
    assert send(client, s, dialect, stream=False).status_code == 200
    # Both modes past the script get the cut (a non-streaming one at byte 0 of its body).
    with pytest.raises(httpx.HTTPError):
        send(client, s, dialect)
    with pytest.raises(httpx.HTTPError):
        send(client, s, dialect, stream=False)
    entries = s.journal()["entries"]
    assert [e["step"] for e in entries] == [0, 1, 2, None, None]
    assert [e["otherwise"] for e in entries][3:] == [True, True]
    assert {e["fault"] for e in entries[3:]} == {"cut"}
    assert entries[3]["fault_params"] == {"after_events": 1}
    assert entries[3]["response"]["end"] == "reset"


def test_default_stream_only_fault_degrades_on_a_non_streaming_request(
    gateway_session, client, dialect
):
    s = gateway_session(
        scenario({"reply": {"text": "kept"}, "fault": {"in_band_error": {"after_events": 1}}})
    )
    send(client, s, dialect)
    whole = send(client, s, dialect, stream=False)
    assert whole.status_code == 200 and "kept" in json.dumps(whole.json())
    last = s.journal()["entries"][-1]
    assert last["otherwise"] and last["fault"] is None and last["response"]["status"] == 200


def test_a_script_without_fault_or_otherwise_keeps_the_harness_error(
    gateway_session, client, dialect
):
    s = gateway_session(scenario({"reply": {"text": "only"}}))
    assert send(client, s, dialect).status_code == 200
    r = send(client, s, dialect)
    assert r.status_code == 500 and "harness_error" in text_of(r)
    last = s.journal()["entries"][-1]
    assert last["step"] is None and last["otherwise"] is False
    assert "no `otherwise` or fault step" in last["harness_error"]


def test_otherwise_replay_of_another_dialect_names_the_otherwise_step(gateway_session, client):
    s = gateway_session(
        scenario(
            {"reply": {"text": "x"}},
            otherwise={"replay": {"chunks": ["data: [DONE]\n\n"], "dialect": "openai_chat"}},
        )
    )
    send(client, s, "openai_chat")
    assert send(client, s, "openai_chat").status_code == 200
    assert send(client, s, "anthropic_messages").status_code == 500
    last = s.journal()["entries"][-1]
    assert last["otherwise"] and "the otherwise step replays" in last["harness_error"]


# --- loading: the same file:line errors as script steps ------------------------------------

HEAD = "id: {id}\ncriteria: [RTY-01]\nprompt: p\nscript:\n  - reply: {{text: a}}\n"


def load(tmp_path: Path, name: str, otherwise: str):
    p = tmp_path / f"{name}.yaml"
    text = HEAD.format(id=name) + "otherwise:\n" + otherwise
    p.write_text(text)
    return p, text.splitlines()


def test_otherwise_loads(tmp_path):
    p, _ = load(tmp_path, "ok", "  fault: {http_error: {status: 429}}\n")
    sc = load_scenario(p)
    assert sc.otherwise is not None and sc.otherwise.fault_name == "http_error"
    assert sc.fallback_step is sc.otherwise


@pytest.mark.parametrize(
    ("name", "body", "bad_line", "message"),
    [
        (
            "match",
            "  match: {stream: true}\n  reply: {text: b}\n",
            "otherwise:",
            "otherwise: Additional properties are not allowed ('match' was unexpected); "
            "allowed: fault, replay, reply",
        ),
        (
            "times",
            "  times: 3\n  fault: {http_error: {status: 500}}\n",
            "otherwise:",
            "'times' was unexpected",
        ),
        (
            "empty",
            "  {}\n",
            "otherwise:",
            "otherwise: {} is not valid under any of the given schemas",
        ),
        (
            "reply-and-replay",
            "  reply: {text: b}\n  replay: {chunks: []}\n",
            "otherwise:",
            "otherwise: ",
        ),
        (
            "stream-only",
            "  fault: {in_band_error: {after_events: 1}}\n",
            "  fault: {in_band_error: {after_events: 1}}",
            "otherwise.fault: 'in_band_error' is a stream-only fault and `otherwise` also serves "
            "non-streaming requests",
        ),
        (
            "replay-unfit",
            "  replay: {chunks: ['data: x\\n\\n']}\n  fault: {length: {part: text, at: 1}}\n",
            "  fault: {length: {part: text, at: 1}}",
            "otherwise.fault: 'length' rewrites a rendered reply and cannot apply to a replay step",
        ),
        (
            "bad-fault",
            "  fault: {http_error: {status: 429, echo_api_key: yes}}\n",
            "  fault: {http_error: {status: 429, echo_api_key: yes}}",
            "otherwise.fault.http_error.echo_api_key: True is not one of ['full', 'masked']",
        ),
    ],
)
def test_bad_otherwise_names_file_line_and_rule(tmp_path, name, body, bad_line, message):
    p, lines = load(tmp_path, name, body)
    with pytest.raises(ScenarioError) as ei:
        load_scenario(p)
    assert str(ei.value).startswith(f"{p}:{lines.index(bad_line) + 1}: ")
    assert message in str(ei.value)


def test_stream_only_otherwise_with_a_reply_loads(tmp_path):
    p, _ = load(tmp_path, "so", "  reply: {text: b}\n  fault: {in_band_error: {after_events: 1}}\n")
    assert load_scenario(p).otherwise.fault_name == "in_band_error"
