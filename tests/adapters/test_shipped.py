"""The shipped:<profile> adapter and the loopback guard, against fake shipped agents.

A fake shipped agent is a Python script that knows nothing of the adapter protocol: like a real
coding agent it reads its settings from the environment and from a configuration file in HOME,
calls the gateway's chat completions endpoint, and prints its answer.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conformance.adapters import RunRequest, make_adapter
from conformance.adapters.guard import (
    LoopbackGuard,
    RefusingProxy,
    certify_problems,
    netns_available,
    proxy_env,
)
from conformance.adapters.shipped import (
    ProfileError,
    ShippedAdapter,
    load_profile,
    parse_output,
    render,
)
from conformance.runner import run_scenario
from fakes import Scenario

KEY = "sk-test-SHIPPED-0123456789abcdef"
NETNS, NETNS_WHY = netns_available()
needs_netns = pytest.mark.skipif(not NETNS, reason=f"no network namespace here: {NETNS_WHY}")

PROFILE = """\
name: fake
description: a fake shipped agent
install:
  npm: "fake-agent@1.2.3"
  bin: fake
command: ["{python}", "{{bin}}", "--model", "{{model}}", "{{prompt}}"]
env:
  FAKE_BASE_URL: "{{base_url}}"
  FAKE_API_KEY: "{{api_key}}"
files:
  - root: home
    path: .fake/settings.json
    json:
      model: "{{model}}"
      telemetry: {{enabled: false}}
      literal: "{{not a placeholder}}"
capabilities: []
output: text
"""

AGENT_PRELUDE = textwrap.dedent(
    """
    import json, os, socket, subprocess, sys, time, urllib.request
    base, key = os.environ["FAKE_BASE_URL"], os.environ["FAKE_API_KEY"]
    settings = json.load(open(os.path.expanduser("~/.fake/settings.json")))
    prompt = sys.argv[-1]
    def chat():
        body = {"model": settings["model"], "stream": False,
                "messages": [{"role": "user", "content": prompt}]}
        req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
            {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        # NO_PROXY covers 127.0.0.1, as it does for the real agents.
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)["choices"][0]["message"]["content"]
    """
)


def fake_agent(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake_agent.py"
    script.write_text(AGENT_PRELUDE + textwrap.dedent(body))
    return str(script)


def profile_file(tmp_path: Path, text: str = PROFILE, name: str = "fake") -> Path:
    path = tmp_path / f"{name}.yaml"
    # PROFILE doubles its braces (placeholders stay literal); {python} is this interpreter.
    path.write_text(text.replace("{python}", sys.executable).replace("{{", "{").replace("}}", "}"))
    return path


def adapter(tmp_path: Path, body: str, **kw) -> ShippedAdapter:
    return ShippedAdapter(
        profile_file(tmp_path), bin_path=fake_agent(tmp_path, body), use_netns=kw.pop("netns", None)
    )


def request(tmp_path: Path, base_url: str = "http://127.0.0.1:9/s/x/v1", deadline_s: float = 10):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return RunRequest(
        start={"type": "start", "prompt": "Say hello.", "model": "conformance-model"},
        base_url=base_url,
        api_key=KEY,
        ca_file=None,
        workdir=work,
        deadline_s=deadline_s,
    )


def group_alive(pgid: int) -> bool:
    """True if a live (non-zombie) process is still in process group `pgid`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def hello_scenario(**extra) -> Scenario:
    return Scenario.from_dict(
        {
            "id": "shipped-hello",
            "title": "a plain answer",
            "criteria": ["RTY-05"],
            "capabilities": [],
            "prompt": "Say hello.",
            "deadline": 10,
            "script": [{"reply": {"text": "Hello!", "finish_reason": "stop"}}],
            **extra,
        }
    )


