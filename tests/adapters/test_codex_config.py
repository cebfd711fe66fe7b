"""What the Codex CLI profile gives Codex in its own terms: the tool time limit as its MCP
client's ``tool_timeout_sec`` (``config_carried``), its key from a provider auth command run
again after a 401 (``drive.credential_refresh``), and the output limit it has no setting for
(``config_ignored``).

The fakes run under the real Codex profile and read their configuration as Codex does
(``$CODEX_HOME/config.toml`` with each ``-c key=value`` override parsed as TOML), so the
profile's arguments and files are the ones exercised against the real gateway.
"""

from __future__ import annotations

import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from conformance.adapters.shipped import ShippedAdapter, load_profile
from conformance.runner import run_scenario
from fakes import Scenario
from tests.adapters.driven_scenarios import EXPIRED
from tests.adapters.driven_scenarios import TOOL_TIMEOUT as TIMEOUT_SCENARIO

# Like Codex: config.toml, then the -c overrides (dotted keys, TOML values, else a string);
# the chosen provider's key from its auth command (which it will not combine with env_key) or
# its env_key; one refresh after a 401, and a resend.
PRELUDE = """
import json, os, subprocess, sys, tomllib, urllib.error, urllib.request
cfg = tomllib.load(open(os.path.join(os.environ["CODEX_HOME"], "config.toml"), "rb"))
args = sys.argv[1:]
for i, a in enumerate(args):
    if a == "-c":
        key, _, raw = args[i + 1].partition("=")
        try:
            value = tomllib.loads("v = " + raw)["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        *path, last = key.split(".")
        node = cfg
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
prov = cfg["model_providers"][cfg["model_provider"]]
assert not ("auth" in prov and "env_key" in prov), "auth cannot be combined with env_key"
runs = 0
def key():
    global runs
    if "auth" not in prov:
        return os.environ[prov["env_key"]]
    runs += 1
    auth = prov["auth"]
    return subprocess.run([auth["command"], *auth.get("args", [])], capture_output=True,
                          text=True, check=True).stdout.strip()
def ask(input_items, k):
    body = {"model": cfg["model"], "input": input_items, "stream": False}
    req = urllib.request.Request(prov["base_url"] + "/responses", json.dumps(body).encode(),
        method="POST", headers={"content-type": "application/json",
        "authorization": "Bearer " + k})
    try:
        return urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc
def done(text):
    print(json.dumps({"type": "thread.started", "thread_id": "t"}))
    print(json.dumps({"type": "item.completed",
                      "item": {"id": "item_0", "type": "agent_message", "text": text}}))
    print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


def _fake(tmp_path: Path, body: str, **flags: object) -> ShippedAdapter:
    path = tmp_path / "fake-codex"
    head = "".join(f"{k} = {v!r}\n" for k, v in flags.items())
    path.write_text(f"#!{sys.executable}\n" + head + PRELUDE + textwrap.dedent(body))
    path.chmod(0o755)
    return ShippedAdapter("codex", bin_path=str(path))


def _run(gateway, ad: ShippedAdapter, scenario: dict, **kw):
    sc = Scenario.from_dict({"title": "codex config", "prompt": "Run the tests.", **scenario})
    entry, verdicts = run_scenario(gateway, ad, sc, dialect="openai_responses", **kw)
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    return entry, verdicts


def _chat(entry) -> list[int]:
    return [e["response"]["status"] for e in entry["journal"]["entries"] if e["kind"] == "chat"]


# -- the profile -------------------------------------------------------------------------------


def test_the_profile_carries_the_tool_limit_and_ignores_the_output_limit():
    prof = load_profile("codex")
    assert prof.config_carried["tool_timeout_s"] == {
        "args": ["-c", "mcp_servers.conformance.tool_timeout_sec={tool_timeout_s}"]
    }
    # No setting sets the max_output_tokens it asks (it asks none): carried, TRN-07 would
    # pass on a limit never sent.
    ad = ShippedAdapter("codex")
    assert {"max_tool_calls", "max_output_tokens"} <= ad.traits.config_ignored
    assert "tool_timeout_s" not in ad.traits.config_ignored
    assert "max_output_tokens" not in prof.config_carried


def test_the_profile_earns_credential_refresh_by_a_provider_auth_command():
    ad = ShippedAdapter("codex")
    assert "credential_refresh" in ad.capabilities()
    drive = ad.profile.drive["credential_refresh"]
    assert "when" not in drive  # one configuration for every run of the profile
    # The provider it chooses is the profile's gateway provider with the command for env_key.
    (own,) = [f["text"] for f in ad.profile.files if f["path"] == ".codex/config.toml"]
    fake = tomllib.loads(own)["model_providers"]["fake"]
    sets = dict(zip(drive["args"][1::2], drive["args"][::2], strict=True))
    assert set(sets.values()) == {"-c"}
    overrides = {}
    for arg in sets:
        key, _, raw = arg.partition("=")
        overrides[key] = tomllib.loads("v = " + raw)["v"]
    chosen = overrides["model_provider"]
    prov = overrides[f"model_providers.{chosen}"]
    assert "env_key" not in prov
    assert {k: prov[k] for k in ("base_url", "wire_api")} == {
        k: fake[k] for k in ("base_url", "wire_api")
    }
    assert prov["auth"] == {"command": "{python}", "args": ["{home}/.codex/api_key.py"]}
    (script,) = [f for f in drive["files"] if f["path"] == ".codex/api_key.py"]
    # It asks the run's credential source, whose key is new once one has expired (RTY-10).
    assert '"{credential_url}"' in script["text"]
    assert script["text"].strip().endswith('print(key or "{api_key}")')
    # A catalog of its own keeps it from listing the gateway's models before its first
    # request; Codex takes a model's metadata from the entry whose slug prefixes the model's
    # name, so none may: the run's model keeps the fallback metadata it has with env_key.
    assert overrides["model_catalog_json"] == "{home}/.codex/models.json"
    (catalog,) = [f["json"] for f in drive["files"] if f["path"] == ".codex/models.json"]
    assert catalog["models"]
    assert not [m for m in catalog["models"] if "conformance-model".startswith(m["slug"])]


# -- the tool time limit: config.tool_timeout_s as -c mcp_servers.conformance.tool_timeout_sec --

TOOL_TIMEOUT = {"id": "codex-tool-timeout", **TIMEOUT_SCENARIO}

# A model request, then the tool call over the session's MCP server (its own limit from
# mcp_servers.conformance.tool_timeout_sec when HONOURS), then the result sent back.
CALL_OVER_MCP = """
server = cfg["mcp_servers"]["conformance"]
limit = server.get("tool_timeout_sec")
print("tool_timeout_sec:", repr(limit), file=sys.stderr)
def rpc(method, params, sid=None, timeout=30):
    msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if sid:
        headers["mcp-session-id"] = sid
    req = urllib.request.Request(server["url"], json.dumps(msg).encode(), headers=headers,
                                 method="POST")
    return urllib.request.urlopen(req, timeout=timeout)
