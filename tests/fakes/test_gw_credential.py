"""The session's credential source (RTY-10): the journal names which key a request carried,
never the key; after a 401 for expired credentials ``GET credential_url`` gives a new one."""

from __future__ import annotations

import json
from typing import Any

from gw_wire import scenario
from test_gw_otherwise import send

KEY = "sk-conformance-0123456789abcdef0123456789ab3f2a"
EXPIRED = {
    "fault": {
        "http_error": {
            "status": 401,
            "body": {"error": {"message": "The access token has expired.", "code": "x"}},
        }
    }
}
INVALID = {
    "fault": {"http_error": {"status": 401, "body": {"error": {"message": "Invalid API key."}}}}
}


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _issued(client: Any, s: Any) -> Any:
    r = client.get(s.credential_url)
    assert r.status_code == 200
    return r.json()["api_key"]


def test_an_expired_key_is_replaced_by_the_source_and_the_journal_names_each(
    gateway_session, client
):
    s = gateway_session(scenario(EXPIRED, {"reply": {"text": "ok"}}, {"reply": {"text": "ok"}}))
    assert _issued(client, s) is None  # nothing expired yet: the agent keeps its own key
    assert send(client, s, "openai_chat", **_bearer(KEY)).status_code == 401
    fresh = _issued(client, s)
    assert fresh != KEY and fresh.startswith(KEY)  # found and redacted wherever the key is
    assert send(client, s, "openai_chat", **_bearer(fresh)).status_code == 200
    assert send(client, s, "openai_chat", **_bearer(KEY)).status_code == 200  # not refreshed
    entries = s.journal()["entries"]
    assert [e["credential"] for e in entries] == [1, 2, 1]
    assert KEY not in json.dumps(entries)  # nor the fresh key, which holds it


def test_a_401_that_is_not_an_expiry_issues_no_key(gateway_session, client):
    s = gateway_session(scenario(INVALID, {"reply": {"text": "ok"}}))
    assert send(client, s, "openai_chat", **_bearer(KEY)).status_code == 401
    assert _issued(client, s) is None


def test_a_request_without_a_key_is_named_none(gateway_session, client):
    s = gateway_session(scenario({"reply": {"text": "ok"}}))
    send(client, s, "anthropic_messages")
    send(client, s, "anthropic_messages", **{"x-api-key": KEY})
    assert [e["credential"] for e in s.journal()["entries"]] == [None, 1]


def test_an_unknown_session_has_no_source(gateway_session, client):
    s = gateway_session(scenario({"reply": {"text": "ok"}}))
    r = client.get(s.credential_url.replace(s.id, "nosuchsession"))
    assert r.status_code == 404