# -- profiles -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen-code", "opencode"])
def test_bundled_profiles_load_pinned_and_honest(name):
    prof = load_profile(name)
    assert prof.version[0].isdigit() and "^" not in prof.npm and "~" not in prof.npm
    assert "time_scale" not in prof.capabilities
    assert "tools" not in prof.capabilities  # their tools are their own, not the hosted ones
    assert prof.install_dir.name == f"{name}-{prof.version}"
    assert prof.telemetry, "each profile documents its telemetry and update settings"


def test_agents_offline_versions():
    assert load_profile("qwen-code").npm == "@qwen-code/qwen-code@0.24.4"
    assert load_profile("opencode").npm == "opencode-ai@1.18.33"


def test_profile_unknown_name_lists_known():
    with pytest.raises(ProfileError, match=r"no such profile 'nope'.*qwen-code"):
        load_profile("nope")


def test_profile_schema_error_names_file_and_line(tmp_path):
    text = PROFILE.replace('command: ["{python}", "{{bin}}", "--model", "{{model}}", "{{prompt}}"]',
                           'command: "{{bin}} {{prompt}}"')  # fmt: skip
    path = profile_file(tmp_path, text)
    with pytest.raises(ProfileError) as exc:
        load_profile(path)
    assert str(exc.value).startswith(f"{path}:6: command:"), exc.value


def test_profile_unknown_placeholder_names_line(tmp_path):
    path = profile_file(tmp_path, PROFILE.replace('FAKE_API_KEY: "{{api_key}}"', 'X: "{{apikey}}"'))
    with pytest.raises(ProfileError, match=r":9: env\.X: unknown placeholder \{apikey\}"):
        load_profile(path)


def test_profile_bad_yaml_names_line(tmp_path):
    path = profile_file(tmp_path, PROFILE + "env: [unclosed\n")
    with pytest.raises(ProfileError, match=r"fake\.yaml:\d+: invalid YAML"):
        load_profile(path)


def test_profile_name_must_match_stem(tmp_path):
    path = profile_file(tmp_path, name="other")
    with pytest.raises(ProfileError, match=r"other\.yaml:1: name: 'fake' must equal"):
        load_profile(path)


def test_profile_refuses_time_scale(tmp_path):
    path = profile_file(tmp_path, PROFILE.replace("capabilities: []", "capabilities: [time_scale]"))
    with pytest.raises(ProfileError, match="cannot scale its waits"):
        load_profile(path)


def test_profile_unpinned_npm_refused(tmp_path):
    path = profile_file(tmp_path, PROFILE.replace("fake-agent@1.2.3", "fake-agent@latest"))
    with pytest.raises(ProfileError, match=r":4: install\.npm:"):
        load_profile(path)


def test_profile_good(tmp_path):
    prof = load_profile(profile_file(tmp_path))
    assert (prof.name, prof.package, prof.version, prof.output) == (
        "fake",
        "fake-agent",
        "1.2.3",
        "text",
    )


# -- templating -----------------------------------------------------------------------------


def test_render_replaces_known_placeholders_only():
    values = {"prompt": 'say "hi" {x}', "api_key": KEY}
    out = render({"a": ["{prompt}", "k={api_key}"], "{api_key}": "{other} {}"}, values)
    assert out == {"a": ['say "hi" {x}', f"k={KEY}"], KEY: "{other} {}"}


def test_render_does_not_reexpand_values():
    assert render("{prompt}", {"prompt": "{api_key}", "api_key": KEY}) == "{api_key}"


# -- runs through the runner -----------------------------------------------------------------


