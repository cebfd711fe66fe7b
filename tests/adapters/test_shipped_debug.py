"""A shipped agent's own debug files (a profile's ``drive.debug_dump``): its debug log written
into the run's debug directory, its transcripts collected there byte for byte, never a file the
harness wrote; the format named in the entry, and DBG-01 judged through its reader.

The fake runs under the real Claude Code profile (its argv, settings and key helper) and writes
its files in the shapes Claude Code writes them (tests/test_debug_formats.py).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.adapters.shipped import ProfileError, ShippedAdapter, load_profile
from conformance.runner import run_scenario
from fakes import Scenario
from tests.adapters.test_shipped_drive import PRELUDE

PROFILE = "claude-code-2-1-332"

# Writes its debug log where --debug-file says (and a `latest` link beside it, as Claude Code
# does), asks once, and keeps its transcript under HOME/.claude/projects/<cwd key>/.
FAKE = """
i = sys.argv.index("--debug-file")
debug = sys.argv[i + 1]
r = ask(os.environ["ANTHROPIC_MODEL"])
body = r.read().decode()
with open(debug, "w") as f:
    f.write("2026-12-07T12:18:03.716Z [DEBUG] [API:timing] dispatching to firstParty model=m\\n")
    f.write(f"2026-12-07T12:18:03.938Z [ERROR] API error (attempt 1/11): {r.status} {body}\\n")
os.symlink(debug, os.path.join(os.path.dirname(debug), "latest"))
project = os.path.join(os.environ["HOME"], ".claude", "projects", "-tmp-w")
os.makedirs(project, exist_ok=True)
records = [
    {"type": "user", "timestamp": "2026-12-07T12:18:02.262Z",
     "message": {"role": "user", "content": "Say hello."}},
]
if CONFIG:
    records.append({"type": "api-request", "timestamp": "2026-12-07T12:18:03.000Z",
                    "params": {"model": "m", "max_tokens": 64}})
with open(os.path.join(project, "s1.jsonl"), "w") as f:
    f.write("".join(json.dumps(x) + "\\n" for x in records))
done("ok")
"""

HTTP_400 = {
    "id": "debug-400",
    "criteria": ["DBG-01"],
    "capabilities": ["debug_dump"],
    "script": [{"fault": {"http_error": {"status": 400}}}],
}


def _run(gateway, tmp_path: Path, config: bool):
    path = tmp_path / "fake-claude"
    body = f"CONFIG = {config}\n" + FAKE
    path.write_text(f"#!{sys.executable}\n" + PRELUDE + textwrap.dedent(body))
    path.chmod(0o755)
    ad = ShippedAdapter(PROFILE, bin_path=str(path))
    sc = Scenario.from_dict({"title": "debug", "prompt": "Say hello.", "deadline": 20, **HTTP_400})
    entry, verdicts = run_scenario(gateway, ad, sc, dialect="anthropic_messages")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    return entry, verdicts


def test_its_own_files_collected_and_read_in_their_format(gateway, tmp_path):
    entry, verdicts = _run(gateway, tmp_path, config=True)
    # Its log and its transcript, once each (not the link); not its settings, not the helper.
    assert sorted(entry["debug_files"]) == [".claude/projects/-tmp-w/s1.jsonl", "claude-debug.log"]
    assert entry["debug_format"] == "claude-code"
    assert entry["events"][0]["driven"]["debug_dump"].startswith("its debug log (--debug-file)")
    assert verdicts["DBG-01"]["verdict"] == "PASS", verdicts["DBG-01"]
    assert "claude-debug.log:2: API error (attempt 1/11): 400" in verdicts["DBG-01"]["observed"]
    assert verdicts["DBG-02"]["verdict"] == "PASS"


def test_a_history_the_harness_wrote_is_not_collected(gateway, tmp_path):
    path = tmp_path / "fake-claude"
    # It leaves the resumed transcript as the harness wrote it and writes its debug log only.
    body = 'open(sys.argv[sys.argv.index("--debug-file") + 1], "w").write("x\\n")\ndone("ok")\n'
    path.write_text(f"#!{sys.executable}\n" + PRELUDE + body)
    path.chmod(0o755)
    ad = ShippedAdapter(PROFILE, bin_path=str(path))
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    sc = Scenario.from_dict(
        {
            "title": "debug",
            "prompt": "Say hello.",
            "deadline": 20,
            "id": "debug-history",
            "criteria": ["DBG-02"],
            "history": history,
            "script": [{"reply": {"text": "hi", "finish_reason": "stop"}}],
        }
    )
    entry, _ = run_scenario(gateway, ad, sc, dialect="anthropic_messages")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    assert "history" in entry["events"][0]  # the transcript was written where the glob looks
    assert sorted(entry["debug_files"]) == ["claude-debug.log"]


def test_a_part_it_does_not_save_fails_dbg_01_by_name(gateway, tmp_path):
    _, verdicts = _run(gateway, tmp_path, config=False)
    assert verdicts["DBG-01"]["verdict"] == "FAIL"
    assert "missing: the model config" in verdicts["DBG-01"]["observed"]


def test_both_profiles_map_the_debug_dump():
    for name in ("claude-code-2-1-332", "claude-code-2-1-197"):
        ad = ShippedAdapter(name)
        dump = ad.profile.drive["debug_dump"]
        assert "debug_dump" in ad.capabilities() and dump["format"] == "claude-code"
        assert dump["args"] == ["--debug-file", "{debug_dir}/claude-debug.log"]
        assert dump["collect"] == [{"root": "home", "glob": ".claude/projects/*/*.jsonl"}]


def _profile(tmp_path: Path, dump: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(
        'name: p\ninstall: {npm: "p@1.0.0", bin: p}\ncommand: ["{bin}"]\n'
        "drive:\n  debug_dump:\n" + textwrap.indent(textwrap.dedent(dump), "    ")
    )
    return path


def test_an_unknown_format_names_its_line_and_the_known_ones(tmp_path):
    path = _profile(tmp_path, "format: gemini\n")
    with pytest.raises(
        ProfileError,
        match=r"p\.yaml:6: drive\.debug_dump\.format: unknown debug file format 'gemini'; "
        r"known: claude-code",
    ):
        load_profile(path)


def test_a_collect_glob_stays_under_its_root(tmp_path):
    path = _profile(tmp_path, "collect:\n  - {root: home, glob: '../*.json'}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:7: .*collect\[0\]\.glob: .* under its root"):
        load_profile(path)
    path = _profile(tmp_path, "collect:\n  - {root: nowhere, glob: '*'}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:7: drive\.debug_dump\.collect\.0\.root"):
        load_profile(path)


def test_the_debug_file_placeholder_and_collect_reach_the_schema(tmp_path):
    path = _profile(tmp_path, "args: ['--log', '{debug_dir}/x.log']\nnote: n\n")
    assert load_profile(path).drive["debug_dump"]["args"] == ["--log", "{debug_dir}/x.log"]
    assert json.dumps(load_profile(path).drive)  # plain data
