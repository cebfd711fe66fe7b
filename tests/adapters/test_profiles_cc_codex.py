"""Claude Code and Codex CLI profiles: loading, templating, their output mappers, real runs.

The mappers are tested on hand-written lines in the shapes these agents print
(``claude -p --output-format stream-json --verbose`` and ``codex exec --json``); fake agents that
read their settings the way the real ones do check the templating against the real gateway;
the real agents run only where they are installed.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from conformance.adapters import make_adapter
from conformance.adapters.shipped import ShippedAdapter, load_profile, parse_output
from conformance.adapters.shipped_parsers import parse_claude_stream_json, parse_codex_json
from conformance.runner import run_scenario
from fakes import Scenario

CLAUDE = ("claude-code-2-1-197", "claude-code-2-1-332")
ALL = (*CLAUDE, "codex")


def hello_scenario(deadline: float = 20) -> Scenario:
    return Scenario.from_dict(
        {
            "id": "cc-codex-hello",
            "title": "a plain answer",
            "criteria": ["ERR-05"],
            "capabilities": [],
            "prompt": "Say hello.",
            "deadline": deadline,
            "script": [{"reply": {"text": "Hello!", "finish_reason": "stop"}}],
        }
    )


# -- profiles ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_profiles_pinned_honest_and_documented(name):
    prof = load_profile(name)
    assert prof.version[0].isdigit()
    assert "time_scale" not in prof.capabilities and "tools" not in prof.capabilities
    assert prof.telemetry
    assert prof.install_dir.name == f"{name}-{prof.version}"


def test_profile_versions_and_dialects():
    assert [load_profile(n).npm for n in CLAUDE] == [
        "@anthropic-ai/claude-code@2.1.197",
        "@anthropic-ai/claude-code@2.1.332",
    ]
    assert load_profile("codex").npm == "@openai/codex@0.171.0"
    for n in CLAUDE:
        prof = load_profile(n)
        assert (prof.dialect, prof.output) == ("anthropic_messages", "claude-stream-json")
        assert "dialect:anthropic_messages" in ShippedAdapter(prof).capabilities()
    prof = load_profile("codex")
    assert (prof.dialect, prof.output) == ("openai_responses", "codex-json")
    assert "dialect:openai_responses" in ShippedAdapter(prof).capabilities()
    assert load_profile("qwen-code").dialect == "openai_chat"  # the default


def test_claude_profile_keeps_traffic_off():
    env = load_profile("claude-code-2-1-332").env
    for k in (
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_BUG_COMMAND",
    ):
        assert env[k] == "1", k
    assert env["ANTHROPIC_BASE_URL"] == "{base_url_root}"


def test_codex_config_keeps_it_on_the_gateway():
    prof = load_profile("codex")
    (spec,) = [f for f in prof.files if f["path"] == ".codex/config.toml"]
    from conformance.adapters.shipped import render

    cfg = tomllib.loads(
        render(spec["text"], {"base_url": "http://127.0.0.1:9/s/x/v1", "model": "m"})
    )
    assert cfg["model_provider"] == "fake" and cfg["check_for_update_on_startup"] is False
    assert cfg["model_providers"]["fake"]["wire_api"] == "responses"
    assert cfg["model_providers"]["fake"]["base_url"] == "http://127.0.0.1:9/s/x/v1"
    assert cfg["analytics"]["enabled"] is False
    assert cfg["features"] == {"plugins": False, "remote_plugin": False, "apps": False}
    assert prof.env["CODEX_HOME"] == "{home}/.codex"


# -- fake agents that read their settings like the real ones ----------------------------------------

FAKE_CLAUDE = """
# Like Claude Code: ANTHROPIC_BASE_URL has no /v1; the client appends /v1/messages.
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages?beta=true"
body = {"model": os.environ["ANTHROPIC_MODEL"], "max_tokens": 64, "stream": False,
        "messages": [{"role": "user", "content": sys.argv[sys.argv.index("-p") + 1]}]}
req = urllib.request.Request(url, json.dumps(body).encode(), method="POST", headers={
    "content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"],
    "anthropic-version": "2023-06-01"})
