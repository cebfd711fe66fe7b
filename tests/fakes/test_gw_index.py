"""The gateway's root: the index of sessions, the root /v1 of a single scenario, and 404s that
list the prefixes that do answer."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fakes import Gateway, SyncGateway
from fakes.errors import FakesError
from fakes.index import prefers_html, render_html

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
TITLE = '<script>alert("x")</script> & more'


def scenario(sid: str, text: str = "scripted hi", **extra: object) -> dict:
    return {
        "id": sid,
        "title": TITLE,
        "criteria": [],
        "prompt": "p",
        "script": [{"reply": {"text": text}, "times": 5}],
        **extra,
    }


@pytest.fixture
def gw() -> Iterator[SyncGateway]:
    # Its own gateway: serving at the root changes what the root answers for everyone.
    with Gateway.running() as g:
        yield g


def test_index_is_json_by_default_and_html_for_a_browser(gw):
    a = gw.create_session(scenario("alpha"))
    b = gw.create_session(scenario("beta"))
    for accept in (None, "*/*", "application/json", "text/html;q=0.5, application/json"):
        headers = {"Accept": accept} if accept else {}
        r = httpx.get(gw.base_url + "/", headers=headers)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        doc = r.json()
        listed = {
            (s["scenario"], s["base_url"], s["tool_endpoint"], s["mcp_endpoint"])
            for s in doc["sessions"]
        }
        assert listed == {
            ("alpha", a.base_url, a.tool_endpoint, a.mcp_endpoint),
            ("beta", b.base_url, b.tool_endpoint, b.mcp_endpoint),
        }
        assert doc["base_url"] is None  # two scenarios: the root /v1 serves none
        assert doc["sessions"][0]["title"] == TITLE
    r = httpx.get(gw.base_url + "/", headers={"Accept": BROWSER})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert a.base_url in r.text and b.base_url in r.text
    assert "<script>" not in r.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in r.text


def test_html_escapes_every_scenario_value():
    doc = {
        "gateway": "http://h",
        "hint": "<i>",
        "base_url": None,
        "sessions": [
            {
                "session": "s",
                "scenario": "<b>id</b>",
                "title": "<t>",
                "base_url": "http://h/s/<x>/v1",
                "tool_endpoint": "http://h/s/<x>/tools",
                "mcp_endpoint": "http://h/s/<x>/mcp",
            }
        ],
    }
    page = render_html(doc)
    for raw in ("<b>", "<t>", "<x>", "<i>"):
        assert raw not in page
    assert "&lt;b&gt;id&lt;/b&gt;" in page and "&lt;t&gt;" in page


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        ("", False),
        ("*/*", False),
        ("application/json", False),
        ("text/html", True),
        (BROWSER, True),
        ("text/*;q=0.9, application/json;q=0.8", True),
        ("text/html;q=0.1, */*", False),
        ("text/html;q=bogus, application/json", False),
    ],
)
def test_accept_negotiation(accept, html):
    assert prefers_html(accept) is html


def test_unknown_paths_answer_json_404_listing_the_prefixes(gw):
    a = gw.create_session(scenario("alpha"))
    b = gw.create_session(scenario("beta"))
    for method, path in [
        ("GET", "/nope"),
        ("GET", "/v1/models"),  # two scenarios: no root /v1
        ("POST", "/v1/chat/completions"),
        ("GET", "/s/not-a-session/v1/models"),
        ("POST", "/"),
    ]:
        r = httpx.request(method, gw.base_url + path, json={"messages": []})
        assert r.status_code == 404, path
        body = r.json()
        assert sorted(body["valid_prefixes"]) == sorted([a.base_url, b.base_url]), path
        assert a.base_url in body["error"]["message"] and path in body["error"]["message"]
    # A miss names neither session's journal.
    assert a.journal()["entries"] == [] and b.journal()["entries"] == []


def test_root_v1_serves_the_single_scenario_like_its_session_path(gw):
    s = gw.create_session(scenario("solo", text="root reply"))
    root = gw.serve_at_root(s.id)
    assert root == gw.base_url + "/v1"
    models = httpx.get(root + "/models")
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "fake-model"
    chat = httpx.post(
        root + "/chat/completions", json={"messages": [{"role": "user", "content": "p"}]}
    )
    assert chat.json()["choices"][0]["message"]["content"] == "root reply"
    msgs = httpx.post(
        root + "/messages",
        json={"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "p"}]},
    )
    assert [c["text"] for c in msgs.json()["content"]] == ["root reply"]
    count = httpx.post(
        root + "/messages/count_tokens",
        json={"model": "m", "messages": [{"role": "user", "content": "p"}]},
    )
    assert count.status_code == 200 and count.json()["input_tokens"] > 0
    resp = httpx.post(root + "/responses", json={"model": "m", "input": "p"})
    out = resp.json()["output"]
    assert out[0]["content"][0]["text"] == "root reply"
    missing = httpx.get(root + "/nope")
    assert missing.status_code == 404
    # Every request landed in the one session's journal, each under the path it came on.
    entries = s.journal()["entries"]
    assert [(e["kind"], e["path"]) for e in entries] == [
        ("models", "/v1/models"),
        ("chat", "/v1/chat/completions"),
        ("chat", "/v1/messages"),
        ("count_tokens", "/v1/messages/count_tokens"),
        ("chat", "/v1/responses"),
        ("unknown", "/v1/nope"),
    ]
    index = httpx.get(gw.base_url + "/").json()
    assert index["base_url"] == root and index["valid_prefixes"] == [root, s.base_url]
    other = httpx.get(gw.base_url + "/elsewhere").json()
    assert other["valid_prefixes"] == [root, s.base_url]
    gw.drop_session(s.id)
    assert httpx.get(root + "/models").status_code == 404


def test_serve_at_root_needs_a_session_that_accepts_connections(gw):
    with pytest.raises(FakesError, match="unknown session"):
        gw.serve_at_root("nope")
    s = gw.create_session(scenario("refusing", refuse_connections={"seconds": 30}))
    with pytest.raises(FakesError, match="refuses connections"):
        gw.serve_at_root(s.id)
