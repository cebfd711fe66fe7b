"""Claude Code's credential refresh, driven (``drive.credential_refresh``): its key from an
``apiKeyHelper`` command in its user settings, run again after a 401.

The fakes run under the real Claude Code profile, so its environment, settings file and helper
script are the ones exercised: a fake that re-runs the helper and retries once is judged PASS on
RTY-10, one that gives up on the 401 or retries again is judged for it.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conformance.adapters.shipped import ShippedAdapter
from conformance.runner import run_scenario
from fakes import Scenario
from tests.adapters.driven_scenarios import EXPIRED

PROFILES = ("claude-code-2-1-332", "claude-code-2-1-197")

# Like Claude Code: the key from ANTHROPIC_API_KEY when it is set (the helper is then never
# run), else from the apiKeyHelper of ~/.claude/settings.json, run again after a 401.
FAKE = """
import json, os, subprocess, sys, urllib.error, urllib.request
settings_path = os.path.join(os.environ["HOME"], ".claude", "settings.json")
settings = json.load(open(settings_path))
shown = {k: v for k, v in settings.items() if k != "apiKeyHelper"}
print("settings:", json.dumps(shown, sort_keys=True), file=sys.stderr)
print("ANTHROPIC_API_KEY set:", bool(os.environ.get("ANTHROPIC_API_KEY")), file=sys.stderr)
runs = 0
def key():
    global runs
    if os.environ.get("ANTHROPIC_API_KEY"):
        return os.environ["ANTHROPIC_API_KEY"]
    runs += 1
    out = subprocess.run(settings["apiKeyHelper"], shell=True, capture_output=True, text=True,
                         check=True).stdout.strip()
    if LOGS_KEY:
        print("key:", out, file=sys.stderr)
    return out
def ask(k):
    body = {"model": os.environ["ANTHROPIC_MODEL"], "max_tokens": 64,
            "messages": [{"role": "user", "content": "Say hello."}]}
    req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
                                 json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "x-api-key": k, "anthropic-version": "2023-06-01"})
    try:
        return urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc
first = key()
r = ask(first)
for _ in range(RETRIES):
    if r.status != 401:
        break
    r = ask(key() if REFRESHES else first)
print("helper runs:", runs, file=sys.stderr)
if r.status != 200:
    print(json.dumps({"type": "result", "subtype": "error", "is_error": True,
                      "result": f"API Error: {r.status}"}))
    sys.exit(1)
text = json.load(r)["content"][0]["text"]
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text}))
"""

REFRESHED = {
    "id": "drive-credential-refresh",
    "criteria": ["RTY-10", "DBG-02"],
    "capabilities": ["credential_refresh"],
    "script": [EXPIRED, {"reply": {"text": "Hello!", "finish_reason": "stop"}}],
}
TWICE = {
    **REFRESHED,
    "id": "drive-credential-refresh-twice",
    "script": [
        {"times": 2, **EXPIRED},
        {"reply": {"text": "Not to be reached.", "finish_reason": "stop"}},
    ],
}


def _run(
    gateway,
    tmp_path: Path,
    scenario: dict,
    *,
    retries: int,
    logs_key: bool = False,
    refreshes: bool = True,
):
    path = tmp_path / "fake-claude"
    head = (
        f"#!{sys.executable}\nRETRIES = {retries}\nLOGS_KEY = {logs_key}\nREFRESHES = {refreshes}\n"
    )
    path.write_text(head + textwrap.dedent(FAKE))
    path.chmod(0o755)
    ad = ShippedAdapter(PROFILES[0], bin_path=str(path))
    sc = Scenario.from_dict({"title": "driven", "prompt": "Say hello.", "deadline": 20, **scenario})
    entry, verdicts = run_scenario(gateway, ad, sc, dialect="anthropic_messages")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    return entry, verdicts


def _chat(entry) -> list[int]:
    return [e["response"]["status"] for e in entry["journal"]["entries"] if e["kind"] == "chat"]


def _keys(entry) -> list[int]:
    """Which of the session's keys each model request carried (the journal never holds one)."""
    return [e["credential"] for e in entry["journal"]["entries"] if e["kind"] == "chat"]


