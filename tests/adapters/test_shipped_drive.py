"""Driven features of shipped agents (a profile's ``drive``): the abort signal, the fallback model
flag and the Stop hook, each against a fake Claude Code that honours it and one that ignores it.

The fakes run under the real Claude Code profile, so its argv, settings file and hook command
are the ones exercised; they speak the Anthropic Messages API like Claude Code does.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conformance.adapters.shipped import ProfileError, ShippedAdapter, load_profile
from conformance.runner import run_scenario
from fakes import Scenario
from tests.adapters.driven_scenarios import TOOL_TIMEOUT as TIMEOUT_SCENARIO
from tests.adapters.fake_qwen import QWEN_ASK

PROFILE = "claude-code-2-1-332"

PRELUDE = """
import json, os, signal, subprocess, sys, urllib.error, urllib.request
def api_key():
    # Like Claude Code: ANTHROPIC_API_KEY when set, else what the apiKeyHelper prints.
    if os.environ.get("ANTHROPIC_API_KEY"):
        return os.environ["ANTHROPIC_API_KEY"]
    settings = json.load(open(os.path.join(os.environ["HOME"], ".claude", "settings.json")))
    return subprocess.run(settings["apiKeyHelper"], shell=True, capture_output=True, text=True,
                          check=True).stdout.strip()
def ask(model, stream=False):
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    body = {"model": model, "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": sys.argv[sys.argv.index("-p") + 1]}]}
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "x-api-key": api_key(),
        "anthropic-version": "2023-06-01"})
    try:
        return urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc
def done(text):
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text}))
"""


def _fake(tmp_path: Path, body: str) -> ShippedAdapter:
    path = tmp_path / "fake-claude"
    path.write_text(f"#!{sys.executable}\n" + PRELUDE + textwrap.dedent(body))
    path.chmod(0o755)
    return ShippedAdapter(PROFILE, bin_path=str(path))


def _run(gateway, ad, scenario: dict):
    sc = Scenario.from_dict({"title": "driven", "prompt": "Say hello.", "deadline": 20, **scenario})
    entry, verdicts = run_scenario(gateway, ad, sc, dialect="anthropic_messages")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    return entry, verdicts


def _hello(entry) -> dict:
    return entry["events"][0]


def _driven(entry) -> dict:
    """The hello's ``driven`` but the key helper and the debug files, which are in every run of
    the profile (tests/adapters/test_shipped_credential.py, test_shipped_debug.py)."""
    every_run = ("credential_refresh", "debug_dump")
    return {k: v for k, v in _hello(entry)["driven"].items() if k not in every_run}


# -- the profile -----------------------------------------------------------------------------


def test_drives_earn_their_capabilities():
    for name in ("claude-code-2-1-332", "claude-code-2-1-197"):
        caps = ShippedAdapter(name).capabilities()
        assert {"abort", "fallback_model", "hooks", "stream_fallback_config"} <= caps
        # Its own feature, nothing driven: it compacts when it chooses (claude-code.md).
        assert "compaction" in caps and "compaction" not in ShippedAdapter(name).profile.drive


def _profile(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(
        'name: p\ninstall: {npm: "p@1.0.0", bin: p}\ncommand: ["{bin}"]\n' + textwrap.dedent(extra)
    )
    return path


def test_unknown_drive_names_file_and_line(tmp_path):
    path = _profile(tmp_path, "drive:\n  telepathy: {args: [x]}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:4: drive: .*telepathy"):
        load_profile(path)


def test_abort_needs_a_known_signal(tmp_path):
    path = _profile(tmp_path, "drive:\n  abort: {signal: SIGWHAT}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:5: drive\.abort\.signal"):
        load_profile(path)


def test_a_driven_capability_is_not_declared_twice(tmp_path):
    path = _profile(tmp_path, "capabilities: [hooks]\ndrive:\n  hooks: {args: [x]}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:4: capabilities: \['hooks'\]"):
        load_profile(path)


def test_unknown_placeholder_in_a_drive_names_its_line(tmp_path):
    path = _profile(tmp_path, "drive:\n  fallback_model:\n    args: ['{fallbak_model}']\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:6: .*unknown placeholder \{fallbak_model\}"):
        load_profile(path)


# -- abort: SIGINT when the scenario's abort fires ----------------------------------------------

ABORT = {
    "id": "drive-abort",
    "criteria": ["CTL-01"],
    "capabilities": ["abort"],
    "abort": {"when_step": 0},
    "script": [
        {
            "reply": {"text": "Hello there, friend!", "chunk_chars": 2, "finish_reason": "stop"},
            "fault": {"slow_dribble": {"interval": 0.1}},
        },
        {"reply": {"text": "Not to be reached.", "finish_reason": "stop"}},
    ],
}

STREAM_THEN_RESEND = """
r = ask(os.environ["ANTHROPIC_MODEL"], stream=True)
for line in r:
    pass
