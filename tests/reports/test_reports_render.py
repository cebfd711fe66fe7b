"""The rendered report read back with an HTML parser, junitparser and plain text checks."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import junitparser
import pytest
from reports_htmlcheck import read_text, scan, scenario_pages
from reports_sample import HOSTILE, SECRET, build_sample

from reports import main, render, render_junit, render_markdown

SAMPLE = Path(__file__).with_name("sample_results.json")
EXTERNAL = ("http:", "https:", "//", "javascript:", "data:", "ftp:", "file:")


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text("utf-8"))


@pytest.fixture
def rendered(tmp_path: Path, sample: dict) -> Path:
    out = tmp_path / "report"
    index = render([copy.deepcopy(sample)], out, secrets=[SECRET])
    assert index == out / "index.html"
    return out


def _pages(out: Path) -> list[Path]:
    return [
        out / "index.html",
        *sorted((out / "criteria").glob("*.html")),
        *sorted((out / "scenarios").glob("*/*.html")),
    ]


def test_index_lists_every_criterion_with_verdicts(rendered, sample):
    page = scan((rendered / "index.html").read_text("utf-8"))
    rows = {a["id"]: a for tag, a in page.tags if tag == "tr" and "crit" in (a.get("class") or "")}
    assert set(rows) == {f"c-{c['id']}" for c in sample["catalogue"]}
    for c in sample["catalogue"]:
        got = rows[f"c-{c['id']}"]["data-verdicts"].split()
        want = [a["criteria"][c["id"]]["verdict"] for a in sample["agents"]]
        assert got == want, c["id"]
        assert rows[f"c-{c['id']}"]["data-level"] == c["level"]
    text = "".join(page.text)
    # The MUST-unsupported line: flaky has TOL-01 (MUST) unsupported, reference none.
    assert "Agent reference: 0 MUST criteria UNSUPPORTED" in " ".join(text.split())
    assert "Agent flaky: 1 MUST criteria UNSUPPORTED (TOL-01)" in " ".join(text.split())


def test_criterion_pages_exist_with_verdicts(rendered, sample):
    for c in sample["catalogue"]:
        page = scan((rendered / "criteria" / f"{c['id']}.html").read_text("utf-8"))
        text = " ".join("".join(page.text).split())
        assert f"{c['id']}: {c['title']}" in text
        for a in sample["agents"]:
            v = a["criteria"][c["id"]]["verdict"]
            assert f"Agent {a['name']}: {v}" in text
            sid = a["criteria"][c["id"]]["scenarios"][0]["id"]
            assert f"conformance run --scenario {sid}" in text


def test_links_resolve_and_nothing_external(rendered):
    ids = {p: scan(p.read_text("utf-8")).ids for p in _pages(rendered)}
    for p in _pages(rendered):
        s = scan(p.read_text("utf-8"))
        for u in s.urls:
            pytest.fail(f"{p.name}: CSS url({u})")
        for link in s.links:
            assert not link.lower().startswith(EXTERNAL), f"{p.name}: {link}"
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, link
            target = (p.parent / unquote(parts.path)).resolve() if parts.path else p
            assert target.is_file(), f"{p.name}: {link} -> missing {target}"
            if parts.fragment:
                assert parts.fragment in ids[target], f"{p.name}: {link} -> no id"
        raw = p.read_text("utf-8")
        assert "http://" not in raw and "https://" not in raw, p.name


def test_cut_point_and_events_marked(rendered):
    # The evidence is on the scenario's page, one link from the criterion's.
    (own, *_) = scenario_pages(rendered / "criteria" / "STR-01.html")
    page = scan(own.read_text("utf-8"))
    text = "".join(page.text)
    assert "connection cut at byte 20" in text
    classes = [a.get("class") or "" for t, a in page.tags if t == "tr"]
    assert "meta" in classes and "removed" in classes
    assert any("bar fault" in (a.get("class") or "") for t, a in page.tags if t == "div")


def test_hostile_text_is_escaped(rendered):
    for p in _pages(rendered):
        raw = p.read_text("utf-8")
        s = scan(raw)
        # Exactly the report's own inline scripts: the filter on the index, the font check
        # of a criterion page (its source names a seed), none on a scenario page; no img at all.
        scripts = [a for t, a in s.tags if t == "script"]
        if p.name == "index.html":
            (body,) = re.findall(r"<script>(.*?)</script>", raw, re.S)
            assert "PWNED" not in body and "f-verdict" in body
        elif p.parent.name == "criteria":
            assert scripts == [{"src": "../report.js"}], p
        else:
            assert scripts == [], p
        assert not [t for t, _ in s.tags if t == "img"]
        assert not any(k.startswith("on") for _, a in s.tags for k in a)
    crit = (rendered / "criteria" / "RTY-01.html").read_text("utf-8")
    assert HOSTILE in "".join(scan(crit).text)  # shown as text


def test_secrets_never_written(rendered):
    files = [p for p in rendered.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"index.html", "junit.xml", "summary.md"}
    assert any(p.name.endswith(".json.xz") for p in files)  # the evidence, read decompressed
    for p in files:
        data = read_text(p)
        assert SECRET not in data, p


def test_secret_headers_redacted_without_being_named(tmp_path, sample):
    render([sample], tmp_path / "r")  # no secrets given
    (own, *_) = scenario_pages(tmp_path / "r" / "criteria" / "RTY-01.html")
    page = own.read_text("utf-8")
    assert f"Bearer {SECRET}" not in page
    assert "authorization: [REDACTED]" in "".join(scan(page).text)
    assert f"x-api-key: {SECRET}" not in page
    for evidence in (tmp_path / "r" / "evidence").rglob("*.json.xz"):
        data = read_text(evidence)
        assert f"Bearer {SECRET}" not in data, evidence
        assert f"x-api-key: {SECRET}" not in data
    whole = read_text(next((tmp_path / "r" / "evidence").rglob("*.json.xz")))
    assert '"authorization": "[REDACTED]"' in whole


def test_junit_counts(rendered, sample):
    xml = junitparser.JUnitXml.fromfile(str(rendered / "junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {a["name"] for a in sample["agents"]}
    for a in sample["agents"]:
        suite = suites[a["name"]]
        kinds = {"failure": 0, "error": 0, "skipped": 0, "passed": 0}
        names = set()
        for case in suite:
            names.add((case.classname, case.name))
            res = case.result
            kinds[type(res[0]).__name__.lower() if res else "passed"] += 1
        vs = [s["verdict"] for r in a["criteria"].values() for s in r["scenarios"]]
        assert kinds["failure"] == vs.count("FAIL") == suite.failures
        assert kinds["error"] == vs.count("ERROR") + vs.count("TIMEOUT") == suite.errors
        assert kinds["skipped"] == vs.count("UNSUPPORTED") == suite.skipped
        assert suite.tests == len(vs) == len(names)
        assert all(c.endswith("." + n.split("-")[0]) for c, n in names)
    flaky = [c for c in suites["flaky"] if c.name.startswith("RTY-02")][0]
    assert "NON-STRICT" in (flaky.system_out or "")


def test_markdown_totals_and_failures_first(rendered, sample):
    md = (rendered / "summary.md").read_text("utf-8")
    counts = {}
    for a in sample["agents"]:
        for r in a["criteria"].values():
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines = md.splitlines()
    header = lines.index(
        "| PASS | FAIL | NON-STRICT | UNSUPPORTED | INFORMATIONAL | ERROR | TIMEOUT | UNSTABLE |"
    )
    values = [int(x) for x in lines[header + 2].strip("| ").split(" | ")]
    assert values == [counts.get(v, 0) for v in lines[header].strip("| ").split(" | ")]
    fail_idx = md.index("## Failures")
    assert md.index("**ERROR** `ERR-01` (flaky): API errors are shown") > fail_idx
    assert md.index("## Failures") < md.index("## Agent `reference`")
    assert "<script>" not in md


def test_interrupted_banner(tmp_path):
    doc = build_sample(interrupted=True)
    out = tmp_path / "r"
    render([doc], out)
    page = scan((out / "index.html").read_text("utf-8"))
    assert "interrupted" in page.ids
    assert "Interrupted run." in "".join(page.text)
    assert "Interrupted run" in (out / "summary.md").read_text("utf-8")


def test_several_documents_side_by_side(tmp_path, sample):
    render([sample, build_sample()], tmp_path / "r", secrets=[SECRET])
    page = scan((tmp_path / "r" / "index.html").read_text("utf-8"))
    ths = [a for t, a in page.tags if t == "th"]
    assert len(ths) > 0
    assert "reference#2" in "".join(page.text)


def test_atomic_replace_and_failure_keeps_old(tmp_path, sample, monkeypatch):
    out = tmp_path / "r"
    render([sample], out)
    (out / "stale.txt").write_text("x")
    render([sample], out)
    assert not (out / "stale.txt").exists()
    import sys

    mod = sys.modules["reports.render"]

    def boom(*a, **k):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(mod, "render_markdown", boom)
    with pytest.raises(RuntimeError):
        render([sample], out)
    assert (out / "summary.md").is_file() and (out / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_render_validates(tmp_path, sample):
    from reports import ResultsError

    sample["version"] = 2
    with pytest.raises(ResultsError, match=r"results\[0\]: at \$\.version"):
        render([sample], tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_cli(tmp_path, sample, capsys, monkeypatch):
    p = tmp_path / "res.json"
    p.write_text(json.dumps(sample), "utf-8")
    monkeypatch.setenv("AGENT_KEY", SECRET)
    assert main([str(p), "--out", str(tmp_path / "o"), "--secret-env", "AGENT_KEY"]) == 0
    assert capsys.readouterr().out.strip() == str((tmp_path / "o" / "index.html").absolute())
    for f in (tmp_path / "o").rglob("*.*"):
        assert SECRET not in read_text(f)
    bad = tmp_path / "bad.json"
    bad.write_text("[]", "utf-8")
    assert main([str(bad), "--out", str(tmp_path / "o2")]) == 2
    assert "bad.json: at $" in capsys.readouterr().err


def test_standalone_renderers_return_text(sample):
    assert render_junit([sample], secrets=[SECRET]).startswith("<?xml")
    assert SECRET not in render_markdown([sample], secrets=[SECRET])


def test_the_measured_timing_and_a_flaky_verdict_are_shown(tmp_path: Path, sample: dict):
    doc = copy.deepcopy(sample)
    doc["run"]["timing"] = {"early_slack_s": 0.005, "late_slack_s": 0.0412, "noise_s": 0.0063}
    agent = doc["agents"][0]
    cid = next(iter(agent["criteria"]))
    scen = agent["criteria"][cid]["scenarios"][0]
    scen.update(flaky=True, runs=[{"verdict": "FAIL"}, {"verdict": "PASS"}, {"verdict": "PASS"}])
    agent["criteria"][cid]["flaky"] = True
    out = render([doc], tmp_path / "report")
    index = " ".join("".join(scan(out.read_text("utf-8")).text).split())
    # In scenario seconds (the run's time scale is 0.05), the real time beside.
    assert (
        "waits may be 0.824 s (41.2 ms real) late and 0.100 s (5.0 ms real) early; jitter is "
        "told from 0.126 s (6.3 ms real) of noise" in index
    )
    page = scan((out.parent / "criteria" / f"{cid}.html").read_text("utf-8"))
    text = " ".join("".join(page.text).split())
    assert "the verdict differed between runs (--verify): FAIL, PASS, PASS" in text


def test_a_scenario_on_a_fast_clock_says_so(tmp_path: Path, sample: dict) -> None:
    doc = copy.deepcopy(sample)
    agent = doc["agents"][0]
    cited = next(iter(agent["criteria"].values()))["scenarios"][0]["id"]
    scenario = next(s for s in agent["scenarios"] if s["id"] == cited)
    scenario["clock"] = {
        "note": "time warp x10 <b>",
        "time_warp": 10.0,
        "effective_speed": 9.8,
        "overhead_ms": 25.0,
        "spread_ms": 8.0,
        "waits_ms": [125.0, 425.0, 125.0, 425.0],
        "judged": "waits less the mean overhead; slack widened by the spread",
    }
    out = render([doc], tmp_path / "report", secrets=[SECRET])
    pages = [p.read_text("utf-8") for p in sorted((out.parent / "scenarios").glob("*/*.html"))]
    line = next(p for p in pages if "<th>clock</th>" in p)
    assert "time warp x10 (effective x9.8); overhead 25.0 ms, spread 8.0 ms real" in line
    # A scenario on the real clock says nothing of it.
    assert sum("<th>clock</th>" in p for p in pages) < len(pages)


def test_a_driven_feature_is_shown_with_its_scenario(tmp_path: Path, sample: dict) -> None:
    doc = copy.deepcopy(sample)
    agent = doc["agents"][0]
    cited = next(iter(agent["criteria"].values()))["scenarios"][0]["id"]
    scenario = next(s for s in agent["scenarios"] if s["id"] == cited)
    hello = {"type": "hello", "agent": "a", "version": "1", "capabilities": ["abort"], "t_ns": 1}
    hello["driven"] = {"abort": "SIGINT sent to the agent's process group <b>"}
    hello["config_carried"] = {"tool_timeout_s": "environment MCP_TOOL_TIMEOUT"}
    scenario["events"] = [hello, *[e for e in scenario["events"] if e.get("type") != "hello"]]
    out = render([doc], tmp_path / "report", secrets=[SECRET])
    pages = [p.read_text("utf-8") for p in sorted((out.parent / "scenarios").glob("*/*.html"))]
    line = next(p for p in pages if "<th>driven</th>" in p)
    assert "abort: SIGINT sent to the agent&#39;s process group &lt;b&gt;" in line
    assert "config tool_timeout_s: environment MCP_TOOL_TIMEOUT" in line
    assert sum("<th>driven</th>" in p for p in pages) < len(pages)