reply = json.load(urllib.request.urlopen(req, timeout=10))
settings = json.load(open(os.path.join(os.environ["HOME"], ".claude", "settings.json")))
print(json.dumps({"type": "system", "subtype": "init", "argv": sys.argv[1:], "settings": settings}))
print(json.dumps({"type": "assistant", "uuid": "u1", "message": reply}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": reply["content"][0]["text"], "usage": reply.get("usage")}))
"""

FAKE_CODEX = """
# Like Codex: $CODEX_HOME/config.toml names the provider, its base URL (with /v1) and key variable.
import tomllib
cfg = tomllib.load(open(os.path.join(os.environ["CODEX_HOME"], "config.toml"), "rb"))
prov = cfg["model_providers"][cfg["model_provider"]]
body = {"model": cfg["model"], "input": sys.argv[-1], "stream": False}
req = urllib.request.Request(prov["base_url"] + "/responses", json.dumps(body).encode(),
    method="POST", headers={"content-type": "application/json",
    "authorization": "Bearer " + os.environ[prov["env_key"]]})
reply = json.load(urllib.request.urlopen(req, timeout=10))
text = "".join(c.get("text", "") for o in reply["output"] if o.get("type") == "message"
               for c in o.get("content", []))
print(json.dumps({"type": "thread.started", "thread_id": "t"}))
print(json.dumps({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                  "text": text}}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 2}}))
"""


def _fake(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-agent"
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys, urllib.request\n" + textwrap.dedent(body)
    )
    path.chmod(0o755)
    return str(path)


def test_fake_claude_reaches_the_session_root_without_v1(tmp_path, gateway):
    ad = ShippedAdapter("claude-code-2-1-332", bin_path=_fake(tmp_path, FAKE_CLAUDE))
    entry, verdicts = run_scenario(gateway, ad, hello_scenario(), dialect="anthropic_messages")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    (j,) = entry["journal"]["entries"]
    assert j["path"].endswith("/v1/messages") and j["dialect"] == "anthropic_messages"
    msgs = [e for e in entry["events"] if e["type"] == "message"]
    assert [m["text"] for m in msgs] == ["Hello!"]
    assert entry["events"][-1] == {**entry["events"][-1], "type": "turn_end", "reason": "completed"}
    assert "--output-format" in entry["agent_log"] and "stream-json" in entry["agent_log"]
    assert verdicts["ERR-05"]["verdict"] == "PASS"
    assert entry["outside_attempts"] == []


def test_fake_codex_reaches_the_responses_endpoint(tmp_path, gateway):
    ad = ShippedAdapter("codex", bin_path=_fake(tmp_path, FAKE_CODEX))
    entry, _ = run_scenario(gateway, ad, hello_scenario(), dialect="openai_responses")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    (j,) = entry["journal"]["entries"]
    assert j["path"].endswith("/v1/responses") and j["dialect"] == "openai_responses"
    assert [e.get("text") for e in entry["events"] if e["type"] == "message"] == ["Hello!"]
    assert {"type": "usage", "prompt_tokens": 3, "completion_tokens": 2}.items() <= [
        e for e in entry["events"] if e["type"] == "usage"
    ][0].items()


def test_a_run_in_another_dialect_is_unsupported_not_misjudged(tmp_path, gateway):
    ad = ShippedAdapter("codex", bin_path=_fake(tmp_path, FAKE_CODEX))
    entry, verdicts = run_scenario(gateway, ad, hello_scenario(), dialect="anthropic_messages")
    assert verdicts["ERR-05"]["verdict"] == "UNSUPPORTED"
    assert entry["journal"]["entries"] == []  # the agent never ran
    entry, verdicts = run_scenario(gateway, ad, hello_scenario())  # openai_chat
    assert entry["status"] == "unsupported" and "--dialect openai_responses" in entry["error"]
    assert verdicts["ERR-05"]["verdict"] == "UNSUPPORTED"


# -- Claude Code stream-json -----------------------------------------------------------------------


def _lines(*objs: dict) -> str:
    return "\n".join(json.dumps(o) for o in objs) + "\n"


INIT = {"type": "system", "subtype": "init", "session_id": "s", "tools": ["Bash"], "model": "m"}


def _assistant(uuid: str, *content: dict, model: str = "m", mid: str = "msg_1") -> dict:
    return {
        "type": "assistant",
        "uuid": uuid,
        "message": {"id": mid, "type": "message", "role": "assistant", "model": model,
                    "content": list(content)},
    }  # fmt: skip


def _result(is_error: bool, result: str, **extra) -> dict:
    return {"type": "result", "subtype": "success", "is_error": is_error, "result": result,
            "usage": {"input_tokens": 12, "output_tokens": 5}, **extra}  # fmt: skip


def test_claude_success_maps_messages_usage_and_no_error():
    out = _lines(
        INIT,
        _assistant("u1", {"type": "thinking", "thinking": "Let me think.", "signature": "c2ln"}),
        _assistant("u2", {"type": "text", "text": "Hello!"}),
        _result(False, "Hello!"),
    )
    ev = parse_claude_stream_json(out)
    assert ev == [
        {"type": "message", "id": "u1", "role": "assistant", "text": "", "tool_calls": [],
         "reasoning": "Let me think."},
        {"type": "message", "id": "u2", "role": "assistant", "text": "Hello!", "tool_calls": []},
        {"type": "usage", "prompt_tokens": 12, "completion_tokens": 5},
    ]  # fmt: skip
    assert parse_output("claude-stream-json", out) == ev


def test_claude_lines_sharing_a_message_id_stay_separate():
    # Two replies (before and after a continuation) from a server that reuses one id.
    ev = parse_claude_stream_json(
        _lines(
            _assistant("u1", {"type": "text", "text": "Once upon"}),
            _assistant("u2", {"type": "text", "text": " a time."}),
        )
    )
    assert [(e["id"], e["text"]) for e in ev] == [("u1", "Once upon"), ("u2", " a time.")]


def test_claude_tool_use_is_a_tool_call_and_user_tool_results_are_not_events():
    ev = parse_claude_stream_json(
        _lines(
            _assistant("u1", {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                              "input": {"command": "ls"}}),  # fmt: skip
            {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]}},
        )
    )  # fmt: skip
    assert len(ev) == 1
    (call,) = ev[0]["tool_calls"]
    assert call == {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "Bash", "arguments": '{"command": "ls"}'},
    }


def test_claude_api_retry_lines_are_retry_events():
    ev = parse_claude_stream_json(
        _lines(
            {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
             "retry_delay_ms": 515.6, "error_status": 529, "error": "overloaded_error"},
            {"type": "system", "subtype": "api_retry", "attempt": 2, "max_retries": 10,
             "retry_delay_ms": 1248.4, "error_status": None, "error": "unknown"},
        )
    )  # fmt: skip
    assert ev == [
        {"type": "retry", "attempt": 1, "delay_s": 0.5156, "reason": "529", "max_retries": 10,
         "status": 529},
        {"type": "retry", "attempt": 2, "delay_s": 1.2484, "reason": "unknown",
         "max_retries": 10},
    ]  # fmt: skip


def test_claude_no_retry_line_no_retry_event():
    ev = parse_claude_stream_json(_lines(INIT, _result(False, "ok")))
    assert [e["type"] for e in ev] == ["usage"]


def test_claude_synthetic_api_error_is_one_typed_error_not_a_message():
    text = 'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}'
    ev = parse_claude_stream_json(
        _lines(
            _assistant("u1", {"type": "text", "text": text}, model="<synthetic>"),
            _result(True, text),
        )
    )
    assert [e["type"] for e in ev] == ["error", "usage"]
    assert (ev[0]["kind"], ev[0]["status"]) == ("overloaded", 529)


def test_claude_error_result_without_status_is_untyped():
    ev = parse_claude_stream_json(
        _lines(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "errors": ["stream ended"],
            }
        )  # fmt: skip
    )
    assert ev == [{"type": "error", "kind": "agent_exit", "message": "stream ended"}]


def test_claude_non_json_lines_are_skipped():
    assert parse_claude_stream_json("warning: something\n" + _lines(INIT)) == []


# -- Codex exec --json ---------------------------------------------------------------------------------


def test_codex_success_maps_answer_reasoning_tools_and_usage():
    out = _lines(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Hmm."}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                            "command": "ls", "exit_code": 0}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message",
                                            "text": "Hello!"}},
        {"type": "turn.completed", "usage": {"input_tokens": 7, "cached_input_tokens": 0,
                                             "output_tokens": 3}},
    )  # fmt: skip
    ev = parse_codex_json(out)
    assert [e["type"] for e in ev] == ["message", "usage"]
    assert (ev[0]["id"], ev[0]["text"], ev[0]["reasoning"]) == ("item_2", "Hello!", "Hmm.")
    assert ev[0]["tool_calls"][0]["function"] == {
        "name": "command_execution",
        "arguments": '{"command": "ls"}',
    }
    assert ev[1] == {"type": "usage", "prompt_tokens": 7, "completion_tokens": 3}
    assert parse_output("codex-json", out) == ev


def test_codex_warning_item_is_not_an_error():
    ev = parse_codex_json(
        _lines(
            {"type": "item.completed", "item": {"id": "item_0", "type": "error",
             "message": "Model metadata for `m` not found. Defaulting to fallback metadata"}},
            {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message",
                                                "text": "Hi"}},
        )
    )  # fmt: skip
    assert [e["type"] for e in ev] == ["message"]


def test_codex_reconnecting_lines_are_retries_and_the_failure_is_one_error():
    ev = parse_codex_json(
        _lines(
            {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before "
                                         "completion: error decoding response body)"},
            {"type": "error", "message": "Reconnecting... 2/5 (unexpected status 503)"},
            {"type": "error", "message": "unexpected status 503 Service Unavailable"},
            {"type": "turn.failed",
             "error": {"message": "unexpected status 503 Service Unavailable"}},
        )
    )  # fmt: skip
    assert [(e["type"], e.get("attempt")) for e in ev] == [
        ("retry", 1),
        ("retry", 2),
        ("error", None),
    ]
    assert ev[0]["delay_s"] is None and ev[0]["max_retries"] == 5  # the wait is not printed
    assert (ev[2]["kind"], ev[2]["status"]) == ("server", 503)


def test_codex_turn_failed_alone_is_an_error_typed_by_its_status():
    ev = parse_codex_json(
        _lines({"type": "turn.failed",
                "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"}})
    )  # fmt: skip
    assert [(e["type"], e["kind"], e["status"]) for e in ev] == [("error", "rate_limit", 429)]


def test_codex_error_without_status_is_untyped():
    ev = parse_codex_json(_lines({"type": "turn.failed", "error": {"message": "high demand"}}))
    assert [(e["type"], e["kind"]) for e in ev] == [("error", "agent_exit")]


# -- the real agents, where installed -----------------------------------------------------------------


def _installed(name: str):
    prof = load_profile(name)
    why = None
    if not prof.bin_path.exists():
        why = f"{prof.npm} not installed: run python scripts/install_agents.py {name}"
    elif os.environ.get("CONFORMANCE_SHIPPED_AGENTS") == "0":
        why = "CONFORMANCE_SHIPPED_AGENTS=0"
    return pytest.mark.skipif(why is not None, reason=why or "")


@pytest.mark.parametrize(
    ("name", "dialect"),
    [pytest.param(n, "anthropic_messages", marks=_installed(n)) for n in CLAUDE]
    + [pytest.param("codex", "openai_responses", marks=_installed("codex"))],
)
def test_real_agent_answers_with_nothing_leaving(name, dialect, gateway):
    ad = make_adapter(f"shipped:{name}")
    entry, verdicts = run_scenario(gateway, ad, hello_scenario(deadline=60), dialect=dialect)
    assert entry["status"] == "ran", entry["error"]
    assert [e.get("text") for e in entry["events"] if e["type"] == "message"][-1] == "Hello!", (
        entry["agent_log"][-3000:]
    )
    assert not [e for e in entry["events"] if e["type"] == "error"], entry["events"]
    assert entry["outside_attempts"] == [], entry["outside_attempts"]
    assert all(j.get("dialect") == dialect for j in entry["journal"]["entries"])
    assert verdicts["ERR-05"]["verdict"] == "PASS"


def test_claude_synthetic_user_line_is_a_meta_message_and_plain_user_lines_are_not():
    cont = "Output token limit hit. Resume directly."
    ev = parse_claude_stream_json(
        _lines(
            _assistant("u1", {"type": "text", "text": "Once upon a"}),
            {"type": "user", "uuid": "u2", "isSynthetic": True,
             "message": {"role": "user", "content": [{"type": "text", "text": cont}]}},
            {"type": "user", "uuid": "u3",
             "message": {"role": "user", "content": [{"type": "text", "text": "typed"}]}},
        )
    )  # fmt: skip
    assert [(e["role"], e["text"], e.get("meta")) for e in ev] == [
        ("assistant", "Once upon a", None),
        ("user", cont, True),
    ]


def test_claude_error_result_typed_by_its_api_error_status():
    ev = parse_claude_stream_json(
        _lines(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "result": "Overloaded",
                "api_error_status": 529,
            }
        )  # fmt: skip
    )
    assert [(e["kind"], e["status"]) for e in ev] == [("overloaded", 529)]


# -- min_deadline_s: a real-time agent's own retry budget -------------------------------------------

SLOW_PROFILE = """\
name: slow
install: {{npm: "slow-agent@1.0.0", bin: slow}}
command: ["{bin}"]
output: claude-stream-json
dialect: anthropic_messages
"""

SLOW_AGENT = """
import time
print(json.dumps({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
                  "retry_delay_ms": 500, "error_status": 529}), flush=True)
