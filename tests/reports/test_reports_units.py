"""The report in one unit with the other beside it, and sources a reader without the seeds
understands."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reports_htmlcheck import scan, scenario_pages

from conformance.catalogue import CATALOGUE
from reports import render
from reports.sources import describe, plain, unknown_sections
from reports.units import annotate, scenario_and_real, scenario_from_real

SAMPLE = Path(__file__).with_name("sample_results.json")
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text("utf-8"))


def _text(html: str) -> str:
    return " ".join("".join(scan(html).text).split())


def test_scenario_seconds_with_real_time_beside():
    assert scenario_and_real(2.169, 0.02) == "2.169 s (43.4 ms real)"
    assert scenario_from_real(0.0273, 0.02) == "1.365 s (27.3 ms real)"
    assert scenario_from_real(12.5, 1.0) == "12.500 s (12.500 s real)"
    assert scenario_from_real(0.0273, None) == "27.3 ms real"
    # A check's measured figures (three decimals) get their real time; nominal figures, other
    # units and numbers that are not durations stay as written; a second pass adds nothing.
    text = "asked 2.000s, waited 2.169s (nominal 1.0s); late slack 1.460 s; 4.6 ms; seq 3.141"
    got = annotate(text, 0.02)
    assert got == (
        "asked 2.000 s (40.0 ms real), waited 2.169 s (43.4 ms real) (nominal 1.0s); "
        "late slack 1.460 s (29.2 ms real); 4.6 ms; seq 3.141"
    )
    assert annotate(got, 0.02) == got
    assert annotate(text, None) == text


def test_verdict_texts_tables_and_timing_speak_alike(tmp_path, sample):
    doc = copy.deepcopy(sample)
    doc["run"]["timing"] = {"early_slack_s": 0.005, "late_slack_s": 0.0273, "noise_s": 0.004}
    agent = doc["agents"][0]
    cited = agent["criteria"]["RTY-01"]["scenarios"][0]
    cited["observed"] = "asked 1.000s, waited 20.900s"
    cited["expected"] = "a wait of the asked time (slack 0.100s early, 0.546s late)"
    out = render([doc], tmp_path / "r").parent
    index = _text((out / "index.html").read_text("utf-8"))
    # The run's allowances, measured in real time, said in scenario seconds (scale 0.05) first.
    assert "waits may be 0.546 s (27.3 ms real) late" in index
    crit = _text((out / "criteria" / "RTY-01.html").read_text("utf-8"))
    assert "waited 20.900 s (1.045 s real)" in crit
    assert "0.546 s (27.3 ms real) late" in crit  # the same figure as the index
    (own, *_) = scenario_pages(out / "criteria" / "RTY-01.html")
    page = own.read_text("utf-8")
    text = _text(page)
    assert "waited 20.900 s (1.045 s real)" in text
    # The requests' table: from the first request, in scenario seconds, real time beside.
    table = _text(re.search(r'<table class="timeline">.*?</table>', page, re.S).group(0))
    assert "0.000 s (0.0 ms real)" in table and "21.000 s (1.050 s real)" in table
    # The picture's axis says what a scenario second was.
    assert "scenario seconds (1 s = 50.0 ms real: time scale 0.05)" in text


def test_every_source_of_the_catalogue_has_english_words():
    for c in CATALOGUE:
        assert not unknown_sections(c.source), (c.id, c.source)
        words = plain(c.source)
        assert not CJK.search(words), (c.id, words)
        assert "seed 000" not in c.source or "AI error handling feature specification" in words


def test_a_seed_is_named_and_its_section_given_in_english_first(tmp_path, sample):
    (part,) = describe("seed 000, 速率限制弹性, scenario 2 (jitter)")
    assert part["name"] == "AI error handling feature specification"
    assert (part["section"], part["section_original"]) == ("Rate-limit resilience", "速率限制弹性")
    assert part["rest"] == "scenario 2 (jitter)"
    (part,) = describe("seed 004, §7.3")
    assert part["section"] == "§7.3 A taxonomy of errors"
    assert describe("MCP specification 2025-06-18, Basic") == [
        {"text": "MCP specification 2025-06-18, Basic"}
    ]
    out = render([sample], tmp_path / "r").parent
    html = (out / "criteria" / "RTY-01.html").read_text("utf-8")
    line = re.search(r'<p class="source">.*?</p>', html, re.S).group(0)
    text = _text(line)
    assert text.startswith("Source: AI error handling feature specification (seed 000")
    assert "section “Rate-limit resilience”" in text
    # The Chinese is only ever in a lang="zh" span (hidden unless a font draws it), after the
    # English it names.
    outside = re.sub(r'<span lang="zh" class="zh">[^<]*</span>', "", line)
    assert "; )" not in _text(outside) and " ;" not in _text(outside)  # hidden, no stray marks
    assert not CJK.search(outside)
    assert text.index("Rate-limit resilience") < text.index("速率限制弹性")


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(BROWSER is None, reason="no chromium or chromium-browser binary on PATH")
def test_the_original_titles_show_only_where_a_font_draws_them(tmp_path, sample):
    out = render([sample], tmp_path / "r").parent
    page = (out / "criteria" / "RTY-01.html").as_uri()
    cmd = [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    cmd += [f"--user-data-dir={tmp_path / 'p'}", "--dump-dom", page]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True).stdout
    shown = bool(re.search(r'<html[^>]*class="[^"]*\bcjk\b', dom))
    # fontconfig says whether a font here has the seeds' characters.
    fc = shutil.which("fc-list")
    if fc is None:
        pytest.skip("no fc-list to say whether a CJK font is installed")
    have = subprocess.run([fc, ":charset=901f"], capture_output=True, text=True, check=False)
    assert shown == bool(have.stdout.strip()), have.stdout[:300]


def test_the_index_states_each_agents_reaction_beside_the_machines_slack(tmp_path):
    from reports_sample import build_sample

    from reports import render

    doc = build_sample()
    entry = doc["agents"][0]["scenarios"][0]
    entry["reaction"] = {
        "median_ms": 32.1,
        "spread_ms": 4.2,
        "gaps_ms": [32.2, 36.0, 32.8],
        "taken_off_ms": 32.1,
        "timing_scale": 0.032,
        "note": "n",
    }
    index = render([doc], tmp_path / "r").read_text("utf-8")
    assert "reaction 32.1 ms (real)" in index and "spread 4.2 ms" in index
    assert "timing scenarios at time scale 0.032" in index
