"""The report's inline SVG pictures: what they show, and that hostile text stays text."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from reports_htmlcheck import scan
from reports_sample import HOSTILE_SVG, SECRET

from reports import render
from reports.pictures import LETTERS
from reports.verdicts import VERDICTS

SAMPLE = Path(__file__).with_name("sample_results.json")
RTY_SCENARIO = "rty-429-retry-after-seconds" + HOSTILE_SVG


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text("utf-8"))


@pytest.fixture
def rendered(tmp_path: Path, sample: dict) -> Path:
    render([copy.deepcopy(sample)], tmp_path / "report", secrets=[SECRET])
    return tmp_path / "report"


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", html, re.S)


def test_a_letter_for_every_verdict():
    assert set(LETTERS) == set(VERDICTS)
    assert len(set(LETTERS.values())) == len(VERDICTS)


def test_timeline_shows_requests_faults_and_waits_against_their_band(rendered, sample):
    html = (rendered / "criteria" / "RTY-01.html").read_text("utf-8")
    pictures = [s for s in _svgs(html) if "timeline-pic" in s]
    assert len(pictures) == len(sample["agents"])  # the cited scenario, once per agent
    assert html.count('class="tl-legend"') == 1  # on the page's first picture
    svg = pictures[0]
    entries = next(s for s in sample["agents"][0]["scenarios"] if s["id"] == RTY_SCENARIO)[
        "journal"
    ]["entries"]
    bars = re.findall(r'class="tl-bar tl-(\w+) tl-req"', svg)
    assert bars == ["fault", "ok", "ok"]  # in arrival order: the 429, the tool call, the retry
    assert len(entries) == len(bars)
    # Each lane links to its request's details on the scenario's own page, which draws the same
    # picture with its lanes linked within the page.
    links = re.findall(r'<a href="([^"#]+)#req-(\d+)">', svg)
    assert sorted(int(seq) for _, seq in links) == sorted(e["seq"] for e in entries)
    (target,) = {t for t, _ in links}
    scenario_page = (rendered / "criteria" / target).resolve()
    own = scan(scenario_page.read_text("utf-8"))
    assert {f"req-{e['seq']}" for e in entries} <= own.ids
    (own_svg,) = [s for s in _svgs(scenario_page.read_text("utf-8")) if "timeline-pic" in s]
    assert sorted(re.findall(r'<a href="#req-(\d+)">', own_svg)) == sorted(
        str(e["seq"]) for e in entries
    )
    # The wait is drawn from the end of the failed response to the retry, with the rule's band
    # and the band as judged; 20.9 s is outside both: marked in red and with a cross.
    assert svg.count('class="tl-band"') == 2 and svg.count('class="tl-core"') == 2  # + legend
    assert "tl-wait tl-out" in svg and "✗" in svg
    text = "".join(scan(svg).text)
    assert "retry 1: 21 s ✗ rule 1–1.25, judged 0.9–1.5" in text
    assert "429" in text and "time scale 0.05" in text


def test_a_timeline_without_waits_has_no_band(tmp_path, sample):
    for agent in sample["agents"]:
        for s in agent["scenarios"]:
            s.pop("waits", None)
    render([sample], tmp_path / "r")
    svg = next(s for s in _svgs((tmp_path / "r" / "criteria" / "RTY-01.html").read_text("utf-8")))
    assert svg.count('class="tl-band"') == 1  # the legend's only
    assert "retry 1" not in svg and len(re.findall(r' tl-req"', svg)) == 3


def test_matrix_has_a_linked_lettered_cell_per_criterion_and_agent(rendered, sample):
    html = (rendered / "index.html").read_text("utf-8")
    (svg,) = [s for s in _svgs(html) if "matrix-pic" in s]
    cells = re.findall(
        r'<a href="criteria/([A-Z]+-\d+)\.html#agent-([^"]+)"><rect [^>]*class="mx mx-([A-Z-]+|none)"'
        r"/><text [^>]*>([A-Z–])</text>",
        svg,
    )
    got = {(cid, anchor): (v, letter) for cid, anchor, v, letter in cells}
    assert len(got) == len(cells) == len(sample["catalogue"]) * len(sample["agents"])
    anchors = ["reference", "flaky", "evil_b_agent_b_"]
    for agent, anchor in zip(sample["agents"], anchors, strict=True):
        for c in sample["catalogue"]:
            v = agent["criteria"][c["id"]]["verdict"]
            assert got[(c["id"], anchor)] == (v, LETTERS[v]), (c["id"], agent["name"])
    # The legend names every verdict with its letter.
    legend = "".join(scan(svg).text)
    assert all(v in legend for v in VERDICTS)


def test_one_agent_has_no_matrix(tmp_path, sample):
    sample["agents"] = sample["agents"][:1]
    render([sample], tmp_path / "r")
    assert "matrix-pic" not in (tmp_path / "r" / "index.html").read_text("utf-8")


def test_hostile_text_in_the_pictures_is_text(rendered):
    for page, kind, count in (("index.html", "matrix-pic", 1), ("criteria/RTY-01.html", "tl", 3)):
        html = (rendered / page).read_text("utf-8")
        # Only the pictures the report draws: the payload's </svg><svg> made no picture.
        assert html.count("<svg") == count, page
        assert len([s for s in _svgs(html) if kind in s]) == count
        s = scan(html)
        # The report's own script only: the index's filter, inline; a criterion page's font
        # check, the report's file.
        scripts = [a for t, a in s.tags if t == "script"]
        assert len(scripts) == 1, page
        if page == "index.html":
            (body,) = re.findall(r"<script>(.*?)</script>", html, re.S)
            assert "PWNED" not in body and "f-verdict" in body
        else:
            assert scripts[0] == {"src": "../report.js"}
        assert not any(k.startswith("on") for _, a in s.tags for k in a)
        assert not any((a.get("href") or "").startswith("javascript:") for _, a in s.tags)
    timeline = "".join(scan(_svgs((rendered / "criteria/RTY-01.html").read_text("utf-8"))[0]).text)
    # The scenario id (the picture's title), the fault name, the tool name and behaviour, the
    # wait's rule and reason: every one is in the picture, escaped, as written.
    assert timeline.count(HOSTILE_SVG) >= 5
    matrix = "".join(scan(_svgs((rendered / "index.html").read_text("utf-8"))[0]).text)
    assert HOSTILE_SVG in matrix  # RTY-02's title, in each of its cells' tooltips
    assert "evil<b>agent</b>" in matrix
