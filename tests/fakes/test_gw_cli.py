"""CLI: bad scenarios exit 2 with a clear message; serve prints working session URLs."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai

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


@contextlib.contextmanager
def serving(path: Path, sessions: int = 1) -> Iterator[list[str]]:
    """``python -m fakes serve PATH`` on 127.0.0.1, port 0; yields what it prints, up to the line
    of its last session."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fakes", "serve", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        # The session lines come last; the server then waits, so read no further.
        while sum("  tools: " in line for line in lines) < sessions:
            line = proc.stdout.readline()
            assert line, f"serve exited early: {lines}"
            lines.append(line.rstrip("\n"))
        yield lines
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def test_serve_prints_urls_that_work():
    with serving(ROOT / "scenarios" / "faults" / "http-error.yaml") as lines:
        url = lines[-1].split()[1]
        assert lines[-1].startswith("http-error: http://127.0.0.1:")
        r = httpx.post(url + "/chat/completions", json={"messages": [], "stream": False})
        assert r.status_code == 429 and r.headers["retry-after"] == "2"


def test_new_user_path_one_scenario(tmp_path):
    """The first URL `fakes serve` prints is a base_url the OpenAI SDK can use as is."""
    sc = tmp_path / "hello-user.yaml"
    sc.write_text(
        "id: hello-user\ntitle: A first scenario\ncriteria: []\nprompt: Say hi.\n"
        "script:\n  - reply: {text: 'Hi from the script!'}\n"
    )
    with serving(sc) as lines:
        first = lines[0]
        assert first.startswith("base_url: http://127.0.0.1:") and "hello-user" in first
        base_url = first.split()[1]
        assert base_url.endswith("/v1")
        client = openai.OpenAI(base_url=base_url, api_key="sk-user", max_retries=0, timeout=5)
        assert [m.id for m in client.models.list()] == ["fake-model"]
        reply = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Say hi."}]
        )
        assert reply.choices[0].message.content == "Hi from the script!"

        root = base_url.removesuffix("/v1")
        assert lines[1] == f"index: {root}/"
        index = httpx.get(root + "/")
        assert index.status_code == 200 and index.headers["content-type"].startswith(
            "application/json"
        )
        session_url = lines[-1].split()[1]
        assert index.json()["base_url"] == base_url
        assert [s["base_url"] for s in index.json()["sessions"]] == [session_url]
        page = httpx.get(root + "/", headers={"Accept": "text/html,*/*;q=0.8"})
        assert page.headers["content-type"].startswith("text/html")
        assert base_url in page.text and session_url in page.text

        missing = httpx.get(root + "/chat/completions")
        assert missing.status_code == 404
        assert missing.json()["valid_prefixes"] == [base_url, session_url]


def test_serve_several_scenarios_prints_the_index_first(tmp_path):
    paths = []
    for name in ("one", "two"):
        paths.append(tmp_path / f"{name}.yaml")
        paths[-1].write_text(
            f"id: {name}\ncriteria: []\nprompt: p\nscript:\n  - reply: {{text: {name}}}\n"
        )
    with serving(tmp_path, sessions=2) as lines:
        assert lines[0].startswith("index: http://127.0.0.1:")
        index = httpx.get(lines[0].split()[1]).json()
        assert index["base_url"] is None
        urls = {line.split(":", 1)[0]: line.split()[1] for line in lines[1:]}
        assert {s["scenario"]: s["base_url"] for s in index["sessions"]} == urls
        for name, url in urls.items():
            r = httpx.post(url + "/chat/completions", json={"messages": []})
            assert r.json()["choices"][0]["message"]["content"] == name