k = key()
user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
ask([user], k).read()
init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fake"}}
sid = rpc("initialize", init).headers["mcp-session-id"]
wait = limit if HONOURS else None
try:
    rpc("tools/call", {"name": "run_tests", "arguments": {}}, sid, timeout=wait or 30).read()
    result = "ran"
except OSError:
    result = f"timed out awaiting tools/call after {wait:g}s"
call = {"type": "function_call", "call_id": "call_1", "name": "run_tests", "arguments": "{}"}
out = {"type": "function_call_output", "call_id": "call_1", "output": result}
ask([user, call, out], k).read()
done("Done.")
"""


def test_tool_timeout_carried_as_its_mcp_servers_tool_timeout_sec(tmp_path, gateway):
    ad = _fake(tmp_path, CALL_OVER_MCP, HONOURS=True)
    entry, verdicts = _run(gateway, ad, TOOL_TIMEOUT, tool_transport="mcp")
    assert entry["events"][0]["config_carried"] == {
        "tool_timeout_s": "arguments -c mcp_servers.conformance.tool_timeout_sec=1.0"
    }
    # A TOML float, the type of Codex's setting (seconds).
    assert "tool_timeout_sec: 1.0" in entry["agent_log"]
    assert verdicts["TOL-04"]["verdict"] == "PASS", verdicts["TOL-04"]


def test_a_fractional_limit_stays_in_seconds(tmp_path, gateway):
    sc = {
        **TOOL_TIMEOUT,
        "config": {"tool_timeout_s": 0.5},
        "tool_host": {"run_tests": [{"output": "ok"}]},
    }
    sc["criteria"] = ["ERR-05"]
    entry, _ = _run(gateway, _fake(tmp_path, CALL_OVER_MCP, HONOURS=True), sc, tool_transport="mcp")
    assert "tool_timeout_sec: 0.5" in entry["agent_log"]


def test_tool_timeout_carried_but_ignored_is_judged_a_failure(tmp_path, gateway):
    ad = _fake(tmp_path, CALL_OVER_MCP, HONOURS=False)
    _, verdicts = _run(gateway, ad, TOOL_TIMEOUT, tool_transport="mcp")
    assert verdicts["TOL-04"]["verdict"] == "FAIL", verdicts["TOL-04"]
    assert "waited for the tool's own reply" in verdicts["TOL-04"]["observed"]


def test_tool_timeout_is_carried_only_when_the_scenario_sets_it(tmp_path, gateway):
    sc = {
        **TOOL_TIMEOUT,
        "config": {},
        "criteria": ["ERR-05"],
        "tool_host": {"run_tests": [{"output": "ok"}]},
    }
    ad = _fake(tmp_path, CALL_OVER_MCP, HONOURS=True)
    entry, _ = _run(gateway, ad, sc, tool_transport="mcp")
    assert "config_carried" not in entry["events"][0]
    assert "tool_timeout_sec: None" in entry["agent_log"]


# -- credential refresh: the key from the provider's auth command, run again after a 401 -------

REFRESHED = {
    "id": "codex-credential-refresh",
    "criteria": ["RTY-10", "DBG-02"],
    "capabilities": ["credential_refresh"],
    "deadline": 20,
    "script": [EXPIRED, {"reply": {"text": "Hello!", "finish_reason": "stop"}}],
}
TWICE = {
    **REFRESHED,
    "id": "codex-credential-refresh-twice",
    "script": [
        {"times": 2, **EXPIRED},
        {"reply": {"text": "Not to be reached.", "finish_reason": "stop"}},
    ],
}

# As measured on Codex 0.171.0: a 401 runs the command again and the request is resent; a 401
# to that resend is resent once more (its retries) without running it.
ASK_WITH_REFRESH = """
user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
r = ask([user], key())
if r.status == 401:
    k = key()
    r = ask([user], k)
    if r.status == 401 and RESENDS:
        r = ask([user], k)