def test_fake_agent_runs_in_fresh_home(tmp_path, gateway):
    body = """
    home = os.environ["HOME"]
    files = sorted(str(p.relative_to(home)) for p in __import__("pathlib").Path(home).rglob("*")
                   if p.is_file())
    print(json.dumps({"home": home, "files": files, "settings": settings,
                      "xdg": os.environ["XDG_CONFIG_HOME"], "cwd": os.getcwd(),
                      "proxy": os.environ.get("HTTPS_PROXY"), "no_proxy": os.environ["NO_PROXY"]}),
          file=sys.stderr)
    print(chat())
    """
    ad = adapter(tmp_path, body)
    entry, verdicts = run_scenario(gateway, ad, hello_scenario())
    assert entry["status"] == "ran", entry["error"]
    assert [e["type"] for e in entry["events"]] == ["hello", "message", "turn_end"]
    assert entry["events"][1]["text"] == "Hello!"
    assert entry["events"][2]["reason"] == "completed"
    assert len(entry["journal"]["entries"]) == 1
    seen = json.loads(entry["agent_log"].split("--- stderr ---\n", 1)[1].strip().splitlines()[0])
    assert seen["home"] != os.environ.get("HOME")
    assert seen["files"] == [".fake/settings.json"]
    assert seen["settings"]["model"] == "conformance-model"
    assert seen["settings"]["literal"] == "{not a placeholder}"
    assert seen["xdg"].startswith(seen["home"])
    assert seen["proxy"].startswith("http://127.0.0.1:")
    assert "127.0.0.1" in seen["no_proxy"]
    assert not Path(seen["home"]).exists(), "the temporary HOME outlives the run"
    assert entry["outside_attempts"] == []
    assert verdicts["RTY-05"]["verdict"] not in ("ERROR", "TIMEOUT", "FAIL")


def test_failed_agent_is_error_event_and_turn_end_error(tmp_path, gateway):
    body = """
    print("Error: the model is unavailable", file=sys.stderr)
    sys.exit(3)
    """
    entry, _ = run_scenario(gateway, adapter(tmp_path, body), hello_scenario())
    assert entry["status"] == "ran"
    types = [(e["type"], e.get("kind"), e.get("reason")) for e in entry["events"]]
    assert types == [
        ("hello", None, None),
        ("error", "agent_exit", None),
        ("turn_end", None, "error"),
    ]
    assert "model is unavailable" in entry["events"][1]["message"]


def test_deadline_kills_hanging_agent_and_its_children(tmp_path):
    body = """
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(60)
    """
    ad = adapter(tmp_path, body)
    t0 = time.monotonic()
    out = ad.run(request(tmp_path, deadline_s=0.5))
    assert time.monotonic() - t0 < 5
    assert out.status == "timeout"
    assert "0.5 s" in out.error and "killed" in out.error
    assert ad.last_pgid is not None
    deadline = time.monotonic() + 2  # reparented zombies may take a moment to be reaped
    while group_alive(ad.last_pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not group_alive(ad.last_pgid), "process group survived the deadline"


def test_the_agents_output_is_handed_over_as_written(tmp_path):
    # DBG-02 is judged on what the agent wrote: the runner redacts, after the checks.
    body = """
    print("key is", key, file=sys.stderr)
    print("stdout key", key)
    sys.exit(1 if "fail" in prompt else 0)
    """
    out = adapter(tmp_path, body).run(request(tmp_path))
    assert KEY in out.log and KEY in out.events[1]["text"]


def test_not_installed_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_AGENT_CACHE", str(tmp_path / "empty"))
    out = ShippedAdapter(profile_file(tmp_path)).run(request(tmp_path))
    assert out.status == "error"
    assert "fake-agent@1.2.3 is not installed" in out.error
    assert "scripts/install_agents.py fake" in out.error


def test_make_adapter_knows_shipped_and_profile():
    assert make_adapter("shipped:qwen-code").name == "shipped:qwen-code"
    assert make_adapter("profile:opencode").name == "shipped:opencode"
    with pytest.raises(ValueError, match="no such profile"):
        make_adapter("shipped:nope")


# -- output parsers -------------------------------------------------------------------------


def test_parse_qwen_json():
    out = json.dumps(
        [
            {"type": "system", "subtype": "init"},
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "Hi"},
                        {"type": "tool_use", "id": "c1", "name": "write_file", "input": {"a": 1}},
                    ]
                },
            },
            {"type": "result", "is_error": True, "error": {"message": "boom"}},
        ]
    )
    ev = parse_output("qwen-json", out)
    assert ev[0]["text"] == "Hi" and ev[0]["tool_calls"][0]["function"]["name"] == "write_file"
    assert ev[1] == {"type": "error", "kind": "agent_exit", "message": "boom"}  # no status: untyped


