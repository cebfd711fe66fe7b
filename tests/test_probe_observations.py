"""Each probe observation on its own, against a canned gateway (pytest-httpserver) whose habits
are mixed on purpose, so that the observations do not all give the same verdict; the registry
matches ``observe`` and the table in ``docs/probe.md``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from werkzeug import Request, Response

from conformance.probe import OBSERVATIONS, PROBES, VERDICTS, Exchange, Probe, observe
from conformance.probe.facts import Seen

DOC = Path(__file__).resolve().parent.parent / "docs" / "probe.md"


def _sse(*payloads: object, done: bool = True) -> str:
    body = "".join(f"data: {json.dumps(p)}\n\n" for p in payloads)
    return body + ("data: [DONE]\n\n" if done else "")


def _chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None):
    d: dict = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage:
        d["usage"] = usage
    return d


USAGE = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
TOOL_HEAD = {
    "tool_calls": [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather"}}
    ]
}

# marker, stream -> status, content type, body, extra headers
CANNED: dict[tuple[str, bool], tuple[int, str, str, dict[str, str]]] = {
    # finish_reason on the last chunk, usage in it, then [DONE]
    ("probe:short", True): (
        200,
        "text/event-stream",
        _sse(_chunk({"content": "ready"}), _chunk(finish="stop", usage=USAGE)),
        {},
    ),
    # reasoning under `reasoning` only, no usage, no [DONE]
    ("probe:reasoning", True): (
        200,
        "text/event-stream",
        _sse(_chunk({"reasoning": "17 primes"}), _chunk({"content": "17"}, "stop"), done=False),
        {},
    ),
    # a tool call in three fragments that join into JSON
    ("probe:tool", True): (
        200,
        "text/event-stream",
        _sse(
            _chunk(TOOL_HEAD),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris", '}}]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"unit": "celsius"}'}}]}),
            _chunk(finish="tool_calls", usage=USAGE),
        ),
        {},
    ),
    ("probe:short", False): (
        200,
        "application/json",
        json.dumps({"choices": [{"message": {"content": "ready"}, "finish_reason": "stop"}]}),
        {},
    ),
    ("probe:tool", False): (
        200,
        "application/json",
        json.dumps({"choices": [{"message": {"tool_calls": []}, "finish_reason": "tool_calls"}]}),
        {},
    ),
    # the reasoning-only history turn refused
    ("probe:history", False): (
        400,
        "application/json",
        json.dumps({"error": {"message": "reasoning_content is not allowed", "type": "invalid"}}),
        {},
    ),
    # the invalid request refused, but not with an OpenAI error body
    ("probe:bad", False): (400, "text/plain", "Bad Request", {}),
    ("probe:rate", False): (
        429,
        "application/json",
        json.dumps({"error": {"message": "slow down"}}),
        {"Retry-After": "2"},
    ),
}

EXPECTED = {
    "stream-finish": "OK",
    "stream-done": "NOTE",
    "reasoning-field": "MISSING",
    "stream-usage": "NOTE",
    "tool-chunking": "OK",
    "json-finish": "OK",
    "reasoning-history": "MISSING",
    "error-shape": "NOTE",
    "empty-stream": "OK",
    "in-band-error": "NOT_SEEN",
    "retry-after": "OK",
}


def _answer(request: Request) -> Response:
    body = request.get_json()
    marker = re.search(r"probe:[a-z]+", json.dumps(body["messages"])).group(0)
    status, ctype, text, headers = CANNED[(marker, bool(body.get("stream")))]
    return Response(text, status=status, headers=headers, content_type=ctype)


@pytest.fixture
def seen(httpserver) -> Seen:
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(_answer)
    exchanges = Probe(httpserver.url_for("/v1"), "m", rate=1000).run()
    assert [x.name for x in exchanges] == [p.name for p in PROBES]
    return Seen.of(exchanges)


@pytest.mark.parametrize("obs", OBSERVATIONS, ids=[o.id for o in OBSERVATIONS])
def test_each_observation_alone_on_a_canned_gateway(obs, seen):
    got = obs(seen)
    assert got["id"] == obs.id and got["title"] == obs.title
    assert got["verdict"] == EXPECTED[obs.id], got["value"]
    assert set(got["evidence"]) <= {p.name for p in PROBES}
    # The same entry as in the whole report: an observation reads nothing but what was seen.
    assert got == next(o for o in observe(seen.exchanges) if o["id"] == obs.id)


def test_canned_values_name_what_was_seen(seen):
    by_id = {o.id: o(seen)["value"] for o in OBSERVATIONS}
    assert by_id["reasoning-field"].startswith("reasoning arrives as reasoning, not")
    assert "no [DONE] at the end of: reasoning-stream" in by_id["stream-done"]
    assert by_id["stream-usage"] == "usage in 2 of 3 streams"
    assert "3 fragments, id and name in the first fragment" in by_id["tool-chunking"]
    assert by_id["reasoning-history"].startswith("HTTP 400: application/json {error:")
    assert "bad-request: HTTP 400 text/plain, not JSON: 'Bad Request'" in by_id["error-shape"]
    assert by_id["retry-after"] == "rate-limit: retry-after: 2"


@pytest.mark.parametrize("obs", OBSERVATIONS, ids=[o.id for o in OBSERVATIONS])
def test_each_observation_is_not_seen_when_nothing_came_back(obs):
    unanswered = [Exchange(p.name, p.stream, {}, end="unreachable") for p in PROBES]
    for exchanges in ([], unanswered):
        got = obs(Seen.of(exchanges))
        assert got["verdict"] == "NOT_SEEN", (obs.id, got["value"])


def test_registry_is_the_report_and_the_docs_table():
    ids = [o.id for o in OBSERVATIONS]
    assert len(set(ids)) == len(ids)
    assert [o["id"] for o in observe([])] == ids
    assert all(o["verdict"] in VERDICTS for o in observe([]))
    section = DOC.read_text("utf-8").split("## Observations and verdicts")[1].split("\n## ")[0]
    table = re.findall(r"^\| `([a-z-]+)` \| (yes|no) \|", section, re.M)
    assert table == [(o.id, "yes" if o.relied_on else "no") for o in OBSERVATIONS]
