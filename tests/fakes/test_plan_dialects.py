"""Every dialect goes through one path in ``fakes.plan`` and the gateway (``Dialect``): chat
completions' empty replies, its fault positions and its request check, pinned by their bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gw_wire import scenario

from fakes.dialects import CHAT, NAMES, REGISTRY
from fakes.plan import make_plan
from fakes.scenario import Scenario

REPLY = {"reasoning": "hmm", "text": "Hello there, world!", "chunk_chars": 4}


def _plan(step: dict[str, Any], dialect: str = CHAT, stream: bool = True) -> list[bytes]:
    sc = Scenario.from_dict(scenario(step))
    plan = make_plan(sc.script[0], {"model": "m", "stream": stream}, dialect)
    return [c.data for c in plan.chunks]


def test_chat_no_choices_is_one_choiceless_chunk_then_done() -> None:
    got = _plan({"fault": {"empty_reply": {"kind": "no_choices"}}})
    assert got == [
        b'data: {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, '
        b'"model": "m", "choices": []}\n\n',
        b"data: [DONE]\n\n",
    ]


def test_chat_no_choices_json_body() -> None:
    (body,) = _plan({"fault": {"empty_reply": {"kind": "no_choices"}}}, stream=False)
    assert body == (
        b'{"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "m", '
        b'"choices": []}'
    )


def test_chat_empty_message_is_the_empty_reply_rendered() -> None:
    got = _plan({"fault": {"empty_reply": {"kind": "empty_message"}}})
    payloads = [json.loads(f[6:]) for f in got[:-1]]
    assert [p["choices"][0]["delta"] for p in payloads] == [
        {"role": "assistant", "content": ""},
        {},
    ]
    assert payloads[-1]["choices"][0]["finish_reason"] == "stop" and got[-1] == b"data: [DONE]\n\n"


def test_in_chat_after_events_counts_the_events_themselves() -> None:
    # Chat is the neutral scale: its own position n is its n-th event, past the end the whole.
    whole = _plan({"reply": REPLY})
    assert len(whole) == 9  # role, reasoning 1, text 5, finish, [DONE]
    for n in range(len(whole) + 3):
        cut = _plan({"reply": REPLY, "fault": {"cut": {"after_events": n}}})
        assert cut == whole[:n], n


@pytest.mark.parametrize("name", NAMES)
def test_every_dialect_checks_its_request_alike(name: str) -> None:
    d = REGISTRY[name]
    field = "input" if name == "openai_responses" else "messages"
    ok = {field: []}
    assert d.check_request(ok) is None
    assert d.check_request([]) == "request body must be a JSON object"
    assert d.check_request({}) is not None and f"'{field}' must be" in d.check_request({})
    assert d.check_request({**ok, "stream": "yes"}) == "'stream' must be a boolean, got str"
    assert d.check_request({**ok, "model": 3}) == "'model' must be a string, got int"
    assert d.check_request({**ok, "tools": {}}) == "'tools' must be an array"


def test_chat_steps_match_on_the_request_itself() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert REGISTRY[CHAT].match_view(body) is body