def test_parse_opencode_json():
    lines = [
        {"type": "step_start", "part": {"messageID": "m1"}},
        {"type": "text", "part": {"messageID": "m1", "text": "Hel"}},
        {"type": "text", "part": {"messageID": "m1", "text": "lo"}},
        {"type": "tool_use", "part": {"callID": "c1", "tool": "write", "state": {"input": {}}}},
        {"type": "error", "error": {"name": "APIError", "data": {"message": "429 slow down"}}},
    ]
    ev = parse_output("opencode-json", "\n".join(json.dumps(x) for x in lines))
    assert ev[0]["text"] == "Hello" and ev[0]["tool_calls"][0]["function"]["name"] == "write"
    assert ev[1]["message"] == "429 slow down"
    assert (ev[1]["kind"], ev[1].get("status")) == ("agent_exit", None)  # prose is not read


def test_parse_opencode_error_typed_by_its_status_code():
    line = {
        "type": "error",
        "error": {"name": "APIError", "data": {"message": "m", "statusCode": 401}},
    }
    (ev,) = parse_output("opencode-json", json.dumps(line))
    assert (ev["kind"], ev["status"]) == ("auth", 401)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("[API Error: 429 Rate limit exceeded]", "rate_limit"),
        ("[API Error: 503 upstream]", "server"),
        ("[API Error: 529 overloaded]", "overloaded"),
        ("Rate limit exceeded, 429 times", "agent_exit"),
        ("connection error", "agent_exit"),
    ],
)
def test_error_kind_only_from_a_printed_status(message, kind):
    from conformance.adapters.shipped import error_event

    assert error_event(message)["kind"] == kind


def test_parse_text_empty_output_is_no_message():
    assert parse_output("text", "  \n") == []
    assert parse_output("text", "Hi\n")[0]["text"] == "Hi"


# -- the guard ------------------------------------------------------------------------------


def test_refusing_proxy_logs_connect_and_plain_requests():
    proxy = RefusingProxy()
    try:
        for head in (
            b"CONNECT outside.example:443 HTTP/1.1\r\nHost: outside.example:443\r\n\r\n",
            b"GET http://plain.example:8080/x HTTP/1.1\r\nHost: plain.example:8080\r\n\r\n",
        ):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as c:
                c.sendall(head)
                assert c.recv(100).startswith(b"HTTP/1.1 403")
        got = [(a["via"], a["method"], a["host"], a["port"]) for a in proxy.attempts()]
        assert got == [
            ("proxy", "CONNECT", "outside.example", 443),
            ("proxy", "GET", "plain.example", 8080),
        ]
        assert all(a["time"].endswith("Z") for a in proxy.attempts())
    finally:
        proxy.close()


def test_refusing_proxy_silent_when_nothing_tries():
    proxy = RefusingProxy()
    proxy.close()
    assert proxy.attempts() == []


def test_proxy_env_sets_both_cases():
    env = proxy_env("http://127.0.0.1:1")
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        assert env[name] == env[name.lower()] == "http://127.0.0.1:1"
    assert env["NO_PROXY"] == env["no_proxy"] and "127.0.0.1" in env["NO_PROXY"]


OUTSIDE = """
try:
    urllib.request.urlopen("https://outside.example/ping", timeout=5)
except Exception as e:
    print("proxy:", e, file=sys.stderr)
if os.environ.get("TRY_DIRECT"):
    try:
        socket.create_connection(("203.0.113.7", 443), timeout=5).recv(1)
    except Exception as e:
        print("direct:", e, file=sys.stderr)
    try:
        socket.getaddrinfo("telemetry.example", 443)
    except Exception as e:
        print("dns:", e, file=sys.stderr)
print(chat())
"""


