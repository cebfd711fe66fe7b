"""``conformance probe`` reaching a gateway that routes by extra headers and a query parameter,
their values never written, bad ``--header``/``--header-env``/``--query`` refused clearly, and
``--dialect`` speaking Anthropic Messages and OpenAI Responses to the fake gateway."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from werkzeug import Request, Response

from conformance import probe
from conformance.probe import Probe, recording
from conformance.probe.redact import MASK, scrub
from conformance.probe.wire import request_url
from fakes import load_scenario
from fakes.pytest_plugin import fake_gateway, sessions_on  # noqa: F401 (fixture)

GATEWAYS = Path(__file__).resolve().parent.parent / "scenarios" / "gateways"
ROUTE = "route-token-5b9e1c7d"  # --header value, under a name no list calls a credential
TENANT = "tenant-77f3a0e2c1"  # --header-env value
SIG = "sig-4c2d8e6f0a"  # --query value
KEY = "sk-wire-test-0d1e2f3a4b"


@pytest.fixture
def gateway_session(fake_gateway):  # noqa: F811 - the imported fixture
    yield from sessions_on(fake_gateway)


def run_main(tmp_path: Path, base_url: str, *extra: str) -> tuple[int, dict]:
    rc = probe.main(
        ["--base-url", base_url, "--model", "m", "--rate", "1000", "--out", str(tmp_path / "r")]
        + list(extra)
    )
    doc = json.loads((tmp_path / "r" / "probe.json").read_text("utf-8"))
    return rc, doc


def _strings(value) -> list[str]:
    """Every string value (not key) in a JSON-like value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def verdicts(doc: dict) -> dict[str, str]:
    return {o["id"]: o["verdict"] for o in doc["observations"]}


def everything_written(tmp_path: Path, captured) -> str:
    files = [p.read_text("utf-8") for p in tmp_path.rglob("*") if p.is_file()]
    return "\n".join(files + [captured.out, captured.err])


ALL_OK = {
    "stream-finish": "OK",
    "stream-done": "OK",
    "reasoning-field": "OK",
    "stream-usage": "OK",
    "tool-chunking": "OK",
    "json-finish": "OK",
    "reasoning-history": "OK",
    "error-shape": "OK",
    "empty-stream": "OK",
    "in-band-error": "NOT_SEEN",
    "retry-after": "OK",
}


# -- a gateway that routes only with two headers and a query parameter --------------------------


@pytest.fixture
def routing_gateway(httpserver, gateway_session):
    """A proxy on 127.0.0.1 that refuses (403) a request without ``X-Route: ROUTE``,
    ``X-Tenant: TENANT`` and ``?sig=SIG``, forwards the rest to a well-behaved fake gateway
    session, and echoes every header value and the query back in a header and (on errors) the
    body, as careless gateways do."""
    upstream = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    seen: list[Request] = []

    def route(request: Request) -> Response:
        seen.append(request)
        echo = " ".join([*request.headers.values(), request.query_string.decode()])
        if (
            request.headers.get("X-Route") != ROUTE
            or request.headers.get("X-Tenant") != TENANT
            or request.args.get("sig") != SIG
        ):
            body = {"error": {"message": f"no route for {echo}", "type": "forbidden"}}
            return Response(json.dumps(body), 403, content_type="application/json")
        up = httpx.post(
            upstream.base_url + "/chat/completions",
            content=request.get_data(),
            headers={"content-type": "application/json"},
            timeout=10,
        )
        headers = {
            k: v
            for k, v in up.headers.items()
            if k.lower() not in ("content-length", "transfer-encoding", "connection")
        }
        headers["X-Echo"] = echo
        body = up.content
        if up.status_code >= 400:
            body = json.dumps({**up.json(), "echo": echo}).encode()
        return Response(body, up.status_code, headers=headers)

    httpserver.expect_request("/gw/v1/chat/completions", method="POST").respond_with_handler(route)
    return httpserver.url_for("/gw/v1"), upstream, seen


