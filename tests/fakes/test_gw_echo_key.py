"""`http_error.echo_api_key`: the request's key in the error body, in every dialect, and
never in the journal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gw_wire import scenario
from test_gw_otherwise import send

from fakes import Scenario, ScenarioError
from fakes.plan import mask_key

KEY = "sk-conformance-0123456789abcdef0123456789ab3f2a"
# The header each dialect's clients send the key in; `api-key` is Azure's.
HEADERS = {
    "openai_chat": {"Authorization": f"Bearer {KEY}"},
    "anthropic_messages": {"x-api-key": KEY},
    "openai_responses": {"api-key": KEY},
}


def echo(status: int, how: str, **extra: Any) -> dict[str, Any]:
    return {"fault": {"http_error": {"status": status, "echo_api_key": how, **extra}}}


def message(body: dict[str, Any]) -> str:
    return body["error"]["message"]  # every dialect's error shape keeps it there


@pytest.fixture(params=list(HEADERS))
def dialect(request: Any) -> str:
    return request.param


def test_mask_keeps_seven_and_four():
    assert mask_key(KEY) == "sk-conf...3f2a"
    assert mask_key("abcdefgh") == "ab...gh" and mask_key("abc") == "..."


def test_full_key_echoed_on_the_wire_redacted_in_the_journal(gateway_session, client, dialect):
    s = gateway_session(scenario(echo(401, "full")))
    r = send(client, s, dialect, **HEADERS[dialect])
    assert r.status_code == 401
    assert message(r.json()) == f"Incorrect API key provided: {KEY}."
    (e,) = s.journal()["entries"]
    assert KEY not in json.dumps(e)
    assert message(json.loads(e["response"]["sent"])) == "Incorrect API key provided: [REDACTED]."
    # The byte counts stay those of the wire.
    assert e["response"]["sent_bytes"] == e["response"]["full_bytes"] == len(r.content)
    assert e["fault_params"] == {"status": 401, "echo_api_key": "full"}


def test_masked_key_in_a_429_then_success(gateway_session, client, dialect):
    s = gateway_session(scenario(echo(429, "masked"), {"reply": {"text": "ok"}}))
    r = send(client, s, dialect, stream=False, **HEADERS[dialect])
    assert r.status_code == 429 and message(r.json()).endswith("(API key sk-conf...3f2a)")
    assert KEY not in r.text
    assert send(client, s, dialect, **HEADERS[dialect]).status_code == 200
    assert KEY not in json.dumps(s.journal())


def test_scripted_body_takes_the_key_at_its_placeholder(gateway_session, client, dialect):
    body = {"detail": {"reason": "key {api_key} is revoked", "keys": ["{api_key}"]}}
    s = gateway_session(scenario(echo(403, "full", body=body), otherwise=echo(500, "full")))
    r = send(client, s, dialect, **HEADERS[dialect])
    assert r.json() == {"detail": {"reason": f"key {KEY} is revoked", "keys": [KEY]}}
    # An `otherwise` step echoes too, and is redacted the same way.
    assert KEY in message(send(client, s, dialect, **HEADERS[dialect]).json())
    journal = json.dumps(s.journal())
    assert KEY not in journal and journal.count("[REDACTED]") == 5  # 2 request headers, 3 echoes


def test_plain_text_body_and_no_key_on_the_request(gateway_session, client):
    s = gateway_session(scenario(echo(401, "full", body="bad key: {api_key}"), echo(401, "full")))
    r = send(client, s, "openai_chat", **HEADERS["openai_chat"])
    assert r.text == f"bad key: {KEY}"
    assert s.journal()["entries"][0]["response"]["sent"] == "bad key: [REDACTED]"
    no_key = send(client, s, "openai_chat", Authorization="")
    assert message(no_key.json()) == "Incorrect API key provided: (none)."


def test_without_echo_a_key_that_happens_to_be_in_the_body_is_left_alone(gateway_session, client):
    # Only an echo is redacted: a short key must not blank unrelated text of the journal.
    s = gateway_session(scenario({"fault": {"http_error": {"status": 500, "body": "oops"}}}))
    send(client, s, "openai_chat", Authorization="Bearer oops")
    assert s.journal()["entries"][0]["response"]["sent"] == "oops"


def test_echo_body_without_placeholder_is_a_load_error():
    with pytest.raises(ScenarioError, match=r"script\[0\]\.fault\.http_error\.body: echo_api_key"):
        Scenario.from_dict(scenario(echo(401, "full", body={"error": "no key here"})))