@pytest.mark.parametrize("name", PROFILES)
def test_both_profiles_earn_credential_refresh_by_the_helper(name):
    ad = ShippedAdapter(name)
    assert "credential_refresh" in ad.capabilities()
    drive = ad.profile.drive["credential_refresh"]
    # ANTHROPIC_API_KEY set would be taken first and the helper never run: it is emptied.
    assert drive["env"] == {"ANTHROPIC_API_KEY": ""}
    assert "when" not in drive  # one configuration for every run of the profile
    # Its settings file replaces the profile's own: it keeps every setting of it.
    (own,) = [f["json"] for f in ad.profile.files if f["path"] == ".claude/settings.json"]
    (driven,) = [f["json"] for f in drive["files"] if f["path"] == ".claude/settings.json"]
    assert own.items() <= driven.items() and "apiKeyHelper" in driven


@pytest.mark.parametrize("name", PROFILES)
def test_features_measured_not_to_match_stay_unsupported(name):
    # docs/agents/claude-code.md: --max-turns counts requests, not tool calls; its only title
    # request streams. (Its debug files are read in their own format: test_shipped_debug.py.)
    ad = ShippedAdapter(name)
    assert "max_tool_calls" in ad.traits.config_ignored
    assert "max_tool_calls" not in ad.profile.config_carried
    assert "background_requests" not in ad.capabilities()


def test_the_helper_gives_the_key_and_is_run_again_after_the_401(tmp_path, gateway):
    entry, verdicts = _run(gateway, tmp_path, REFRESHED, retries=1)
    log = entry["agent_log"]
    assert "ANTHROPIC_API_KEY set: False" in log
    assert "helper runs: 2" in log
    # The drive's settings file keeps the profile's own settings beside the helper.
    assert '"autoUpdates": false' in log and '"includeCoAuthoredBy": false' in log
    assert "apiKeyHelper" in entry["events"][0]["driven"]["credential_refresh"]
    assert _chat(entry) == [401, 200]
    # The helper got a key of its own from the run's credential source after the 401.
    assert _keys(entry) == [1, 2]
    assert verdicts["RTY-10"]["verdict"] == "PASS", verdicts["RTY-10"]
    assert verdicts["DBG-02"]["verdict"] == "PASS", verdicts["DBG-02"]


def test_an_agent_that_resends_the_expired_key_is_judged(tmp_path, gateway):
    # A retry of the 401 without running the helper again: the same key went out twice.
    entry, verdicts = _run(gateway, tmp_path, REFRESHED, retries=1, refreshes=False)
    assert _chat(entry) == [401, 200] and _keys(entry) == [1, 1]
    assert "carried the key that had expired" in verdicts["RTY-10"]["observed"]
    assert verdicts["RTY-10"]["verdict"] == "NON-STRICT", verdicts["RTY-10"]  # a MAY


def test_the_helper_prints_the_runs_own_key(tmp_path, gateway):
    # A fake that logs what the helper printed is caught by DBG-02: it printed the run's key.
    entry, verdicts = _run(gateway, tmp_path, REFRESHED, retries=1, logs_key=True)
    assert verdicts["DBG-02"]["verdict"] == "FAIL", verdicts["DBG-02"]
    assert "agent log" in verdicts["DBG-02"]["observed"]


def test_an_agent_that_gives_up_on_the_401_is_judged(tmp_path, gateway):
    entry, verdicts = _run(gateway, tmp_path, REFRESHED, retries=0)
    assert _chat(entry) == [401]
    assert "never retried" in verdicts["RTY-10"]["observed"]
    assert verdicts["RTY-10"]["verdict"] == "NON-STRICT", verdicts["RTY-10"]  # a MAY


def test_an_agent_that_refreshes_again_after_a_second_401_is_judged(tmp_path, gateway):
    entry, verdicts = _run(gateway, tmp_path, TWICE, retries=5)
    assert _chat(entry) == [401, 401, 200]
    assert verdicts["RTY-10"]["verdict"] == "NON-STRICT", verdicts["RTY-10"]


def test_the_helper_stops_at_one_refresh_after_a_second_401(tmp_path, gateway):
    entry, verdicts = _run(gateway, tmp_path, TWICE, retries=1)
    assert _chat(entry) == [401, 401]
    assert verdicts["RTY-10"]["verdict"] == "PASS", verdicts["RTY-10"]