def test_probe_through_headers_and_a_query_parameter(
    routing_gateway, tmp_path, capsys, monkeypatch
):
    base, upstream, seen = routing_gateway
    monkeypatch.setenv("PROBE_TENANT", TENANT)
    monkeypatch.setenv("PROBE_KEY", KEY)
    rc, doc = run_main(
        tmp_path,
        base,
        "--api-key-env",
        "PROBE_KEY",
        "--header",
        f"X-Route: {ROUTE}",
        "--header-env",
        "X-Tenant=PROBE_TENANT",
        "--query",
        f"sig={SIG}",
        "--record",
        str(tmp_path / "rec.yaml"),
    )
    # Every request reached the fake gateway: the proxy let each through.
    assert verdicts(doc) == ALL_OK and rc == 0
    assert len(upstream.journal()["entries"]) == len(probe.PROBES)
    assert all(r.args.get("sig") == SIG and r.headers["X-Route"] == ROUTE for r in seen)
    assert doc["probe"]["headers"] == ["X-Route", "X-Tenant"]
    assert doc["probe"]["query"] == ["sig"]
    # The proxy echoed every value back; none is written or printed anywhere.
    out = everything_written(tmp_path, capsys.readouterr())
    assert MASK in out
    for secret in (ROUTE, TENANT, SIG, KEY):
        assert secret not in out


def test_without_the_routing_headers_the_gateway_refuses_and_nothing_leaks(
    routing_gateway, tmp_path, capsys
):
    base, upstream, _ = routing_gateway
    rc, doc = run_main(tmp_path, base, "--header", f"X-Route: {ROUTE}", "--query", f"sig={SIG}")
    err = capsys.readouterr().err
    assert rc == 2 and "refused the key (403)" in err  # no X-Tenant: refused on the first
    assert upstream.journal()["entries"] == []
    assert ROUTE not in err and SIG not in err and MASK in err
    assert ROUTE not in json.dumps(doc) and SIG not in json.dumps(doc)


# -- bad usage ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--header-env", "X-Tenant=PROBE_NO_SUCH_VAR"], "environment variable PROBE_NO_SUCH_VAR"),
        (["--header-env", "X-Tenant"], "--header-env #1: expected NAME=VAR"),
        (["--header", "X-Route=secret-value-1"], "--header #1: expected 'NAME: VALUE'"),
        (["--header", "X-Route:"], "--header #1: expected 'NAME: VALUE'"),
        (["--header", "Bad Name: secret-value-1"], "'Bad Name' is not a header name"),
        (["--header", "A: secret-value-1", "--header", "a: x"], "header a is given twice"),
        (["--query", "secret-value-1"], "--query #1: expected KEY=VALUE"),
        (["--dialect", "klingon"], "invalid choice: 'klingon'"),
    ],
)
def test_bad_extras_are_exit_2_naming_what_and_where(extra, message, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PROBE_NO_SUCH_VAR", raising=False)
    rc = probe.main(
        ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "b")]
        + extra
    )
    err = capsys.readouterr().err
    assert rc == 2 and message in err
    assert "secret-value-1" not in err  # a malformed value is not echoed either
    # Refused before anything was sent: an unreachable gateway would have left a report.
    assert not (tmp_path / "b").exists()


def test_request_url_keeps_the_base_query_and_appends_the_given_one():
    url = request_url(
        "https://gw.example/openai/v1/?api-version=1", "/chat/completions", [("k", "a b")]
    )
    assert url == "https://gw.example/openai/v1/chat/completions?api-version=1&k=a+b"


def test_scrub_masks_every_secret_longest_first_and_credential_headers_by_name():
    got = scrub(
        {"a": "x-abc-abcdef-y", "Cf-Aig-Authorization": "anything", "n": 3},
        ["abc", "abcdef", None, ""],
    )
    assert got == {"a": f"x-{MASK}-{MASK}-y", "Cf-Aig-Authorization": MASK, "n": 3}


# -- dialects ----------------------------------------------------------------------------------

