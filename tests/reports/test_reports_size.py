"""A report that opens fast: evidence once per scenario, compact criterion pages, cut bodies with
the whole bytes beside them, and a size that stays small on a shipped CLI's weight of evidence."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from reports_big import inflate
from reports_htmlcheck import read_text, scan, scenario_pages
from reports_sample import SECRET

from reports import render
from reports.views import FEATURED

SAMPLE = Path(__file__).with_name("sample_results.json")
PAGE_MAX = 500_000


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text("utf-8"))


def _text(html: str) -> str:
    return " ".join("".join(scan(html).text).split())


def _many(sample: dict, n: int, failing: set[int]) -> dict:
    """The sample's first agent with ``n`` scenarios more, each judging ERR-01 (and each its
    own body marker), those in ``failing`` FAIL."""
    doc = copy.deepcopy(sample)
    agent = doc["agents"][0]
    base = next(s for s in agent["scenarios"] if s["id"] == "str-cut-mid-stream")
    cited = []
    for i in range(n):
        sc = copy.deepcopy(base)
        sc["id"] = f"every-{i:03d}"
        for e in sc["journal"]["entries"]:
            e["body"]["messages"][0]["content"] = f"BODY-MARKER-{i:03d}"
        agent["scenarios"].append(sc)
        v = "FAIL" if i in failing else "PASS"
        cited.append({"id": sc["id"], "verdict": v, "expected": "e", "observed": f"obs {i:03d}"})
    agent["criteria"]["ERR-01"] = {"verdict": "FAIL" if failing else "PASS", "scenarios": cited}
    return doc


def test_a_criterion_judged_on_every_scenario_lists_them_failing_first(tmp_path, sample):
    failing = {3, 40, 77, 120}
    doc = _many(sample, 151, failing)
    out = render([doc], tmp_path / "r", secrets=[SECRET]).parent
    page = (out / "criteria" / "ERR-01.html").read_text("utf-8")
    agent = page[page.index('id="agent-reference"') : page.index('id="agent-flaky"')]
    # The failing ones first, with their verdict texts and pictures; the passing ones as rows of
    # a collapsed table; none with its requests and replies, which are on its own page.
    order = re.findall(r"every-(\d{3})", agent)
    firsts = list(dict.fromkeys(order))
    assert firsts[: len(failing)] == [f"{i:03d}" for i in sorted(failing)]
    featured = re.findall(r'<section id="reference--every-(\d{3})">', agent)
    assert featured == [f"{i:03d}" for i in sorted(failing)][:FEATURED]
    assert agent.count("timeline-pic") == len(failing)
    collapsed = agent[agent.index('<details class="passing">') :]
    assert len(re.findall(r"<tr id=\"reference--every-", collapsed)) == 151 - len(failing)
    assert "147 passing scenarios" in _text(collapsed)
    assert "BODY-MARKER" not in page  # no evidence body on the criterion page
    # Every row links to its scenario's page, which shows the evidence and the verdict.
    links = {unquote(urlsplit(h).path) for h in scan(agent).links if "scenarios/" in h}
    assert len(links) == 151
    one = (out / "criteria" / "../scenarios/reference/every-040.html").resolve()
    text = _text(one.read_text("utf-8"))
    assert "BODY-MARKER-040" in text and "ERR-01" in text and "FAIL" in text and "obs 040" in text
    assert len(page.encode()) < 200_000


def test_more_failing_scenarios_than_featured_are_rows(tmp_path, sample):
    failing = set(range(FEATURED + 5))
    out = render([_many(sample, 30, failing)], tmp_path / "r").parent
    page = (out / "criteria" / "ERR-01.html").read_text("utf-8")
    agent = page[page.index('id="agent-reference"') : page.index('id="agent-flaky"')]
    assert len(re.findall(r'<section id="reference--every-', agent)) == FEATURED
    assert "Other scenarios that did not pass (5)" in _text(agent)
    assert agent.count("timeline-pic") == FEATURED


def test_each_scenarios_evidence_is_on_one_page_only(tmp_path, sample):
    doc = _many(sample, 20, {1})
    out = render([doc], tmp_path / "r").parent
    pages = sorted(out.rglob("*.html"))
    for i in range(20):
        marker = f"BODY-MARKER-{i:03d}"
        holders = [p for p in pages if marker in p.read_text("utf-8")]
        assert [p.name for p in holders] == [f"every-{i:03d}.html"], marker
        evidence = out / "evidence" / "reference" / f"every-{i:03d}.json.xz"
        assert marker in read_text(evidence)


def test_a_big_body_is_cut_with_its_size_and_its_whole_in_the_evidence(tmp_path, sample):
    doc = copy.deepcopy(sample)
    agent = doc["agents"][0]
    sc = next(s for s in agent["scenarios"] if s["id"] == "str-cut-mid-stream")
    big = "".join(f"line {i:07d} " + "x" * 90 + "\n" for i in range(20_000))  # 2 MB
    sc["journal"]["entries"][1]["response"]["sent"] = big + "THE-END\n"
    sc["journal"]["entries"][0]["body"]["messages"][0]["content"] = "HEAD-OF-BODY " + big
    out = render([doc], tmp_path / "r", secrets=[SECRET]).parent
    (own, *_) = scenario_pages(out / "criteria" / "STR-01.html")
    html = own.read_text("utf-8")
    assert len(html.encode()) < 100_000
    text = _text(html)
    assert "HEAD-OF-BODY" in text and "THE-END" in text  # a cut keeps the head and the end
    assert re.search(r"characters cut here", text)
    assert re.search(r"Cut: \d+ of \d+ characters not shown \(2\.\d MB in all\)", text)
    assert "response.sent" in text
    # The link beside a cut leads to the scenario's evidence file, which holds the whole.
    evidence = [h for h in scan(html).links if h.endswith(".json.xz")]
    assert evidence
    whole = json.loads(read_text((own.parent / evidence[0]).resolve()))
    assert whole["journal"]["entries"][1]["response"]["sent"] == big + "THE-END\n"


def test_a_reply_without_recorded_bytes_says_so_instead_of_an_empty_box(tmp_path, sample):
    doc = copy.deepcopy(sample)
    sc = next(s for s in doc["agents"][0]["scenarios"] if s["id"] == "str-cut-mid-stream")
    r = sc["journal"]["entries"][1]["response"]
    r.update(sent="", sent_bytes=207, cut_at_byte=None, end="complete")
    out = render([doc], tmp_path / "r").parent
    (own, *_) = scenario_pages(out / "criteria" / "STR-01.html")
    html = own.read_text("utf-8")
    assert not re.search(r"<pre[^>]*>\s*</pre>", html)
    assert "the journal holds none of the 207 bytes sent" in _text(html)


def test_a_shipped_clis_weight_of_evidence_stays_small(tmp_path, sample):
    doc = inflate(sample, 24)  # the scenarios with requests share it
    weight = len(json.dumps(doc))
    assert weight > 10_000_000
    out = render([doc], tmp_path / "r", secrets=[SECRET]).parent
    files = [p for p in out.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    # Pages have a budget of their own whatever the weight (50 000 characters of bodies), so the
    # ratio grows with it: 300 MB of evidence makes a 29 MB report (docs/report.md).
    assert total < weight / 5, (total, weight)
    assert max(p.stat().st_size for p in files if p.suffix == ".html") < PAGE_MAX
    for p in files:
        assert SECRET not in read_text(p), p


def test_scenarios_that_judged_nothing_are_listed_apart_from_the_failing(tmp_path, sample):
    doc = _many(sample, 30, {2})
    for s in doc["agents"][0]["criteria"]["ERR-01"]["scenarios"][10:17]:
        s["verdict"] = "UNSUPPORTED"
    out = render([doc], tmp_path / "r").parent
    page = (out / "criteria" / "ERR-01.html").read_text("utf-8")
    agent = page[page.index('id="agent-reference"') : page.index('id="agent-flaky"')]
    assert re.findall(r'<section id="reference--every-(\d{3})">', agent) == ["002"]
    unjudged = agent[agent.index('<details class="passing unjudged">') :]
    assert re.findall(r'<tr id="reference--every-(\d{3})">', unjudged) == [
        f"{i:03d}" for i in range(10, 17)
    ]
    assert "7 scenarios that judged nothing here" in _text(unjudged)
