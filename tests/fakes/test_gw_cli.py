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
def serving(path: Path, sessions: int = 1, *flags: str) -> Iterator[list[str]]:
    """``python -m fakes serve PATH [FLAGS]`` on 127.0.0.1, port 0; yields what it prints, up to
    the line of its last session."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fakes", "serve", str(path), *flags],
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


def test_serve_keeps_a_bounded_journal_by_default_and_flags_change_it(tmp_path):
    sc = tmp_path / "ring.yaml"
    sc.write_text("id: ring\ncriteria: []\nprompt: p\nscript:\n  - {times: 9, reply: {text: hi}}\n")

    def journal_after(n: int, *flags: str) -> dict:
        with serving(sc, 1, *flags) as lines:
            base_url = lines[0].split()[1]
            for _ in range(n):
                httpx.post(base_url + "/chat/completions", json={"messages": [], "stream": True})
            sid = lines[-1].split("/s/")[1].split("/")[0]
            root = base_url.removesuffix("/v1")
            return httpx.get(f"{root}/_control/sessions/{sid}/journal").json()

    default = journal_after(1)
    assert default["retention"] == {"entries": 1000, "body_bytes": 65536, "dropped": 0}
    ring = journal_after(4, "--journal-entries", "3", "--journal-body-bytes", "10")
    assert ring["retention"] == {"entries": 3, "body_bytes": 10, "dropped": 1}
    assert [e["seq"] for e in ring["entries"]] == [1, 2, 3]
    assert all(e["response"]["sent"] is None for e in ring["entries"])
    assert all(e["response"]["sent_digest"]["bytes"] > 10 for e in ring["entries"])
    whole = journal_after(2, "--journal-entries", "0", "--journal-body-bytes", "0")
    assert "retention" not in whole and len(whole["entries"]) == 2
    for e in whole["entries"]:
        r = e["response"]
        assert "data: [DONE]" in r["sent"] and len(r["sent"].encode()) == r["sent_bytes"]


def test_serve_refuses_a_negative_journal_bound(tmp_path, capsys):
    path = ROOT / "scenarios" / "faults" / "http-error.yaml"
    assert main(["serve", str(path), "--journal-entries", "-1"]) == 2
    assert "--journal-entries must be >= 0" in capsys.readouterr().err


def test_serve_restarts_a_scenario_on_request(tmp_path):
    """A client run again against `fakes serve` meets the script from its start after a POST
    to the restart URL the server prints; the root /v1 keeps serving the session."""
    sc = tmp_path / "once.yaml"
    sc.write_text("id: once\ncriteria: []\nprompt: p\nscript:\n  - reply: {text: only}\n")
    with serving(sc) as lines:
        base_url = lines[0].split()[1]
        sid = lines[-1].split("/s/")[1].split("/")[0]
        assert lines[-1].endswith(f"  mcp: {base_url.removesuffix('/v1')}/s/{sid}/mcp")
        chat = {"messages": [{"role": "user", "content": "p"}]}
        first = [httpx.post(base_url + "/chat/completions", json=chat) for _ in range(2)]
        assert [r.status_code for r in first] == [200, 500]  # the script is used up
        root = base_url.removesuffix("/v1")
        r = httpx.post(f"{root}/_control/sessions/{sid}/restart")
        assert r.json()["dropped_entries"] == 2
        again = httpx.post(base_url + "/chat/completions", json=chat)
        assert again.json()["choices"][0]["message"]["content"] == "only"


def test_serve_allows_the_hosts_it_is_told_to(tmp_path):
    path = ROOT / "scenarios" / "faults" / "http-error.yaml"
    with serving(path, 1, "--allow-host", "box.lan", "--allow-host", "10.1.2.3") as lines:
        url = lines[0].split()[1] + "/models"
        for host in ("box.lan:9000", "10.1.2.3", "localhost"):
            assert httpx.get(url, headers={"Host": host}).status_code == 200, host
        refused = httpx.get(url, headers={"Host": "evil.example"})
        assert refused.status_code == 403
        assert "'evil.example'" in refused.json()["error"]["message"]
        assert "10.1.2.3, box.lan" in refused.json()["error"]["message"]
