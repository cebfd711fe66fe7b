"""Headless Chromium: hostile agent text in the report is shown as text and runs nothing."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reports_htmlcheck import scan
from reports_sample import SECRET

from reports import render

SAMPLE = Path(__file__).with_name("sample_results.json")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(BROWSER is None, reason="no chromium or chromium-browser binary on PATH"),
]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        BROWSER,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    doc = json.loads(SAMPLE.read_text("utf-8"))
    return render([copy.deepcopy(doc)], tmp_path / "report", secrets=[SECRET]).parent


@pytest.mark.parametrize("page", ["index.html", "criteria/RTY-01.html"])
def test_hostile_text_runs_nothing(tmp_path, report, page):
    target = report / page
    proc = _chromium(tmp_path, "--dump-dom", target.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    s = scan(dom)
    titles = [d for d in dom.split("<title>")[1:]]
    assert titles and not titles[0].startswith("PWNED"), titles[:1]
    assert "PWNED" not in titles[0].split("</title>")[0]
    # The hostile payload neither created elements nor ran handlers.
    assert not [t for t, _ in s.tags if t == "img"]
    assert not any((a.get("href") or "").lower().startswith("javascript:") for _, a in s.tags)
    # The inline SVG pictures are the report's own: the payloads in their text (scenario id,
    # fault and tool names, criterion titles, agent names) opened no element and no handler.
    raw = scan((report / page).read_text("utf-8"))
    assert [t for t, _ in s.tags if t == "svg"] == [t for t, _ in raw.tags if t == "svg"]
    assert len([t for t, _ in s.tags if t == "svg"]) == (1 if page == "index.html" else 3)
    assert not any(k.lower().startswith("on") for _, a in s.tags for k in a)
    # Every "PWNED-SCRIPT" is inside the displayed payload, none appended by it running.
    text = "".join(s.text)
    assert text.count("PWNED-SCRIPT") == len(re.findall(r'append\(\\?"PWNED-SCRIPT', text))
    if page != "index.html":
        # Shown as text: the escaped markup is in the DOM, the text reads as written.
        assert "&lt;script&gt;document.title" in dom
        assert '<img src=x onerror="document.title' in "".join(s.text)


def test_screenshot(tmp_path, report):
    png = tmp_path / "index.png"
    proc = _chromium(
        tmp_path, "--window-size=1280,2000", f"--screenshot={png}", (report / "index.html").as_uri()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_screenshot_script(tmp_path, report):
    from reports.screenshots import main

    out = tmp_path / "shots"
    assert main([str(report), "--criterion", "STR-01", "--out", str(out)]) == 0
    for name in ("index.png", "STR-01.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(tmp_path / "nothing")]) == 2