print("auth runs:", runs, file=sys.stderr)
if r.status != 200:
    print(json.dumps({"type": "turn.failed", "error": {"message": f"unexpected status {r.status}"}}))
    sys.exit(1)
done("".join(c.get("text", "") for o in json.load(r)["output"] if o.get("type") == "message"
             for c in o.get("content", [])))
"""


def test_the_command_gives_the_key_and_runs_again_after_the_401(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, ASK_WITH_REFRESH, RESENDS=True), REFRESHED)
    assert "auth runs: 2" in entry["agent_log"]
    assert "provider auth command" in entry["events"][0]["driven"]["credential_refresh"]
    assert _chat(entry) == [401, 200]
    assert verdicts["RTY-10"]["verdict"] == "PASS", verdicts["RTY-10"]
    assert verdicts["DBG-02"]["verdict"] == "PASS", verdicts["DBG-02"]


@pytest.mark.parametrize(
    ("resends", "statuses", "verdict"),
    [(True, [401, 401, 200], "NON-STRICT"), (False, [401, 401], "PASS")],
)
def test_a_second_401_is_judged(tmp_path, gateway, resends, statuses, verdict):
    # Codex resends after the second 401 too (measured): RTY-10 asks for one retry only.
    entry, verdicts = _run(gateway, _fake(tmp_path, ASK_WITH_REFRESH, RESENDS=resends), TWICE)
    assert "auth runs: 2" in entry["agent_log"]
    assert _chat(entry) == statuses
    assert verdicts["RTY-10"]["verdict"] == verdict, verdicts["RTY-10"]
