"""The report of a real run: every criterion with its verdict, links that resolve, nothing
external; and an interrupted run still leaves a valid report of what ran."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from reports_htmlcheck import scan

from conformance.adapters.reference import ReferenceAdapter
from conformance.runner import results_document, run_suite
from fakes import Gateway, load_scenario
from reports import render, validate_results

CRITERIA = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"
SCENARIOS = [
    "rty/rty-01-retry-after-seconds.yaml",
    "str/str-01-cut-mid-text-reset.yaml",
    "trn/trn-01-length-continuation.yaml",
]


def _run(stop_after: int | None = None) -> dict:
    scenarios = [load_scenario(CRITERIA / s) for s in SCENARIOS]
    stop = threading.Event()
    seen: list[str] = []

    def progress(line: str) -> None:
        seen.append(line)
        if stop_after is not None and len(seen) >= stop_after:
            stop.set()  # what Ctrl-C does between scenarios

    started = time.time()
    with Gateway.running() as gw:
        agent = run_suite(gw, ReferenceAdapter(), scenarios, progress=progress, stop=stop)
    return results_document(
        [agent], started=started, time_scale=0.02, interrupted=stop.is_set(), command="test"
    )


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> tuple[dict, Path]:
    doc = _run()
    out = tmp_path_factory.mktemp("report")
    render([doc], out)
    return doc, out


def test_every_criterion_of_the_run_is_on_the_index_with_its_verdict(real_report):
    doc, out = real_report
    index = scan((out / "index.html").read_text("utf-8"))
    text = " ".join(index.text)
    for cid, result in doc["agents"][0]["criteria"].items():
        assert cid in text
        page = (out / "criteria" / f"{cid}.html").read_text("utf-8")
        assert result["verdict"] in " ".join(scan(page).text), cid


def test_links_resolve_and_nothing_external(real_report):
    _, out = real_report
    pages = sorted(out.rglob("*.html"))
    ids = {p: scan(p.read_text("utf-8")).ids for p in pages}
    for page in pages:
        found = scan(page.read_text("utf-8"))
        assert found.urls == [], page.name
        for link in found.links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{page.name}: {link}"
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), f"{page.name}: {link}"
            if parts.fragment:
                assert parts.fragment in ids[target], f"{page.name}: {link}"


def test_an_interrupted_run_leaves_a_valid_report_of_what_ran(tmp_path):
    doc = _run(stop_after=1)
    validate_results(doc)
    assert doc["run"]["interrupted"] is True
    ran = [s["id"] for s in doc["agents"][0]["scenarios"]]
    assert ran == ["rty-01-retry-after-seconds"]
    render([doc], tmp_path / "r")
    index = (tmp_path / "r" / "index.html").read_text("utf-8")
    assert "interrupted" in index.lower()
    assert "rty-01-retry-after-seconds" in index


def test_no_page_shows_an_empty_box(real_report):
    _, out = real_report
    for page in sorted(out.rglob("*.html")):
        html = page.read_text("utf-8")
        assert not re.search(r"<pre[^>]*>\s*</pre>", html), page