def test_guard_catches_proxy_attempt_without_netns(tmp_path, gateway):
    ad = adapter(tmp_path, OUTSIDE, netns=False)
    entry, _ = run_scenario(gateway, ad, hello_scenario())
    assert entry["status"] == "ran", entry["error"]
    assert entry["events"][1]["text"] == "Hello!"  # the gateway stays reachable
    got = [(a["via"], a["host"], a["port"]) for a in entry["outside_attempts"]]
    assert got == [("proxy", "outside.example", 443)]
    assert "proxy variables only" in entry["agent_log"] or "guard:" in entry["agent_log"]


@needs_netns
def test_guard_catches_direct_and_dns_attempts_in_netns(tmp_path, gateway):
    prof = profile_file(tmp_path, PROFILE.replace('FAKE_API_KEY: "{{api_key}}"',
                                                  'FAKE_API_KEY: "{{api_key}}"\n  TRY_DIRECT: "1"'))  # fmt: skip
    ad = ShippedAdapter(prof, bin_path=fake_agent(tmp_path, OUTSIDE), use_netns=True)
    entry, _ = run_scenario(gateway, ad, hello_scenario())
    assert entry["status"] == "ran", entry["error"]
    assert entry["events"][1]["text"] == "Hello!"  # reached through the forwarder
    got = {(a["via"], a["host"], a["port"]) for a in entry["outside_attempts"]}
    assert ("proxy", "outside.example", 443) in got
    assert ("direct", "203.0.113.7", 443) in got
    assert ("dns", "telemetry.example", 53) in got
    assert "loopback-only network namespace" in entry["agent_log"]
    assert ad.outside_attempts, "the adapter keeps every attempt for certification"


@needs_netns
def test_netns_forwarder_passes_a_reset_on(gateway, tmp_path):
    """A gateway reset before headers reaches the agent as a reset, not as an empty reply."""
    sc = Scenario.from_dict(
        {
            "id": "shipped-reset",
            "title": "reset",
            "criteria": ["RTY-06"],
            "capabilities": [],
            "prompt": "x",
            "script": [{"fault": {"reset_before_headers": {}}}],
        }
    )
    sess = gateway.create_session(sc, time_scale=1.0)
    port = int(sess.base_url.split(":")[2].split("/")[0])
    guard = LoopbackGuard(use_netns=True, forward_ports=(port,))
    code = textwrap.dedent(
        f"""
        import socket, sys
        c = socket.create_connection(("127.0.0.1", {port}), timeout=5)
        body = b'{{"model": "m", "messages": [{{"role": "user", "content": "x"}}]}}'
        c.sendall(b"POST {sess.base_url.split(str(port), 1)[1]}/chat/completions HTTP/1.1\\r\\n"
                  b"Host: 127.0.0.1\\r\\nContent-Type: application/json\\r\\n"
                  b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
        try:
            print("data", c.recv(100))
        except ConnectionResetError:
            print("reset")
        """
    )
    import subprocess

    try:
        gp = guard.popen([sys.executable, "-c", code], env={}, stdout=subprocess.PIPE)
        out = gp.proc.communicate(timeout=10)[0].decode()
    finally:
        guard.close()
    assert out.strip() == "reset", out


