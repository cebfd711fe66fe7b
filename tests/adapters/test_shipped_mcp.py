"""Shipped agents on the session's MCP tool host (a profile's ``mcp``): the bundled profiles'
MCP configuration, exercised by fake agents that read it as the real CLI does.

Each fake runs under the real profile (its argv, environment and files), finds the MCP server's
URL where that CLI looks for it, lists the tools over streamable HTTP, offers them to the model
under the CLI's own names, and carries out the model's tool call with ``tools/call``. The tool
criteria are then judged from the wire, as for a real agent.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conformance.adapters.shipped import ProfileError, ShippedAdapter, load_profile, mcp_endpoint
from conformance.runner import run_scenario
from fakes import Scenario

PRELUDE = """
import json, os, sys, urllib.request
def post(url, body, headers):
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        raw = r.read()
        return r.headers, (json.loads(raw) if raw else None)
def rpc(url, sid, method, params=None, rid=None):
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if rid is not None:
        msg["id"] = rid
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    h, reply = post(url, msg, headers)
    return h.get("Mcp-Session-Id") or sid, reply
class Mcp:
    def __init__(self, url):
        self.url = url
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "fake", "version": "1"}}
        self.sid, _ = rpc(url, None, "initialize", hello, 1)
        rpc(url, self.sid, "notifications/initialized")
        self.tools = rpc(url, self.sid, "tools/list", {}, 2)[1]["result"]["tools"]
    def call(self, name, args):
        reply = rpc(self.url, self.sid, "tools/call", {"name": name, "arguments": args}, 3)[1]
        res = reply.get("result") or {}
        text = "".join(c.get("text", "") for c in res.get("content", []))
        return text or str(reply.get("error")), bool(res.get("isError")) or "error" in reply
# CALLS_TOOL_HOST false: the fake answers the model's tool call itself, never running the tool.
CALLS_TOOL_HOST = True
"""

# --- Claude Code: --mcp-config FILE, tools mcp__<server>__<tool>, Anthropic Messages ---------

CLAUDE = """
argv = sys.argv
config = json.load(open(argv[argv.index("--mcp-config") + 1]))
assert "--strict-mcp-config" in argv and argv[argv.index("--allowedTools") + 1] == "mcp__conformance"
assert os.environ["ENABLE_TOOL_SEARCH"] == "false"
server = config["mcpServers"]["conformance"]
assert server["type"] == "http"
mcp = Mcp(server["url"])
tools = [{"name": "mcp__conformance__" + t["name"], "description": t.get("description", ""),
          "input_schema": t["inputSchema"]} for t in mcp.tools]
messages = [{"role": "user", "content": argv[argv.index("-p") + 1]}]
headers = {"content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"],
           "anthropic-version": "2023-06-01"}
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
for _ in range(4):
    body = {"model": os.environ["ANTHROPIC_MODEL"], "max_tokens": 64, "messages": messages,
            "tools": tools}
    content = post(url, body, headers)[1]["content"]
    messages.append({"role": "assistant", "content": content})
    uses = [c for c in content if c["type"] == "tool_use"]
    if not uses:
        break
    results = []
    for u in uses:
        name = u["name"].removeprefix("mcp__conformance__")
        text, err = mcp.call(name, u["input"]) if CALLS_TOOL_HOST else ("wrote 2 bytes", False)
        results.append({"type": "tool_result", "tool_use_id": u["id"], "content": text,
                        "is_error": err})
    messages.append({"role": "user", "content": results})
text = "".join(c.get("text", "") for c in messages[-1]["content"] if c["type"] == "text")
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text}))
"""

# --- chat completions agents: Qwen Code and opencode -------------------------------------------

CHAT = """
def chat_loop(base, key, model, prompt, prefix):
    tools = [{"type": "function", "function": {"name": prefix + t["name"],
              "description": t.get("description", ""), "parameters": t["inputSchema"]}}
             for t in mcp.tools]
    messages = [{"role": "user", "content": prompt}]
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    for _ in range(4):
        body = {"model": model, "messages": messages, "tools": tools}
        msg = post(base + "/chat/completions", body, headers)[1]["choices"][0]["message"]
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg.get("content") or ""
        for c in msg["tool_calls"]:
            name = c["function"]["name"].removeprefix(prefix)
            args = json.loads(c["function"]["arguments"])
            text, _ = mcp.call(name, args) if CALLS_TOOL_HOST else ("wrote 2 bytes", False)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": text})
    return ""
"""

QWEN = (
    CHAT
    + """