time.sleep(float(os.environ.get("SLOW_S", "1.5")))
print(json.dumps({"type": "assistant", "uuid": "u1", "message": {"model": "m",
                  "content": [{"type": "text", "text": "late"}]}}), flush=True)
"""


def _slow(tmp_path: Path, extra: str = "") -> ShippedAdapter:
    prof = tmp_path / "slow.yaml"
    prof.write_text(SLOW_PROFILE.format(bin="{bin}") + extra)
    return ShippedAdapter(prof, bin_path=_fake(tmp_path, SLOW_AGENT))


def _req(tmp_path: Path, deadline_s: float):
    from conformance.adapters import RunRequest

    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    start = {"prompt": "hi", "model": "m", "dialect": "anthropic_messages"}
    return RunRequest(start, "http://127.0.0.1:9/s/x/v1", "sk-x", None, work, deadline_s)


def test_without_min_deadline_a_slow_agent_times_out_keeping_what_it_printed(tmp_path):
    out = _slow(tmp_path).run(_req(tmp_path, 0.5))
    assert out.status == "timeout" and "0.5 s" in out.error
    assert [e["type"] for e in out.events] == ["hello", "retry"]  # no turn_end: it never ended


def test_min_deadline_gives_a_real_time_agent_its_retry_budget(tmp_path):
    out = _slow(tmp_path, "min_deadline_s: 30\n").run(_req(tmp_path, 0.5))
    assert out.status == "ran", out.error
    assert [e["type"] for e in out.events] == ["hello", "retry", "message", "turn_end"]


def test_min_deadline_must_be_a_non_negative_number(tmp_path):
    from conformance.adapters.shipped import ProfileError

    prof = tmp_path / "slow.yaml"
    prof.write_text(SLOW_PROFILE.format(bin="{bin}") + "min_deadline_s: -1\n")
    with pytest.raises(ProfileError, match=r"slow.yaml:6: min_deadline_s"):
        load_profile(prof)


def test_claude_profiles_cover_its_retry_budget():
    # 10 retries, 0.5 s doubling, 32 s cap, +25 % jitter: 159.5 s nominal, under 200 s.
    nominal = sum(min(0.5 * 2**i, 32) for i in range(10))
    for n in CLAUDE:
        assert load_profile(n).min_deadline_s >= nominal * 1.25


def test_claude_error_display_without_status_is_typed_by_the_result_status():
    text = "API Error: Request rejected (429) · simulated error 429"
    lines = [
        _assistant("u1", {"type": "text", "text": text}, model="<synthetic>"),
        _result(True, text, api_error_status=429),
    ]
    ev = parse_claude_stream_json(_lines(*lines))
    assert [(e["type"], e.get("kind"), e.get("status")) for e in ev] == [
        ("error", "rate_limit", 429),
        ("usage", None, None),
    ]
    # Without a printed status the error stays untyped.
    lines[1] = _result(True, text, api_error_status=None)
    assert parse_claude_stream_json(_lines(*lines))[0]["kind"] == "agent_exit"


def test_claude_terminal_reason_types_a_prompt_too_long():
    text = "Prompt is too long · A single-exchange conversation cannot be compacted"
    lines = [
        _assistant("u1", {"type": "text", "text": text}, model="<synthetic>"),
        _result(True, text, api_error_status=400, terminal_reason="prompt_too_long"),
    ]
    ev = parse_claude_stream_json(_lines(*lines))
    assert (ev[0]["type"], ev[0]["kind"], ev[0]["status"]) == ("error", "prompt_too_long", 400)
    # Another terminal reason leaves the status's kind.
    lines[1] = _result(True, text, api_error_status=400, terminal_reason="completed")
    assert parse_claude_stream_json(_lines(*lines))[0]["kind"] == "bad_request"