def test_no_stray_listener_after_guard_close():
    guard = LoopbackGuard(use_netns=False)
    gp = guard.popen([sys.executable, "-c", "pass"], env={})
    gp.proc.wait(5)
    port = guard.proxy.port
    guard.close()  # synchronous: the listening socket is gone when it returns
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_certify_problems_fail_on_an_attempt_pass_on_none():
    att = {"via": "proxy", "method": "CONNECT", "host": "a.example", "port": 443, "time": "t"}
    bad = {
        "agents": [{"name": "shipped:x", "scenarios": [{"id": "s1", "outside_attempts": [att]}]}]
    }
    assert certify_problems(bad) == [
        "shipped:x: s1: 1 outside connection attempt(s): proxy a.example:443"
    ]
    good = {"agents": [{"name": "shipped:x", "scenarios": [{"id": "s1", "outside_attempts": []}]}]}
    assert certify_problems(good) == []
    assert certify_problems({"agents": [{"name": "reference", "scenarios": [{"id": "s1"}]}]}) == []


# -- the real agents (opt-in: they are installed from npm and take seconds per run) -------------


def _real(name: str):
    prof = load_profile(name)
    why = None
    if not os.environ.get("CONFORMANCE_SHIPPED_AGENTS"):
        why = "set CONFORMANCE_SHIPPED_AGENTS=1 to run the real shipped agents (slow, opt-in)"
    elif not prof.bin_path.exists():
        why = f"{prof.npm} not installed: run python scripts/install_agents.py {name}"
    return pytest.mark.skipif(why is not None, reason=why or "")


@pytest.mark.parametrize(
    "name", [pytest.param("qwen-code", marks=_real("qwen-code")), pytest.param("opencode", marks=_real("opencode"))]
)  # fmt: skip
def test_real_agent_answers_with_nothing_leaving(name, gateway):
    ad = make_adapter(f"shipped:{name}")
    sc = hello_scenario(deadline=60)
    entry, _ = run_scenario(gateway, ad, sc)
    assert entry["status"] == "ran", entry["error"]
    assert any(e.get("text") == "Hello!" for e in entry["events"]), entry["agent_log"][-2000:]
    assert entry["outside_attempts"] == [], entry["outside_attempts"]


def test_certify_mode_fails_the_run_on_an_outside_attempt(tmp_path, monkeypatch, capsys):
    """`conformance run --certify`: exit 1 and a `certify:` line when the agent tried to leave."""
    import yaml

    import conformance.adapters.base as base
    from conformance.cli import main

    sc = tmp_path / "shipped-hello.yaml"
    sc.write_text(yaml.safe_dump(hello_scenario().raw), encoding="utf-8")
    leaky = adapter(tmp_path, OUTSIDE, netns=False)
    monkeypatch.setattr(base, "make_adapter", lambda spec: leaky)
    words = ["run", "-q", "--scenario", str(sc), "--report-dir", str(tmp_path / "rep")]
    assert main([*words, "--certify"]) == 1
    assert "certify: " in capsys.readouterr().err
    assert main(words) == 0  # without --certify the same run passes


def test_the_agent_s_clock_is_set_again_once_its_process_has_started(tmp_path, monkeypatch):
    # The fast clock starts when the agent's process loads libfaketime, after the guard's set-up
    # and the fork: the gateway's model of that clock is taken again once the exec is done.
    import dataclasses

    import conformance.adapters.shipped as shipped
    from conformance.adapters.warp import Warp

    started: list[float] = []
    spawn = shipped._spawn

    def timed_spawn(*args, **kwargs):
        gp = spawn(*args, **kwargs)
        started.append(time.time())
        return gp

    monkeypatch.setattr(shipped, "_spawn", timed_spawn)
    set_to: list[tuple[float, float]] = []
    req = dataclasses.replace(
        request(tmp_path), agent_clock=lambda origin, speed: set_to.append((origin, speed))
    )
    ad = adapter(tmp_path, "print(chat())")
    warp = Warp(10.0, "/nonexistent/libfaketime.so.1", None)  # its env is not applied here
    ad._run(req, [sys.executable, "-c", "pass"], dict(os.environ), [], {}, warp)
    assert len(started) == 1 and len(set_to) == 2
    origin, speed = set_to[-1]
    assert origin >= started[0] > set_to[0][0] and speed == 10.0