ANTHROPIC = {
    **ALL_OK,
    "reasoning-field": "NOT_APPLICABLE",
    "reasoning-history": "NOT_APPLICABLE",
}
RESPONSES = {**ANTHROPIC, "stream-done": "NOT_APPLICABLE"}
KNOWN = {
    "well-behaved": (0, {}),
    "never-finish-reason": (1, {"stream-finish": "MISSING", "json-finish": "MISSING"}),
    "drops-retry-after": (1, {"retry-after": "MISSING"}),
    "in-band-error": (0, {"in-band-error": "NOTE"}),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_anthropic_messages_probe_against_the_fake_gateway(
    name, gateway_session, tmp_path, monkeypatch
):
    s = gateway_session(load_scenario(GATEWAYS / f"{name}.yaml"))
    monkeypatch.setenv("PROBE_KEY", KEY)
    rc, doc = run_main(
        tmp_path, s.base_url, "--dialect", "anthropic_messages", "--api-key-env", "PROBE_KEY"
    )
    want_rc, diff = KNOWN[name]
    assert verdicts(doc) == {**ANTHROPIC, **diff} and rc == want_rc
    entries = s.journal()["entries"]
    # The history request has no Messages counterpart: the other seven went to /v1/messages.
    assert len(entries) == len(probe.PROBES) - 1
    assert {e["dialect"] for e in entries} == {"anthropic_messages"}
    assert entries[0]["headers"]["x-api-key"] == "[REDACTED]"  # the key in the dialect's header
    assert entries[0]["headers"]["anthropic-version"]
    assert doc["probe"]["dialect"] == "anthropic_messages"
    na = next(o for o in doc["observations"] if o["id"] == "reasoning-history")
    assert na["value"].startswith("not applicable to anthropic_messages: ")


def test_anthropic_messages_observations_name_the_wire(gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / "in-band-error.yaml"))
    _, doc = run_main(tmp_path, s.base_url, "--dialect", "anthropic_messages")
    values = {o["id"]: o["value"] for o in doc["observations"]}
    assert values["stream-done"] == "every stream ends with message_stop (2 of 2)"
    assert values["in-band-error"].startswith(
        "reasoning-stream: event: error after 8 events, then a clean close; no message_stop"
    )
    assert values["error-shape"].startswith(
        "bad-request: HTTP 400 application/json {type, error: {type, message}}"
    )
    # The report keeps the bytes as they came: Messages events, not the chat view.
    stream = next(x for x in doc["exchanges"] if x["name"] == "reasoning-stream")
    assert "event: content_block_delta" in stream["body"] and "choices" not in stream["body"]


def test_a_messages_recording_replays_byte_for_byte(gateway_session):
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    seen = Probe(s.base_url, "m", dialect="anthropic_messages", rate=1000).run()
    sc = recording(seen, "recorded", None, "anthropic_messages")
    assert {st["replay"]["dialect"] for st in sc["script"]} == {"anthropic_messages"}
    replayed = gateway_session(sc)
    again = Probe(replayed.base_url, "m", dialect="anthropic_messages", rate=1000).run()
    for a, o in zip(again, seen, strict=True):
        if o.name != "bad-request":
            assert a.body == o.body, o.name


@pytest.mark.parametrize("name", ["well-behaved", "never-finish-reason"])
def test_openai_responses_probe_against_the_fake_gateway(name, gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / f"{name}.yaml"))
    rc, doc = run_main(tmp_path, s.base_url, "--dialect", "openai_responses")
    want = dict(RESPONSES)
    if name == "never-finish-reason":  # no response.completed: no finish, and no usage either
        want.update({"stream-finish": "MISSING", "json-finish": "MISSING", "stream-usage": "NOTE"})
    assert verdicts(doc) == want and rc == (0 if name == "well-behaved" else 1)
    assert {e["dialect"] for e in s.journal()["entries"]} == {"openai_responses"}


@pytest.mark.parametrize("word", ["openai", "stream", "ready"])
def test_a_short_header_value_is_masked_but_cannot_garble_the_report(
    word, gateway_session, tmp_path, capsys
):
    # A routing value such as Portkey's provider name is a common word: it is masked wherever
    # it occurs, yet the report's own vocabulary (dialect, ids, names, keys) stays as written.
    # "openai" is in the dialect's name, "stream" in ids, names and keys, "ready" in the replies.
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    rec = tmp_path / "rec.yaml"
    rc, doc = run_main(
        tmp_path,
        s.base_url,
        "--header",
        f"X-Provider: {word}",
        "--dialect",
        "openai_responses",
        "--record",
        str(rec),
    )
    assert rc == 0 and doc["probe"]["dialect"] == "openai_responses"  # and it was valid
    assert verdicts(doc) == RESPONSES
    assert [x["name"] for x in doc["exchanges"]][:3] == [
        "short-stream",
        "reasoning-stream",
        "tool-stream",
    ]
    assert all("stream" in x for x in doc["exchanges"])
    # Outside the vocabulary, no string value the report holds has the word left in it.
    vocabulary = {doc["probe"]["dialect"], "X-Provider"}
    vocabulary |= {v for o in doc["observations"] for k in ("id", "title") for v in [o[k]]}
    vocabulary |= {x["name"] for x in doc["exchanges"]}
    vocabulary |= {e for o in doc["observations"] for e in o["evidence"]}
    left = [v for v in _strings(doc) if word in v and v not in vocabulary]
    assert left == [] and MASK in json.dumps(doc)
    assert MASK in (tmp_path / "r" / "probe.html").read_text("utf-8")  # rendered from the same
    replay = gateway_session(load_scenario(rec))  # still a valid scenario in its dialect
    again = Probe(replay.base_url, "m", dialect="openai_responses", rate=1000).run()
    assert next(x for x in again if x.name == "short-json").status == 200
