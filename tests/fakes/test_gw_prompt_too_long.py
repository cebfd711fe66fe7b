"""``http_error: {error: prompt_too_long}``: the context window overflow in each API's own words,
as each official SDK reads it (an agent that knows its API's wording must recognise it)."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
from gw_wire import scenario

OVERFLOW = {"fault": {"http_error": {"status": 400, "error": "prompt_too_long"}}, "times": 3}
MSG = [{"role": "user", "content": "hi"}]


def _verify(gw: Any) -> Any:
    return ssl.create_default_context(cafile=gw.ca_file) if gw.ca_file else True


def test_each_dialect_words_it_as_its_api_does(gateway_session, client):
    s = gateway_session(scenario(OVERFLOW))
    chat = client.post(s.base_url + "/chat/completions", json={"model": "m", "messages": MSG})
    assert chat.status_code == 400
    assert chat.json()["error"]["code"] == "context_length_exceeded"
    msgs = client.post(
        s.base_url + "/messages", json={"model": "m", "max_tokens": 8, "messages": MSG}
    )
    assert msgs.status_code == 400 and msgs.json()["type"] == "error"
    assert msgs.json()["error"]["type"] == "invalid_request_error"
    assert msgs.json()["error"]["message"].startswith("prompt is too long")
    rsp = client.post(s.base_url + "/responses", json={"model": "m", "input": "hi"})
    assert rsp.status_code == 400
    assert rsp.json()["error"]["code"] == "context_length_exceeded"


def test_a_body_given_wins(gateway_session, client):
    fault = {"http_error": {"status": 400, "error": "prompt_too_long", "body": {"e": 1}}}
    s = gateway_session(scenario({"fault": fault}))
    assert client.post(s.base_url + "/messages", json={"model": "m", "messages": MSG}).json() == {
        "e": 1
    }


def test_the_anthropic_sdk_reads_a_prompt_too_long(gateway_session, gw):
    anthropic = pytest.importorskip("anthropic")
    s = gateway_session(scenario(OVERFLOW))
    c = anthropic.Anthropic(
        base_url=s.base_url.removesuffix("/v1"),
        api_key="sk-test",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(verify=_verify(gw), timeout=5.0),
    )
    with pytest.raises(anthropic.BadRequestError) as ei:
        c.messages.create(model="m", max_tokens=8, messages=MSG)
    assert "prompt is too long" in str(ei.value)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_openai_sdk_reads_context_length_exceeded(gateway_session, gw, api):
    openai = pytest.importorskip("openai")
    s = gateway_session(scenario(OVERFLOW))
    c = openai.OpenAI(
        base_url=s.base_url,
        api_key="sk-test",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(verify=_verify(gw), timeout=5.0),
    )
    with pytest.raises(openai.BadRequestError) as ei:
        if api == "chat":
            c.chat.completions.create(model="m", messages=MSG)  # type: ignore[arg-type]
        else:
            c.responses.create(model="m", input="hi")
    assert ei.value.code == "context_length_exceeded"