r = ask(os.environ["ANTHROPIC_MODEL"])
done(json.load(r)["content"][0]["text"])
"""


def test_abort_signal_stops_an_agent_that_honours_it(tmp_path, gateway):
    # Python's default SIGINT: KeyboardInterrupt mid-stream, the turn ends with nothing resent.
    body = "try:\n" + textwrap.indent(STREAM_THEN_RESEND, "    ")
    body += "except KeyboardInterrupt:\n    sys.exit(130)\n"
    entry, verdicts = _run(gateway, _fake(tmp_path, body), ABORT)
    assert _hello(entry)["driven"]["abort"].startswith("SIGINT sent")
    assert verdicts["CTL-01"]["verdict"] == "PASS", verdicts["CTL-01"]
    assert len([e for e in entry["journal"]["entries"] if e.get("kind") == "chat"]) == 1


def test_abort_signal_ignored_is_judged_a_failure(tmp_path, gateway):
    body = "signal.signal(signal.SIGINT, signal.SIG_IGN)\n" + STREAM_THEN_RESEND
    entry, verdicts = _run(gateway, _fake(tmp_path, body), ABORT)
    assert verdicts["CTL-01"]["verdict"] == "FAIL", verdicts["CTL-01"]


# -- fallback model: --fallback-model from config.fallback_model --------------------------------

FALLBACK = {
    "id": "drive-fallback",
    "criteria": ["MFB-01"],
    "capabilities": ["fallback_model"],
    "config": {"fallback_model": "conformance-fallback"},
    "script": [
        {
            "match": {"model": "conformance-model"},
            "times": 4,
            "fault": {
                "http_error": {
                    "status": 529,
                    "body": {"error": {"type": "overloaded_error", "message": "Overloaded"}},
                }
            },
        },
        {
            "match": {"model": "conformance-fallback"},
            "reply": {"text": "Hello from the fallback!", "finish_reason": "stop"},
        },
    ],
}

SWITCH_AFTER_TWO = """
models = [os.environ["ANTHROPIC_MODEL"]]
if "--fallback-model" in sys.argv:
    models.append(sys.argv[sys.argv.index("--fallback-model") + 1])
