"""``conformance probe`` against the gateway personalities (known answers), record -> replay
byte for byte, budget and rate limit, errors, the key never written, and each observation on
hand-built exchanges (one that passes, one that fails)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from werkzeug import Response

from conformance import probe
from conformance.probe import Exchange, Probe, observe, recording
from fakes import load_scenario
from fakes.pytest_plugin import fake_gateway, sessions_on  # noqa: F401 (fixture)
from reports import ResultsError
from reports.probe import render_probe, validate_probe

GATEWAYS = Path(__file__).resolve().parent.parent / "scenarios" / "gateways"
KEY = "sk-probe-test-4f1c9e2ab7d3"


@pytest.fixture
def gateway_session(fake_gateway):  # noqa: F811 - the imported fixture
    """Factory of fake gateway sessions, dropped afterwards."""
    yield from sessions_on(fake_gateway)


def run_main(tmp_path: Path, base_url: str, *extra: str) -> tuple[int, dict]:
    rc = probe.main(
        ["--base-url", base_url, "--model", "m", "--rate", "1000", "--out", str(tmp_path / "r")]
        + list(extra)
    )
    doc = json.loads((tmp_path / "r" / "probe.json").read_text("utf-8"))
    return rc, doc


def verdicts(doc_or_obs) -> dict[str, str]:
    obs = doc_or_obs["observations"] if isinstance(doc_or_obs, dict) else doc_or_obs
    return {o["id"]: o["verdict"] for o in obs}


def value(doc, oid: str) -> str:
    return next(o["value"] for o in doc["observations"] if o["id"] == oid)


# -- personalities: known answers -------------------------------------------------------------

KNOWN = {
    "well-behaved": (0, {}),
    "never-finish-reason": (1, {"stream-finish": "MISSING", "json-finish": "MISSING"}),
    "drops-retry-after": (1, {"retry-after": "MISSING"}),
    "in-band-error": (0, {"in-band-error": "NOTE"}),
    "no-done": (0, {"stream-done": "NOTE"}),
}
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


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_personality_gives_its_known_answers(name, gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / f"{name}.yaml"))
    rc, doc = run_main(tmp_path, s.base_url)
    want_rc, diff = KNOWN[name]
    assert verdicts(doc) == {**ALL_OK, **diff}
    assert rc == want_rc
    validate_probe(doc)
    assert len(s.journal()["entries"]) == len(probe.PROBES)


def test_in_band_error_personality_describes_the_ending(gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / "in-band-error.yaml"))
    _, doc = run_main(tmp_path, s.base_url)
    v = value(doc, "in-band-error")
    assert "reasoning-stream: data: {error: ...} after 6 events, then a clean close" in v
    assert "no [DONE]; no finish_reason" in v


def test_drops_retry_after_says_no_hint_and_well_behaved_names_it(gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / "drops-retry-after.yaml"))
    _, doc = run_main(tmp_path, s.base_url)
    assert value(doc, "retry-after") == "Retry-After missing on rate-limit: no retry hint at all"
    s2 = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    _, doc2 = run_main(tmp_path / "2", s2.base_url)
    assert value(doc2, "retry-after") == "rate-limit: retry-after: 3"


def test_html_report_has_every_observation_in_the_report_look(gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / "never-finish-reason.yaml"))
    run_main(tmp_path, s.base_url)
    html = (tmp_path / "r" / "probe.html").read_text("utf-8")
    assert '<tr class="obs" id="o-stream-finish" data-verdict="MISSING">' in html
    assert '<span class="v v-FAIL">MISSING</span>' in html  # the conformance report's classes
    assert "font: 14px/1.45 system-ui" in html  # its stylesheet
    assert html.count('<tr class="obs"') == len(ALL_OK)


# -- record -> replay --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["well-behaved", "in-band-error", "never-finish-reason"])
def test_recording_replays_byte_for_byte(name, gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / f"{name}.yaml"))
    rec = tmp_path / "recorded.yaml"
    rc, doc = run_main(tmp_path, s.base_url, "--record", str(rec))
    sent = [e["response"] for e in s.journal()["entries"]]
    replayed = gateway_session(load_scenario(rec))
    again = Probe(replayed.base_url, "m", rate=1000).run()
    originals = Probe(s.base_url, "m", rate=1000).run()
    assert [x.name for x in again] == [x.name for x in originals]
    for a, o, wire in zip(again, originals, sent, strict=True):
        if o.name == "bad-request":
            continue  # refused before any step: nothing to replay
        assert a.status == o.status
        assert a.body == o.body, o.name
        assert a.body == wire["sent"].encode(), o.name  # what the probed gateway really sent
        kept = {k: v for k, v in o.headers.items() if k not in probe._FRAMING_HEADERS}
        assert {k: a.headers.get(k) for k in kept} == kept
    # The replay is indistinguishable to the probe.
    again_doc = probe.probe_document(
        again,
        base_url="http://x",
        model="m",
        started="",
        finished="",
        max_requests=8,
        rate=1,
        secrets=(),
    )
    assert verdicts(again_doc) == verdicts(doc)


def test_a_fault_added_to_a_recording_shows_in_the_probe(gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    sc = recording(Probe(s.base_url, "m", rate=1000).run(), "recorded", None)
    step = next(st for st in sc["script"] if st["match"]["contains"] == "probe:reasoning")
    step["fault"] = {"cut": {"after_events": 4, "mode": "close"}}
    (tmp_path / "recorded.yaml").write_text(yaml.safe_dump(sc), encoding="utf-8")
    replayed = gateway_session(load_scenario(tmp_path / "recorded.yaml"))
    ex = Probe(replayed.base_url, "m", rate=1000).run()
    r = next(x for x in ex if x.name == "reasoning-stream")
    assert r.end == "incomplete" and len(r.events()) == 4
    assert verdicts(observe(ex))["stream-finish"] == "MISSING"


def test_recording_splits_no_character_and_refuses_non_utf8():
    ex = Exchange("short-json", False, {}, 200, {"content-type": "application/json"})
    ex.chunks = ["é".encode()[:1], "é".encode()[1:] + b"!"]
    sc = recording([ex], "r", None)
    assert sc["script"][0]["replay"]["chunks"] == ["é!"]
    ex.chunks = [b"\xff"]
    with pytest.raises(probe.ProbeError, match="not UTF-8"):
        recording([ex], "r", None)


# -- budget and rate limit ---------------------------------------------------------------------


def test_budget_caps_the_requests_sent(gateway_session, tmp_path):
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    rc, doc = run_main(tmp_path, s.base_url, "--max-requests", "3")
    assert len(s.journal()["entries"]) == 3 and doc["probe"]["requests_sent"] == 3
    v = verdicts(doc)
    assert v["retry-after"] == v["reasoning-history"] == v["json-finish"] == "NOT_SEEN"
    assert v["stream-finish"] == "OK" and rc == 0


class FakeClock:
    def __init__(self):
        self.now, self.slept = 100.0, []

    def clock(self):
        return self.now

    def sleep(self, s):
        self.slept.append(s)
        self.now += s


@pytest.mark.parametrize(("rate", "gap"), [(2.0, 0.5), (0.25, 4.0)])
def test_rate_limit_spaces_request_starts(rate, gap, gateway_session):
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    fc = FakeClock()
    p = Probe(s.base_url, "m", rate=rate, clock=fc.clock, sleep=fc.sleep)
    p.run()
    starts = p.sent_at
    assert len(starts) == len(probe.PROBES)
    assert all(b - a == pytest.approx(gap) for a, b in zip(starts, starts[1:], strict=False))
    assert fc.slept == [pytest.approx(gap)] * (len(starts) - 1)


def test_rate_limit_does_not_wait_when_requests_are_slow_enough(gateway_session):
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    fc = FakeClock()

    def slow_clock():
        fc.now += 10.0  # each request "takes" longer than the gap
        return fc.now

    p = Probe(s.base_url, "m", rate=1.0, clock=slow_clock, sleep=fc.sleep)
    p.run()
    assert fc.slept == []


# -- errors ------------------------------------------------------------------------------------


def test_unreachable_gateway_is_exit_2(tmp_path, capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rc, doc = run_main(tmp_path, f"http://127.0.0.1:{port}/v1")
    assert rc == 2 and doc["outcome"] == "error"
    assert "gateway unreachable at http://127.0.0.1" in capsys.readouterr().err
    assert doc["probe"]["requests_sent"] == 1


def test_key_refused_is_exit_2(gateway_session, tmp_path, capsys, monkeypatch):
    sc = {
        "id": "refuses",
        "criteria": [],
        "prompt": "p",
        "script": [{"times": 100, "fault": {"http_error": {"status": 401}}}],
    }
    s = gateway_session(sc)
    monkeypatch.setenv("PROBE_KEY", KEY)
    rc, _ = run_main(tmp_path, s.base_url, "--api-key-env", "PROBE_KEY")
    assert rc == 2 and "refused the key (401)" in capsys.readouterr().err
    assert len(s.journal()["entries"]) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "m"], "--base-url"),
        (["--base-url", "ftp://x", "--model", "m"], "must be http(s)"),
        (["--base-url", "http://x", "--model", "m", "--rate", "0"], "--rate must be > 0"),
        (["--base-url", "http://x", "--model", "m", "--max-requests", "-1"], "--max-requests"),
        (["--base-url", "http://x", "--model", "m", "--api-key-env", "NO_SUCH_VAR_9"], "NO_SUCH"),
        (["--base-url", "http://x", "--model", "m", "--record", "Bad_Name.yaml"], "file stem"),
    ],
)
def test_bad_usage_is_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_VAR_9", raising=False)
    assert probe.main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err


# -- the key never appears ---------------------------------------------------------------------


def _all_output(tmp_path: Path, captured) -> str:
    files = [p.read_text("utf-8") for p in tmp_path.rglob("*") if p.is_file()]
    return "\n".join(files + [captured.out, captured.err])


def test_key_never_appears_even_when_the_gateway_echoes_it(
    httpserver, tmp_path, capsys, monkeypatch
):
    def echo(request):
        auth = request.headers.get("Authorization", "")
        body = {"error": {"message": f"bad key {auth}", "type": "x"}, "seen": auth}
        return Response(
            json.dumps(body), status=400, headers={"X-Echo": auth}, content_type="application/json"
        )

    httpserver.expect_request("/v1/chat/completions").respond_with_handler(echo)
    monkeypatch.setenv("PROBE_KEY", KEY)
    rc, _ = run_main(
        tmp_path,
        httpserver.url_for("/v1"),
        "--api-key-env",
        "PROBE_KEY",
        "--record",
        str(tmp_path / "rec.yaml"),
    )
    out = _all_output(tmp_path, capsys.readouterr())
    assert rc == 1  # the history request was refused
    assert "[REDACTED]" in out  # the echo reached the outputs, scrubbed
    assert KEY not in out and KEY[3:] not in out


def test_key_never_appears_with_the_fake_gateway(gateway_session, tmp_path, capsys, monkeypatch):
    s = gateway_session(load_scenario(GATEWAYS / "well-behaved.yaml"))
    monkeypatch.setenv("PROBE_KEY", KEY)
    rc, _ = run_main(
        tmp_path, s.base_url, "--api-key-env", "PROBE_KEY", "--record", str(tmp_path / "rec.yaml")
    )
    assert rc == 0
    assert s.journal()["entries"][0]["headers"]["authorization"] == "[REDACTED]"
    assert KEY not in _all_output(tmp_path, capsys.readouterr())


# -- observations on hand-built exchanges: one passing, one failing each ------------------------


def sse(*payloads, done=True) -> Exchange:
    body = "".join(f"data: {json.dumps(p) if not isinstance(p, str) else p}\n\n" for p in payloads)
    if done:
        body += "data: [DONE]\n\n"
    return body.encode()


def stream_ex(name, *payloads, done=True, end="complete") -> Exchange:
    x = Exchange(name, True, {}, 200, {"content-type": "text/event-stream"}, end=end)
    x.chunks = [sse(*payloads, done=done)]
    return x


def json_ex(name, body, status=200) -> Exchange:
    x = Exchange(name, False, {}, status, {"content-type": "application/json"})
    x.chunks = [json.dumps(body).encode() if not isinstance(body, bytes) else body]
    return x


def ch(delta=None, finish=None, usage=None):
    d = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage:
        d["usage"] = usage
    return d


def test_stream_finish_ok_note_and_missing():
    ok = stream_ex("short-stream", ch({"content": "hi"}), ch(finish="stop"))
    trailing = stream_ex("short-stream", ch({"content": "hi"}), ch(finish="stop"), ch())
    none = stream_ex("short-stream", ch({"content": "hi"}))
    assert verdicts(observe([ok]))["stream-finish"] == "OK"
    assert verdicts(observe([trailing]))["stream-finish"] == "NOTE"
    assert verdicts(observe([none]))["stream-finish"] == "MISSING"


def test_done_and_usage():
    ok = stream_ex("short-stream", ch({"content": "a"}), ch(finish="stop", usage={"x": 1}))
    bare = stream_ex("short-stream", ch({"content": "a"}), ch(finish="stop"), done=False)
    assert verdicts(observe([ok]))["stream-done"] == "OK"
    assert verdicts(observe([ok]))["stream-usage"] == "OK"
    assert verdicts(observe([bare]))["stream-done"] == "NOTE"
    assert verdicts(observe([bare]))["stream-usage"] == "NOTE"


@pytest.mark.parametrize(
    ("key", "want"), [("reasoning_content", "OK"), ("reasoning", "MISSING"), (None, "NOT_SEEN")]
)
def test_reasoning_field(key, want):
    delta = {key: "think"} if key else {"content": "x"}
    x = stream_ex("reasoning-stream", ch(delta), ch(finish="stop"))
    assert verdicts(observe([x]))["reasoning-field"] == want


def test_tool_chunking_ok_and_missing():
    head = {
        "tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
        ]
    }
    good = stream_ex(
        "tool-stream",
        ch(head),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}),
        ch(finish="tool_calls"),
    )
    bad = stream_ex(
        "tool-stream",
        ch(head),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": '}}]}),
        ch(finish="tool_calls"),
    )
    assert verdicts(observe([good]))["tool-chunking"] == "OK"
    v = next(o["value"] for o in observe([good]) if o["id"] == "tool-chunking")
    assert "2 fragments, id and name in the first fragment" in v and "joined: valid JSON" in v
    assert verdicts(observe([bad]))["tool-chunking"] == "MISSING"


def test_json_finish_history_and_error_shape():
    msg = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}
    nofin = {"choices": [{"message": {"content": "x"}, "finish_reason": None}]}
    assert verdicts(observe([json_ex("short-json", msg)]))["json-finish"] == "OK"
    assert verdicts(observe([json_ex("short-json", nofin)]))["json-finish"] == "MISSING"
    assert verdicts(observe([json_ex("history", msg)]))["reasoning-history"] == "OK"
    refused = json_ex("history", {"error": {"message": "reasoning_content not allowed"}}, 400)
    assert verdicts(observe([refused]))["reasoning-history"] == "MISSING"
    good = json_ex("bad-request", {"error": {"message": "m", "type": "t"}}, 400)
    odd = json_ex("bad-request", b"Bad Request", 400)
    assert verdicts(observe([good]))["error-shape"] == "OK"
    assert verdicts(observe([odd]))["error-shape"] == "NOTE"
    assert "not JSON: 'Bad Request'" in next(
        o["value"] for o in observe([odd]) if o["id"] == "error-shape"
    )


def test_retry_after_ok_missing_moved_and_not_seen():
    def r429(headers):
        x = json_ex("rate-limit", {"error": {"message": "slow"}}, 429)
        x.headers.update(headers)
        return x

    assert verdicts(observe([r429({"retry-after": "2"})]))["retry-after"] == "OK"
    assert verdicts(observe([r429({"retry-after-ms": "200"})]))["retry-after"] == "OK"
    moved = observe([r429({"llm_provider-retry-after": "2"})])
    assert verdicts(moved)["retry-after"] == "MISSING"
    assert "llm_provider-retry-after: 2" in next(
        o["value"] for o in moved if o["id"] == "retry-after"
    )
    assert verdicts(observe([]))["retry-after"] == "NOT_SEEN"


def test_empty_stream_and_in_band_error():
    empty = stream_ex("reasoning-stream", ch(finish="stop"), ch())
    broken = stream_ex(
        "reasoning-stream", ch({"content": "a"}), {"error": {"message": "x"}}, done=False
    )
    assert verdicts(observe([empty]))["empty-stream"] == "NOTE"
    assert verdicts(observe([broken]))["in-band-error"] == "NOTE"
    assert verdicts(observe([broken]))["stream-finish"] == "NOT_SEEN"  # a failed stream is no norm
    assert verdicts(observe([empty]))["in-band-error"] == "NOT_SEEN"


def test_report_schema_refuses_a_bad_document(tmp_path):
    with pytest.raises(ResultsError, match=r"at \$: 'observations' is a required property"):
        validate_probe(
            {
                "format": "gateway-probe",
                "version": 1,
                "probe": {},
                "outcome": "ok",
                "error": None,
                "exchanges": [],
            }
        )
    with pytest.raises(ResultsError, match="verdict"):
        render_probe(
            {
                "format": "gateway-probe",
                "version": 1,
                "probe": {
                    "base_url": "u",
                    "model": "m",
                    "started": "",
                    "finished": "",
                    "requests_sent": 0,
                    "max_requests": 0,
                    "rate_per_s": 1,
                },
                "outcome": "ok",
                "error": None,
                "exchanges": [],
                "observations": [
                    {
                        "id": "x",
                        "title": "t",
                        "relied_on": True,
                        "verdict": "PASS",
                        "value": "",
                        "evidence": [],
                    }
                ],
            },
            tmp_path,
        )
