"""The failover probe: a healthy test proxy passes every case, each of its switchable bugs is
caught by its case, the judge on hand-built replies, the config writers, the report and the docs.

Everything on loopback, port 0, with the fake upstreams and the proxy on one scaled clock
(Retry-After 2 s, the 4 s attempt timeout and the 60 s stall become 200 ms, 400 ms and 6 s:
far enough apart that a loaded machine does not blur them)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from failover_proxy import proxy_target

from conformance.probe.exchange import Exchange
from conformance.probe.failover import failover_document, run_failover
from conformance.probe.failover_cases import (
    CASES,
    PRIMARY_TEXT,
    SECONDARY_TEXT,
    Policy,
)
from conformance.probe.failover_config import Route, litellm_config, portkey_config
from conformance.probe.failover_judge import attempts, client_facts, judge
from fakes.pytest_plugin import fake_gateway  # noqa: F401 (fixture)
from reports import ResultsError
from reports.probe_failover import FAILOVER_VERDICTS, render_failover, validate_failover

SCALE = 0.1
POLICY = Policy(timeout_s=4.0)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "probe.md"
BY_ID = {c.id: c for c in CASES}


def run(gw, bugs=(), only=None):
    cases = [BY_ID[i] for i in only] if only else CASES
    with proxy_target(bugs=set(bugs), time_scale=SCALE, policy=POLICY) as t:
        doc = run_failover(
            gw, t, POLICY, cases=cases, time_scale=SCALE, client_timeout=3.0, settle_s=0.1
        )
    assert doc["error"] is None
    validate_failover(doc)
    return doc, {c["id"]: c["verdict"] for c in doc["cases"]}


def test_healthy_proxy_passes_every_case(fake_gateway, tmp_path):  # noqa: F811
    doc, got = run(fake_gateway)
    assert got == {c.id: "PASS" for c in CASES}
    assert doc["outcome"] == "pass"
    by = {c["id"]: c for c in doc["cases"]}
    # Recovered from the secondary where the primary fails every time, from the primary's retry
    # where it fails once; the refused requests sent once, to the primary only.
    assert by["cut-after-content"]["client"]["text"] == SECONDARY_TEXT
    assert by["429-no-retry-after"]["client"]["text"] == PRIMARY_TEXT
    ups = [a["upstream"] for a in by["bad-request"]["attempts"]]
    assert ups == ["primary"]
    # The honest retry waited Retry-After (2 s on the scaled clock: 100 ms).
    tries = by["429-retry-after"]["attempts"]
    assert [a["status"] for a in tries] == [429, 200]
    assert tries[1]["t_arrival_ms"] - tries[0]["t_headers_ms"] >= 2 * 1000 * SCALE * 0.9


CAUGHT = {
    "retry_400": {"bad-request": "UNSAFE", "context-length": "UNSAFE"},
    "swallow_cut": {"cut-after-content": "UNSAFE", "cut-before-content": "UNSAFE"},
    "ignore_retry_after": {"429-retry-after": "RETRY-TOO-SOON"},
    "never_fallback": {
        "500-burst": "NO-RECOVERY",
        "503-burst": "NO-RECOVERY",
        "reset-before-headers": "NO-RECOVERY",
        "cut-before-content": "NO-RECOVERY",
        "stall-after-headers": "NO-RECOVERY",
        "in-band-error": "NO-RECOVERY",
        "end-without-finish": "NO-RECOVERY",
    },
}


@pytest.mark.parametrize("bug", sorted(CAUGHT))
def test_each_bug_is_caught_by_its_case(bug, fake_gateway):  # noqa: F811
    doc, got = run(fake_gateway, [bug], only=[*CAUGHT[bug], "429-no-retry-after"])
    assert got == {**CAUGHT[bug], "429-no-retry-after": "PASS"}


def test_swallowed_cut_evidence_names_the_partial_text(fake_gateway):  # noqa: F811
    doc, _ = run(fake_gateway, ["swallow_cut"], only=["cut-after-content"])
    c = doc["cases"][0]
    assert c["client"]["finish_reason"] == "stop"
    assert c["client"]["text_is"].startswith("the first 16 of")
    assert [a["upstream"] for a in c["attempts"]] == ["primary"]
    assert c["attempts"][0]["end"] in ("reset", "close")


# -- the judge on hand-built replies ----------------------------------------------------------


def sse(*events: dict | str, end: str = "complete", status: int = 200) -> Exchange:
    body = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    ex = Exchange("x", True, {}, status=status, headers={"content-type": "text/event-stream"})
    ex.chunks, ex.end = [body.encode()], end
    return ex


def chunk(text: str | None = None, finish: str | None = None) -> dict:
    delta = {"content": text} if text is not None else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def tried(*statuses, upstream="primary", gap_ms=5.0, retry_after=None, finish=True):
    out, t = [], 1.0
    for s in statuses:
        out.append(
            {
                "upstream": upstream,
                "t_arrival_ms": t,
                "t_headers_ms": t + 1,
                "t_end_ms": t + 2,
                "status": s,
                "retry_after": retry_after if s == 429 else None,
                "fault": None,
                "end": "complete",
                "events_sent": None,
                "sent_bytes": None,
                "finish_sent": finish and s == 200,
            }
        )
        t += gap_ms
    return out


def test_spliced_reply_with_finish_is_unsafe():
    f = client_facts(sse(chunk(PRIMARY_TEXT[:10]), chunk(SECONDARY_TEXT), chunk(finish="stop")))
    assert f["outcome"] == "marked-partial"
    assert f["text_is"].startswith("spliced: the first 10 characters of the primary")
    v, _ = judge(
        BY_ID["cut-after-content"], Policy(), f, tried(200), tried(200, upstream="secondary")
    )
    assert v == "UNSAFE"


def test_clean_end_without_finish_is_truncated_and_whole_reply_passes():
    f = client_facts(sse(chunk(PRIMARY_TEXT[:10]), "[DONE]"))
    assert (f["outcome"], f["done"]) == ("unmarked", True)
    assert judge(BY_ID["cut-after-content"], Policy(), f, tried(200), [])[0] == "TRUNCATED"
    whole = client_facts(sse(chunk(SECONDARY_TEXT), chunk(finish="stop"), "[DONE]"))
    sec = tried(200, upstream="secondary")
    assert judge(BY_ID["cut-after-content"], Policy(), whole, tried(200), sec)[0] == "PASS"


def test_finish_reason_the_upstream_never_sent_is_unsafe():
    whole = client_facts(sse(chunk(PRIMARY_TEXT), chunk(finish="stop"), "[DONE]"))
    case = BY_ID["end-without-finish"]
    assert judge(case, Policy(), whole, tried(200, finish=False), [])[0] == "UNSAFE"
    assert judge(case, Policy(), whole, tried(200), [])[0] == "PASS"


def test_error_after_content_passes_error_before_content_does_not():
    after = client_facts(sse(chunk(PRIMARY_TEXT[:8]), end="reset"))
    assert (after["outcome"], after["content_before_failure"]) == ("broken", 8)
    assert judge(BY_ID["cut-after-content"], Policy(), after, tried(200), [])[0] == "PASS"
    before = client_facts(sse({"error": {"message": "upstream gone"}}, chunk(PRIMARY_TEXT)))
    assert before["outcome"] == "in-band-error"
    assert judge(BY_ID["in-band-error"], Policy(), before, tried(200), [])[0] == "NO-RECOVERY"
    bad = client_facts(sse("{not json", chunk(PRIMARY_TEXT), chunk(finish="stop")))
    assert bad["outcome"] == "malformed"
    assert judge(BY_ID["malformed-chunk"], Policy(), bad, tried(200), [])[0] == "NO-RECOVERY"
    hang = client_facts(sse(chunk(PRIMARY_TEXT[:8]), end="timeout"))
    assert judge(BY_ID["stall-after-headers"], Policy(), hang, tried(200), [])[0] == "NO-RECOVERY"


def test_no_recovery_configured_makes_a_clear_error_pass():
    err = client_facts(sse(status=503))
    policy = Policy(retries=0, fallback=False)
    assert judge(BY_ID["503-burst"], policy, err, tried(503), [])[0] == "PASS"
    assert judge(BY_ID["503-burst"], Policy(), err, tried(503, 503), [])[0] == "NO-RECOVERY"


def test_retry_after_measured_on_the_scaled_clock():
    ok = client_facts(sse(chunk(PRIMARY_TEXT), chunk(finish="stop")))
    case = BY_ID["429-retry-after"]
    soon = tried(429, 200, gap_ms=50.0, retry_after="2")
    late = tried(429, 200, gap_ms=2100.0, retry_after="2")
    assert judge(case, Policy(), ok, soon, [])[0] == "RETRY-TOO-SOON"
    assert judge(case, Policy(), ok, late, [])[0] == "PASS"
    assert judge(case, Policy(), ok, soon, [], time_scale=0.01)[0] == "PASS"


def test_non_retryable_resent_anywhere_is_unsafe_and_nothing_reached_is_said():
    err = client_facts(sse(status=400))
    case = BY_ID["context-length"]
    assert judge(case, Policy(), err, tried(400), [])[0] == "PASS"
    assert judge(case, Policy(), err, tried(400, 400), [])[0] == "UNSAFE"
    assert judge(case, Policy(), err, tried(400), tried(400, upstream="secondary"))[0] == "UNSAFE"
    assert judge(case, Policy(), err, [], [])[0] == "NOT-REACHED"


def test_attempts_read_the_journal_in_ms_from_the_send():
    j = {
        "entries": [
            {"kind": "models"},
            {
                "kind": "chat",
                "t_arrival_ns": 3_000_000,
                "fault": "http_error",
                "response": {
                    "status": 429,
                    "headers": {"Retry-After": "2"},
                    "t_headers_ns": 4_000_000,
                    "t_end_ns": 5_000_000,
                    "end": "complete",
                },
            },
        ]
    }
    (a,) = attempts("primary", j, 1_000_000)
    assert (a["t_arrival_ms"], a["t_headers_ms"], a["t_end_ms"]) == (2.0, 3.0, 4.0)
    assert (a["status"], a["retry_after"], a["fault"]) == (429, "2", "http_error")


# -- config writers -----------------------------------------------------------------------------


ROUTES = {"500-burst": Route("http://127.0.0.1:1/s/a/v1", "http://127.0.0.1:1/s/b/v1")}


def test_litellm_config_maps_the_policy():
    cfg = yaml.safe_load(litellm_config(Policy(retries=2, timeout_s=4.0), ROUTES, "MASTER"))
    names = [m["model_name"] for m in cfg["model_list"]]
    assert names == ["500-burst", "500-burst-secondary"]
    assert cfg["router_settings"]["num_retries"] == 2
    assert cfg["router_settings"]["fallbacks"] == [{"500-burst": ["500-burst-secondary"]}]
    params = cfg["model_list"][0]["litellm_params"]
    assert (params["api_base"], params["max_retries"], params["stream_timeout"]) == (
        ROUTES["500-burst"].primary,
        0,
        4.0,
    )
    assert cfg["general_settings"]["master_key"] == "os.environ/MASTER"
    no_fb = yaml.safe_load(litellm_config(Policy(fallback=False), ROUTES, "MASTER"))
    assert "fallbacks" not in no_fb["router_settings"] and len(no_fb["model_list"]) == 1


def test_portkey_config_maps_the_policy():
    cfg = json.loads(portkey_config(Policy(retry_on=(429,)), ROUTES["500-burst"], "sk-k"))
    assert cfg["strategy"] == {"mode": "fallback", "on_status_codes": [429, 500, 502, 503, 504]}
    hosts = [t["custom_host"] for t in cfg["targets"]]
    assert hosts == [ROUTES["500-burst"].primary, ROUTES["500-burst"].secondary]
    assert cfg["targets"][0]["retry"] == {
        "attempts": 1,
        "on_status_codes": [429],
        "use_retry_after_header": True,
    }
    assert cfg["targets"][0]["request_timeout"] == 3000


# -- report -------------------------------------------------------------------------------------


def test_report_table_and_timeline_and_no_key(fake_gateway, tmp_path):  # noqa: F811
    doc, _ = run(fake_gateway, ["never_fallback"], only=["503-burst", "bad-request"])
    key = "sk-failover-test-proxy-key"
    doc["probe"]["config"] += f"\n# {key}"  # as a gateway config holding the key would
    target = SimpleNamespace(name="test-proxy", version="0", key=key, secrets=[])
    clean = failover_document(
        target,
        Policy(),
        doc["cases"],
        config=doc["probe"]["config"],
        started="s",
        finished="f",
        time_scale=SCALE,
    )
    assert key not in json.dumps(clean)
    page = render_failover(
        [clean, {**clean, "probe": {**clean["probe"], "gateway": "b"}}], tmp_path
    )
    html = page.read_text("utf-8")
    assert key not in html
    matrix = html[html.index('id="failover-matrix"') : html.index("</table>")]
    assert "test-proxy" in matrix and "<th>b 0</th>" in matrix
    assert matrix.count("NO-RECOVERY") == 2 and matrix.count(">PASS<") == 2
    # The 503 case's timeline: the client and the primary's two attempts, no secondary.
    sec = html[html.index('id="c-test-proxy-503-burst"') :]
    sec = sec[: sec.index("</table>")]
    assert re.findall(r'data-who="(\w+)"', sec) == ["client", "primary", "primary"]
    assert (tmp_path / "failover-test-proxy.json").exists()


def test_invalid_document_is_refused_with_its_path():
    with pytest.raises(ResultsError, match=r"\$\.cases\[0\]\.verdict"):
        validate_failover(
            {
                "format": "gateway-failover-probe",
                "version": 1,
                "probe": {
                    "gateway": "g",
                    "gateway_version": "1",
                    "policy": Policy().as_dict(),
                    "config": "",
                    "started": "s",
                    "finished": "f",
                    "time_scale": 1,
                    "harness_version": "0",
                },
                "outcome": "pass",
                "error": None,
                "totals": dict.fromkeys(FAILOVER_VERDICTS, 0),
                "cases": [
                    {
                        "id": "x",
                        "title": "t",
                        "kind": "recoverable",
                        "expect": "e",
                        "verdict": "FINE",
                        "value": "",
                        "client": {**client_facts(sse(status=400)), "body": ""},
                        "attempts": [],
                    }
                ],
            }
        )


# -- docs -----------------------------------------------------------------------------------------


def _doc_table_ids(heading: str) -> list[str]:
    text = DOCS.read_text("utf-8")
    part = text[text.index(heading) :]
    rows = []
    for line in part.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        first = line.split("|")[1].strip()
        if first.startswith("`"):
            rows.append(first.strip("`"))
    return rows


def test_docs_list_every_verdict_and_case():
    assert _doc_table_ids("### Failover verdicts") == list(FAILOVER_VERDICTS)
    assert _doc_table_ids("### Failover cases") == [c.id for c in CASES]


# -- the command line ---------------------------------------------------------------------------


PROXY = Path(__file__).resolve().parent / "failover_proxy.py"


def cli(tmp_path, *extra: str) -> int:
    from conformance.cli import main

    cmd = f"{sys.executable} {PROXY} --config {{config}} --port {{port}} --time-scale {SCALE}"
    return main(
        ["probe", "failover", "--kind", "proxy", "--name", "proxy", "--out", str(tmp_path)]
        + ["--time-scale", str(SCALE), "--client-timeout", "3", "--timeout", "4"]
        + ["--gateway-command", cmd + "".join(f" {e}" for e in extra)]
        + ["--cases", "429-retry-after,bad-request"]
    )


def test_command_line_starts_the_gateway_and_judges_it(tmp_path):
    assert cli(tmp_path / "ok") == 0
    doc = json.loads((tmp_path / "ok" / "failover-proxy.json").read_text("utf-8"))
    assert {c["id"]: c["verdict"] for c in doc["cases"]} == {
        "429-retry-after": "PASS",
        "bad-request": "PASS",
    }
    assert (tmp_path / "ok" / "failover.html").exists()
    assert cli(tmp_path / "bug", "--bug", "retry_400") == 1
    doc = json.loads((tmp_path / "bug" / "failover-proxy.json").read_text("utf-8"))
    assert {c["id"]: c["verdict"] for c in doc["cases"]}["bad-request"] == "UNSAFE"


def test_command_line_bad_usage_is_exit_2(tmp_path, capsys):
    from conformance.probe import main

    base = ["failover", "--kind", "proxy", "--out", str(tmp_path)]
    assert main([*base, "--gateway-command", "x --port {port}"]) == 2
    assert "{config}" in capsys.readouterr().err
    assert main([*base, "--gateway-command", "x {config} {port}", "--cases", "nope"]) == 2
    assert "unknown case(s) nope" in capsys.readouterr().err
    assert main([*base, "--gateway-command", "x {config} {port}", "--retry-on", "4x"]) == 2
    # A gateway that exits at once: the report says so, exit 2.
    assert main([*base, "--gateway-command", f"{sys.executable} -c pass {{config}} {{port}}"]) == 2
    assert "exited with status 0" in capsys.readouterr().err