print(json.dumps({"type": "system", "subtype": "init", "argv": sys.argv[1:]}), file=sys.stderr)
overloads = 0
for _ in range(4):
    r = ask(models[min(overloads // 2, len(models) - 1)])
    if r.status == 200:
        done(json.load(r)["content"][0]["text"])
        sys.exit(0)
    overloads += 1
sys.exit(1)
"""


def test_fallback_flag_switches_an_agent_that_honours_it(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, SWITCH_AFTER_TWO), FALLBACK)
    assert '"--fallback-model", "conformance-fallback"' in entry["agent_log"]
    assert _driven(entry) == {"fallback_model": "arguments --fallback-model conformance-fallback"}
    assert verdicts["MFB-01"]["verdict"] == "PASS", verdicts["MFB-01"]


def test_fallback_flag_ignored_is_judged_a_failure(tmp_path, gateway):
    body = SWITCH_AFTER_TWO.replace('if "--fallback-model" in sys.argv:', "if False:")
    entry, verdicts = _run(gateway, _fake(tmp_path, body), FALLBACK)
    assert verdicts["MFB-01"]["verdict"] == "NON-STRICT", verdicts["MFB-01"]  # a SHOULD


def test_no_fallback_flag_without_a_fallback_model(tmp_path, gateway):
    sc = {**FALLBACK, "config": {}, "criteria": ["ERR-05"], "capabilities": []}
    sc["script"] = [{"reply": {"text": "Hi", "finish_reason": "stop"}}]
    entry, _ = _run(gateway, _fake(tmp_path, SWITCH_AFTER_TWO), sc)
    assert "--fallback-model" not in entry["agent_log"]
    assert _driven(entry) == {}  # no fallback model asked, no abort fired


# -- hooks: a Stop hook in --settings that calls the hosted stop_hook tool -------------------

HOOK = {
    "id": "drive-hook",
    "criteria": ["CTL-02"],
    "capabilities": ["hooks"],
    "config": {"stop_hook": True},
    "tool_host": {
        "stop_hook": [{"error": {"type": "blocked", "message": "Tests are failing."}}],
    },
    "script": [{"times": 5, "reply": {"text": "Hello!", "finish_reason": "stop"}}],
    "otherwise": {"reply": {"text": "Hello!", "finish_reason": "stop"}},
}

# Like Claude Code: after each reply, the Stop hooks of --settings run with a JSON event on
# stdin; {"continue": false} ends the turn with its stopReason; nothing printed lets it stop.
RUN_STOP_HOOKS = """
settings = json.load(open(sys.argv[sys.argv.index("--settings") + 1]))
(hook,) = [h for group in settings["hooks"]["Stop"] for h in group["hooks"]]
for turn in range(3):
    text = json.load(ask(os.environ["ANTHROPIC_MODEL"]))["content"][0]["text"]
    out = subprocess.run(hook["command"], shell=True, input='{"hook_event_name": "Stop"}',
                         capture_output=True, text=True, check=True).stdout
    said = json.loads(out) if out.strip() else {}
    if not said or BLOCK_ENDS_TURN:
        done(said.get("stopReason") or text)
        sys.exit(0)
"""


def test_stop_hook_block_ends_the_turn_of_an_agent_that_honours_it(tmp_path, gateway):
    entry, verdicts = _run(
        gateway, _fake(tmp_path, "BLOCK_ENDS_TURN = True\n" + RUN_STOP_HOOKS), HOOK
    )
    hooks = [e for e in entry["journal"]["entries"] if e.get("kind") == "tool"]
    assert [e["tool"] for e in hooks] == ["stop_hook"]
    assert verdicts["CTL-02"]["verdict"] == "PASS", verdicts["CTL-02"]
    assert "--settings" in _hello(entry)["driven"]["hooks"]


def test_stop_hook_block_taken_as_keep_working_is_judged(tmp_path, gateway):
    # An agent that treats the block as "keep working" calls the model and the hook again.
    body = "BLOCK_ENDS_TURN = False\n" + RUN_STOP_HOOKS
    entry, verdicts = _run(gateway, _fake(tmp_path, body), HOOK)
    assert verdicts["CTL-02"]["verdict"] == "NON-STRICT", verdicts["CTL-02"]


def test_stop_hook_ignored_leaves_nothing_to_judge(tmp_path, gateway):
    body = """
    text = json.load(ask(os.environ["ANTHROPIC_MODEL"]))["content"][0]["text"]
    done(text)
    """
    entry, verdicts = _run(gateway, _fake(tmp_path, body), HOOK)
    assert not [e for e in entry["journal"]["entries"] if e.get("kind") == "tool"]
    assert verdicts["CTL-02"]["verdict"] == "INFORMATIONAL", verdicts["CTL-02"]


# -- stream fallback switched off: an environment variable when config.stream_fallback is false --

FALLBACK_OFF = {
    "id": "drive-stream-fallback-off",
    "criteria": ["STR-12"],
    "capabilities": ["stream_fallback_config"],
    "config": {"stream_fallback": False},
    "script": [
        {
            "match": {"stream": True},
            "reply": {"text": "Hello there, my good friend!", "chunk_chars": 4},
            "fault": {"cut": {"after_events": 3, "mode": "reset"}},
        },
        {"match": {"stream": False}, "reply": {"text": "Fallback.", "finish_reason": "stop"}},
    ],
}

CUT_THEN_FALLBACK = """
try:
    for line in ask(os.environ["ANTHROPIC_MODEL"], stream=True):
        pass
except OSError:
    pass
if os.environ.get("CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK") == "1" and HONOURS:
    sys.exit(1)
done(json.load(ask(os.environ["ANTHROPIC_MODEL"]))["content"][0]["text"])
"""


def test_stream_fallback_switch_honoured(tmp_path, gateway):
    entry, verdicts = _run(
        gateway, _fake(tmp_path, "HONOURS = True\n" + CUT_THEN_FALLBACK), FALLBACK_OFF
    )
    assert (
        "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK"
        in _hello(entry)["driven"]["stream_fallback_config"]
    )
    assert verdicts["STR-12"]["verdict"] == "PASS", verdicts["STR-12"]


def test_stream_fallback_switch_ignored_is_judged(tmp_path, gateway):
    entry, verdicts = _run(
        gateway, _fake(tmp_path, "HONOURS = False\n" + CUT_THEN_FALLBACK), FALLBACK_OFF
    )
    assert verdicts["STR-12"]["verdict"] in ("FAIL", "NON-STRICT"), verdicts["STR-12"]


def test_stream_fallback_switch_only_when_config_says_false(tmp_path, gateway):
    sc = {**FALLBACK_OFF, "config": {"stream_fallback": True}, "criteria": ["ERR-05"]}
    sc["capabilities"] = []
    entry, _ = _run(gateway, _fake(tmp_path, "HONOURS = True\n" + CUT_THEN_FALLBACK), sc)
    assert _driven(entry) == {}


# -- Codex: the same hook command, from hooks.json in CODEX_HOME, enabled by its flags ----------

FAKE_CODEX_HOOKS = """
import tomllib
home = os.environ["CODEX_HOME"]
cfg = tomllib.load(open(os.path.join(home, "config.toml"), "rb"))
prov = cfg["model_providers"][cfg["model_provider"]]
body = {"model": cfg["model"], "input": "Say hello.", "stream": False}
req = urllib.request.Request(prov["base_url"] + "/responses", json.dumps(body).encode(),
    method="POST", headers={"content-type": "application/json",
    "authorization": "Bearer " + os.environ[prov["env_key"]]})
json.load(urllib.request.urlopen(req, timeout=10))
# Hooks run only when enabled by its flags (a fake that ignores them never runs one).
if HONOURS and "--enable" in sys.argv and "hooks" in sys.argv:
    hooks = json.load(open(os.path.join(home, "hooks.json")))["hooks"]["Stop"]
    (hook,) = [h for group in hooks for h in group["hooks"]]
    out = subprocess.run(hook["command"], shell=True, input="{}", capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out)["continue"] is False
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


def _fake_codex(tmp_path: Path, honours: bool) -> ShippedAdapter:
    path = tmp_path / "fake-codex"
    path.write_text(
        f"#!{sys.executable}\nimport json, os, subprocess, sys, urllib.request\n"
        f"HONOURS = {honours}\n" + textwrap.dedent(FAKE_CODEX_HOOKS)
    )
    path.chmod(0o755)
    return ShippedAdapter("codex", bin_path=str(path))


@pytest.mark.parametrize("honours", [True, False])
def test_codex_stop_hook(tmp_path, gateway, honours):
    sc = Scenario.from_dict({"title": "driven", "prompt": "Say hello.", "deadline": 20, **HOOK})
    entry, verdicts = run_scenario(
        gateway, _fake_codex(tmp_path, honours), sc, dialect="openai_responses"
    )
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    tools = [e["tool"] for e in entry["journal"]["entries"] if e.get("kind") == "tool"]
    if honours:
        assert tools == ["stop_hook"]
        assert verdicts["CTL-02"]["verdict"] == "PASS", verdicts["CTL-02"]
    else:
        assert tools == []
        assert verdicts["CTL-02"]["verdict"] == "INFORMATIONAL", verdicts["CTL-02"]


# -- a config key carried: config.tool_timeout_s as MCP_TOOL_TIMEOUT (milliseconds) ------------

TOOL_TIMEOUT = {"id": "carried-tool-timeout", **TIMEOUT_SCENARIO}

# A model request, then the tool call over the session's MCP server (its own limit from
# MCP_TOOL_TIMEOUT when HONOURS), then the result sent back.
CALL_OVER_MCP = """
cfg = json.load(open(sys.argv[sys.argv.index("--mcp-config") + 1]))
url = cfg["mcpServers"]["conformance"]["url"]
def rpc(method, params, sid=None, timeout=30):
    msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if sid:
        headers["mcp-session-id"] = sid
    req = urllib.request.Request(url, json.dumps(msg).encode(), headers=headers, method="POST")
    return urllib.request.urlopen(req, timeout=timeout)
ask(os.environ["ANTHROPIC_MODEL"]).read()
init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fake"}}
sid = rpc("initialize", init).headers["mcp-session-id"]
limit = int(os.environ.get("MCP_TOOL_TIMEOUT") or 0) / 1000 if HONOURS else None
try:
    rpc("tools/call", {"name": "run_tests", "arguments": {}}, sid, timeout=limit or 30).read()
    result = "ran"
except OSError:
    result = f"MCP tool run_tests timed out after {limit:g}s"
url2 = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
body = {"model": os.environ["ANTHROPIC_MODEL"], "max_tokens": 64, "messages": [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [
        {"type": "tool_use", "id": "call_1", "name": "mcp__conformance__run_tests", "input": {}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": result, "is_error": True}]}]}
req = urllib.request.Request(url2, json.dumps(body).encode(), method="POST", headers={
    "content-type": "application/json", "x-api-key": api_key(),
    "anthropic-version": "2023-06-01"})
urllib.request.urlopen(req, timeout=10).read()
done("Done.")
"""


def _run_mcp(gateway, ad, scenario: dict):
    sc = Scenario.from_dict({"title": "carried", "prompt": "Run the tests.", **scenario})
    entry, verdicts = run_scenario(
        gateway, ad, sc, dialect="anthropic_messages", tool_transport="mcp"
    )
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    return entry, verdicts


def test_tool_timeout_carried_to_an_agent_that_honours_it(tmp_path, gateway):
    ad = _fake(tmp_path, "HONOURS = True\n" + CALL_OVER_MCP)
    assert "tool_timeout_s" not in ad.traits.config_ignored
    entry, verdicts = _run_mcp(gateway, ad, TOOL_TIMEOUT)
    assert _hello(entry)["config_carried"] == {"tool_timeout_s": "environment MCP_TOOL_TIMEOUT"}
    assert verdicts["TOL-04"]["verdict"] == "PASS", verdicts["TOL-04"]


def test_tool_timeout_carried_but_ignored_is_judged_a_failure(tmp_path, gateway):
    entry, verdicts = _run_mcp(
        gateway, _fake(tmp_path, "HONOURS = False\n" + CALL_OVER_MCP), TOOL_TIMEOUT
    )
    assert verdicts["TOL-04"]["verdict"] == "FAIL", verdicts["TOL-04"]
    assert "waited for the tool's own reply" in verdicts["TOL-04"]["observed"]


def test_tool_timeout_is_carried_only_when_the_scenario_sets_it(tmp_path, gateway):
    sc = {**TOOL_TIMEOUT, "config": {}, "criteria": ["ERR-05"]}
    entry, _ = _run_mcp(gateway, _fake(tmp_path, "HONOURS = True\n" + CALL_OVER_MCP), sc)
    assert "config_carried" not in _hello(entry)


def test_a_config_key_is_not_carried_and_ignored_at_once(tmp_path):
    path = _profile(
        tmp_path,
        "config_ignored: [tool_timeout_s]\n"
        "config_carried:\n  tool_timeout_s: {env: {T: '{tool_timeout_ms}'}}\n",
    )
    with pytest.raises(ProfileError, match=r"config_carried: \['tool_timeout_s'\]"):
        load_profile(path)


# -- Qwen Code's fallback model: the flag, and the fallback listed in its settings -------------

QWEN = (
    QWEN_ASK
    + """
# As Qwen Code: --fallback-model names the fallback, which resolves only when a settings file
# lists it under modelProviders; else it is the primary, and skipped.
models = [os.environ["OPENAI_MODEL"]]
if "--fallback-model" in sys.argv:
    fb = sys.argv[sys.argv.index("--fallback-model") + 1]
    path = os.environ.get("QWEN_CODE_SYSTEM_SETTINGS_PATH", "")
    listed = json.load(open(path)) if LISTED and os.path.exists(path) else {}
    if fb in [m.get("id") for m in listed.get("modelProviders", {}).get("openai", [])]:
        models.append(fb)
overloads = 0
for _ in range(4):
    r = ask(models[min(overloads // 2, len(models) - 1)])
    if r.status == 200:
        text = json.load(r)["choices"][0]["message"]["content"]
        print(json.dumps([{"type": "assistant", "message": {"content": [{"type": "text",
            "text": text}]}}, {"type": "result", "is_error": False, "result": text}]))
        sys.exit(0)
    overloads += 1
sys.exit(1)
"""
)


def _qwen_fake(tmp_path: Path, listed: bool) -> ShippedAdapter:
    path = tmp_path / "fake-qwen"
    path.write_text(f"#!{sys.executable}\nLISTED = {listed}\n" + textwrap.dedent(QWEN))
    path.chmod(0o755)
    return ShippedAdapter("qwen-code", bin_path=str(path))


@pytest.mark.parametrize("listed", [True, False])
def test_qwen_fallback_is_listed_in_its_settings(tmp_path, gateway, listed):
    sc = Scenario.from_dict({"title": "qwen fallback", "prompt": "Say hello.", **FALLBACK})
    entry, verdicts = run_scenario(gateway, _qwen_fake(tmp_path, listed), sc)
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    assert "fallback_model" in _hello(entry)["driven"]
    # The fake that reads the settings file switches; one that does not is judged for it.
    want = "PASS" if listed else "NON-STRICT"
    assert verdicts["MFB-01"]["verdict"] == want, verdicts["MFB-01"]