settings = json.load(open(os.path.join(os.getcwd(), ".qwen", "settings.json")))
server = settings["mcpServers"]["conformance"]
assert server["trust"] is True and server["alwaysLoadTools"] is True
assert server["discoveryTimeoutMs"] == 300000
assert {"write_file", "read_file"} <= set(settings["tools"]["disabled"])
mcp = Mcp(server["httpUrl"])
text = chat_loop(os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"],
                 os.environ["OPENAI_MODEL"], sys.argv[-1], "mcp__conformance__")
print(json.dumps([{"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}},
                  {"type": "result", "is_error": False, "result": text}]))
"""
)

OPENCODE = (
    CHAT
    + """
config = json.load(open(os.path.join(os.getcwd(), "opencode.json")))
user = json.load(open(os.path.join(os.environ["XDG_CONFIG_HOME"], "opencode", "opencode.json")))
provider = user["provider"]["fake"]["options"]
((server_name, server),) = config["mcp"].items()
assert server["type"] == "remote" and server["enabled"] is True and server["oauth"] is False
mcp = Mcp(server["url"])
# opencode's name for an MCP tool: the server's and the tool's name joined by one "_".
text = chat_loop(provider["baseURL"], provider["apiKey"], sys.argv[sys.argv.index("-m") + 1][5:],
                 sys.argv[-1], server_name + "_")
print(json.dumps({"type": "text", "part": {"messageID": "m1", "text": text}}))
"""
)

# --- Codex: -c mcp_servers.<name>.url, tools inside a Responses `namespace` tool ------------

CODEX = """
import tomllib
argv = sys.argv
overrides = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-c")
url = json.loads(overrides["mcp_servers.conformance.url"])
assert json.loads(overrides["mcp_servers.conformance.default_tools_approval_mode"]) == "approve"
config = tomllib.load(open(os.path.join(os.environ["CODEX_HOME"], "config.toml"), "rb"))
provider = config["model_providers"][config["model_provider"]]
mcp = Mcp(url)
space = {"type": "namespace", "name": "mcp__conformance", "tools": [
    {"type": "function", "name": t["name"], "parameters": t["inputSchema"]} for t in mcp.tools]}
items = [{"role": "user", "content": argv[argv.index("--json") + 1]}]
headers = {"Authorization": "Bearer " + os.environ[provider["env_key"]],
           "Content-Type": "application/json"}
text = ""
for _ in range(4):
    body = {"model": config["model"], "input": items, "tools": [space], "stream": False}
    out = post(provider["base_url"] + "/responses", body, headers)[1]["output"]
    items.extend(out)
    calls = [o for o in out if o["type"] == "function_call"]
    text = "".join(c["text"] for o in out if o["type"] == "message" for c in o["content"])
    if not calls:
        break
    for c in calls:
        # As Codex: a call routes by its namespace; without one it is not an MCP tool.
        if c.get("namespace") == "mcp__conformance" and CALLS_TOOL_HOST:
            result, _ = mcp.call(c["name"], json.loads(c["arguments"]))
        else:
            result = "unsupported call: " + c["name"]
        items.append({"type": "function_call_output", "call_id": c["call_id"], "output": result})
print(json.dumps({"type": "item.completed", "item": {"type": "agent_message", "text": text}}))
"""

AGENTS = {
    "claude-code-2-1-332": (CLAUDE, "anthropic_messages"),
    "claude-code-2-1-197": (CLAUDE, "anthropic_messages"),
    "qwen-code": (QWEN, "openai_chat"),
    "opencode": (OPENCODE, "openai_chat"),
    "codex": (CODEX, "openai_responses"),
}

RAISES = {
    "id": "mcp-tool-raises",
    "title": "a hosted tool that fails, over MCP",
    "criteria": ["TOL-03", "TOL-06"],
    "capabilities": ["tools"],
    "prompt": "Write hi to a.txt.",
    "deadline": 20,
    "tools": [
        {
            "name": "write_file",
            "description": "Write a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        }
    ],
    "tool_host": {"write_file": [{"error": {"type": "execution_error", "message": "disk full"}}]},
    "script": [
        {
            "reply": {
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "write_file",
                        "arguments": '{"path": "a.txt", "content": "hi"}',
                    }
                ],
                "finish_reason": "tool_calls",
            }
        },
        {"times": 3, "reply": {"text": "Done.", "finish_reason": "stop"}},
    ],
}


def _fake(tmp_path: Path, profile: str, calls_tool_host: bool = True) -> ShippedAdapter:
    body, _ = AGENTS[profile]
    path = tmp_path / "fake-agent"
    flag = f"CALLS_TOOL_HOST = {calls_tool_host}\n"
    path.write_text(f"#!{sys.executable}\n" + PRELUDE + flag + textwrap.dedent(body))
    path.chmod(0o755)
    # time_warp 1: real time (the fake is no Node program for the fast clock to preload into).
    return ShippedAdapter(profile, bin_path=str(path), time_warp=1.0)


def _run(gateway, ad: ShippedAdapter, profile: str, scenario: dict):
    sc = Scenario.from_dict(scenario)
    entry, verdicts = run_scenario(gateway, ad, sc, dialect=AGENTS[profile][1])
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    return entry, verdicts


def _mcp(entry, method: str) -> list[dict]:
    return [
        e
        for e in entry["journal"]["entries"]
        if e.get("kind") == "mcp" and e.get("rpc_method") == method
    ]


@pytest.mark.parametrize("profile", sorted(AGENTS))
def test_profile_points_the_agent_at_the_mcp_tool_host(tmp_path, gateway, profile):
    ad = _fake(tmp_path, profile)
    assert "tools" in ad.capabilities()
    entry, verdicts = _run(gateway, ad, profile, RAISES)
    hello = entry["events"][0]
    assert hello["mcp"]["endpoint"].endswith("/mcp") and "/s/" in hello["mcp"]["endpoint"]
    (call,) = _mcp(entry, "tools/call")
    assert call["tool"] == "write_file" and call["behaviour"] == "error"
    # The scripted call reached the agent under the name it offered, and its result came back.
    chats = [e for e in entry["journal"]["entries"] if e.get("kind") == "chat"]
    assert len(chats) == 2, [e.get("kind") for e in entry["journal"]["entries"]]
    assert "disk full" in str(chats[1]["body"])
    assert verdicts["TOL-03"]["verdict"] == "PASS", verdicts["TOL-03"]
    assert verdicts["TOL-06"]["verdict"] == "PASS", verdicts["TOL-06"]


def test_a_tool_result_the_agent_made_up_is_not_a_pass(tmp_path, gateway):
    profile = "qwen-code"
    entry, verdicts = _run(
        gateway, _fake(tmp_path, profile, calls_tool_host=False), profile, RAISES
    )
    assert _mcp(entry, "tools/list") and not _mcp(entry, "tools/call")
    assert verdicts["TOL-03"]["verdict"] != "PASS", verdicts["TOL-03"]


@pytest.mark.parametrize("profile", sorted(AGENTS))
def test_no_mcp_server_for_a_scenario_without_tools(tmp_path, gateway, profile):
    # The fake needs its MCP configuration: without tools it is not written, and the agent fails.
    sc = {**RAISES, "id": "mcp-none", "criteria": ["ERR-05"], "capabilities": []}
    del sc["tools"], sc["tool_host"]
    sc["script"] = [{"reply": {"text": "Hi.", "finish_reason": "stop"}}]
    entry, _ = _run(gateway, _fake(tmp_path, profile), profile, sc)
    assert "mcp" not in entry["events"][0]
    assert entry["events"][-1]["reason"] == "error"
    assert not [e for e in entry["journal"]["entries"] if e.get("kind") == "mcp"]


def test_mcp_endpoint_from_the_start_else_beside_the_tool_endpoint():
    base = "http://127.0.0.1:8123/s/7f3a"
    assert mcp_endpoint({"tool_endpoint": f"{base}/tools"}) == f"{base}/mcp"
    assert mcp_endpoint({"tool_endpoint": f"{base}/tools/"}) == f"{base}/mcp"
    assert mcp_endpoint({"mcp_endpoint": "http://127.0.0.1:1/x", "tool_endpoint": "y"}) == (
        "http://127.0.0.1:1/x"
    )
    assert mcp_endpoint({"tool_endpoint": "http://127.0.0.1:1/elsewhere"}) == ""
    assert mcp_endpoint({}) == ""


def _profile(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(
        'name: p\ninstall: {npm: "p@1.0.0", bin: p}\ncommand: ["{bin}"]\n' + textwrap.dedent(extra)
    )
    return path


def test_mcp_capability_is_not_declared_twice(tmp_path):
    path = _profile(tmp_path, "capabilities: [tools]\nmcp:\n  capabilities: [tools]\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:4: capabilities: \['tools'\] .* `mcp`"):
        load_profile(path)


def test_mcp_needs_the_capabilities_it_earns(tmp_path):
    path = _profile(tmp_path, "mcp:\n  args: [x]\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:4: mcp: 'capabilities' is a required"):
        load_profile(path)


def test_unknown_placeholder_in_mcp_names_its_line(tmp_path):
    path = _profile(tmp_path, "mcp:\n  capabilities: [tools]\n  args: ['{mcp_endpiont}']\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:6: .*unknown placeholder \{mcp_endpiont\}"):
        load_profile(path)
