"""CLI: bad scenarios exit 2 with a clear message; serve prints working session URLs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from fakes.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_bad_scenario_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text("id: bad\ncriteria: []\nprompt: p\nscript: [{fault: {cut: {}}}]\n")
    assert main(["serve", str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and "script[0].fault" in err


def test_missing_file_exits_2(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_serve_prints_urls_that_work():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fakes",
            "serve",
            str(ROOT / "scenarios" / "faults" / "http-error.yaml"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        line = proc.stdout.readline()
        assert first.startswith("gateway: http://127.0.0.1:")
        url = line.split()[1]
        r = httpx.post(url + "/chat/completions", json={"messages": [], "stream": False})
        assert r.status_code == 429 and r.headers["retry-after"] == "2"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
