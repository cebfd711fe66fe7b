"""A scenario's history given to the Codex CLI by resume (its profile's ``history``): the Codex
rollout writer, and the adapter against a fake Codex that resumes the rollout and one that
ignores it.

The fakes run under the real Codex profile, so the rollout's path, the session id and
``exec ... resume SESSION_ID`` are the ones exercised; they speak the OpenAI Responses API like
Codex does.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.adapters.shipped import ShippedAdapter
from conformance.adapters.shipped_history import Untellable, codex_rollout_jsonl
from conformance.runner import run_scenario
from fakes import Scenario
from fakes.dialects.openai_responses import read_body
from fakes.scenario import load_scenario

SID = "9f0c4b5e-3a52-4f7e-8c1d-2b6a7e0d9c11"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"
PIXEL = "data:image/png;base64,iVBORw0KGgo="


def _lines(history: list[dict[str, Any]], cwd: str = "/tmp/w") -> list[dict[str, Any]]:
    text = codex_rollout_jsonl(history, SID, cwd, "conformance-model", "0.171.0", NOW).text
    return [json.loads(line) for line in text.splitlines()]


def _items(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rollout's response items, as Codex sends them after resuming."""
    lines = _lines(history)
    assert [ln["type"] for ln in lines[1:]] == ["response_item"] * (len(lines) - 1)
    return [ln["payload"] for ln in lines[1:]]


def _scenario(name: str) -> Scenario:
    return load_scenario(next(SCENARIOS.glob(f"*/{name}.yaml")))


# -- the writer ---------------------------------------------------------------------------------


def test_the_session_meta_comes_first_and_names_the_session():
    (meta, *_) = _lines(_scenario("ctx-03-one-of-two-unanswered").history)
    assert meta["type"] == "session_meta" and meta["ordinal"] == 0
    assert meta["payload"] == {
        "id": SID,
        "session_id": SID,
        "timestamp": meta["timestamp"],
        "cwd": "/tmp/w",
        "originator": "codex_exec",
        "cli_version": "0.171.0",
        "source": "exec",
        "thread_source": "user",
        "history_mode": "paginated",
    }


def test_unanswered_call_written_as_given():
    items = _items(_scenario("ctx-03-one-of-two-unanswered").history)
    assert items == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Read a.txt and b.txt."}],
        },
        {
            "type": "function_call",
            "name": "read_file",
            "arguments": '{"path": "a.txt"}',
            "call_id": "call_a",
        },
        {
            "type": "function_call",
            "name": "read_file",
            "arguments": '{"path": "b.txt"}',
            "call_id": "call_b",
        },
        # One result, no placeholder: repairing call_b is the agent's part, not the writer's.
        {"type": "function_call_output", "call_id": "call_a", "output": "contents of a"},
    ]


def test_image_becomes_an_input_image():
    (user, _) = _items(_scenario("ctx-05-image-too-large").history)
    (text, image) = user["content"]
    assert text == {"type": "input_text", "text": "What is in this picture?"}
    assert image["type"] == "input_image"
    assert image["image_url"].startswith("data:image/png;base64,iVBORw0KGgo")


def test_empty_assistant_turns_stay_empty():
    items = _items(_scenario("rsn-03-empty-assistant-in-history").history)
    assert [i["content"] for i in items if i["role"] == "assistant"] == [
        [{"type": "output_text", "text": ""}],
        [],
    ]


def test_reasoning_then_text_then_calls_as_codex_records_a_reply():
    items = _items(
        [
            {
                "role": "assistant",
                "content": "Reading.",
                "reasoning_content": "Read it first.",
                "encrypted_content": "ZW5j",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "x"}]},
        ]
    )
    assert [i["type"] for i in items] == [
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert items[0] == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Read it first."}],
        "encrypted_content": "ZW5j",
    }
    assert items[3]["output"] == [{"type": "input_text", "text": "x"}]


@pytest.mark.parametrize(
    ("name", "said"),
    [
        # Another vendor's signed thinking has no place in a Responses item.
        ("mfb-04-signature-stripped", r"history\[1\]: reasoning_signature: another vendor's"),
        # Nor has Gemini's thought signature on a tool call.
        ("mfb-04-tool-call-signature", r"history\[1\]\.tool_calls\[0\]: extra_content"),
    ],
)
def test_a_foreign_signature_is_refused_naming_it(name, said):
    with pytest.raises(Untellable, match=said):
        _lines(_scenario(name).history)


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"role": "system", "content": "Be brief."}, "role 'system'"),
        ({"role": "user", "content": "hi", "name": "bob"}, "name: no place"),
        ({"role": "user", "content": [{"type": "input_audio"}]}, "'input_audio'"),
        ({"role": "assistant", "content": [{"type": "image_url"}]}, "'image_url'"),
        ({"role": "tool", "tool_call_id": "", "content": "x"}, "needs one"),
        ({"role": "tool", "tool_call_id": "a", "content": "x", "is_error": True}, "no error flag"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": 1}]}, r"\.id: 1"),
    ],
)
def test_what_the_rollout_cannot_carry_is_refused(message, said):
    with pytest.raises(Untellable, match=said):
        _lines([message])


def test_same_history_same_rollout():
    history = _scenario("ctx-03-call-then-user-message").history
    assert _lines(history) == _lines(history)
    lines = _lines(history)
    assert [ln["ordinal"] for ln in lines] == list(range(len(lines)))
    stamps = [ln["timestamp"] for ln in lines]
    assert stamps == sorted(stamps) and stamps[-1] < NOW.isoformat()
    assert lines[0]["payload"]["timestamp"] == stamps[0]


_ids = st.text("abcdefghij_-0123456789", min_size=1, max_size=8)
_text = st.text(min_size=1, max_size=12)
_parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), min_size=1)
_image = st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.just({"url": PIXEL})})


@st.composite
def _histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """User turns (text, text parts, an image), assistant turns with text, reasoning and/or tool
    calls, and results (text or text parts) for some calls. No assistant turn follows another
    directly: Responses items of two such turns read back as one."""
    history: list[dict[str, Any]] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "calls"]))
        if kind != "user" and history and history[-1]["role"] == "assistant":
            continue
        if kind == "user":
            content = draw(_text | _parts | st.tuples(_text, _image).map(_user_parts))
            history.append({"role": "user", "content": content})
            continue
        turn: dict[str, Any] = {"role": "assistant", "content": draw(_text)}
        reasoning = draw(st.none() | _text)
        if reasoning is not None:
            turn["reasoning_content"] = reasoning
        if kind == "calls":
            ids = [i for i in draw(st.lists(_ids, min_size=1, max_size=3, unique=True))]
            ids = [i for i in ids if i not in used]
            if not ids:
                continue
            used.update(ids)
            turn["content"] = draw(st.none() | _text)
            turn["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": '{"n": 1}'}}
                for i in ids
            ]
        history.append(turn)
        if kind == "calls":
            for i in draw(st.lists(st.sampled_from(ids), unique=True)):
                content = draw(_text | _parts)
                history.append({"role": "tool", "tool_call_id": i, "content": content})
    return history


def _user_parts(pair: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": pair[0]}, pair[1]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_histories())
def test_every_message_once_in_order(history):
    lines = _lines(history)
    assert lines[0]["type"] == "session_meta"
    # Read back as the gateway reads a Responses request: the history, message for message.
    read = read_body({"input": [ln["payload"] for ln in lines[1:]]})["messages"]
    assert read == [_as_read(m) for m in history]


def _as_read(m: dict[str, Any]) -> dict[str, Any]:
    """A history message as the gateway's chat view shows it: text parts joined into one text,
    and an assistant turn's content null when it has calls and no text (Responses items carry
    no empty text beside calls), text when it has none."""
    content = m["content"]
    if isinstance(content, list) and all(p["type"] == "text" for p in content):
        content = "".join(p["text"] for p in content)
    if m["role"] != "assistant":
        return {**m, "content": content}
    out = {**m, "content": (content or None) if "tool_calls" in m else (content or "")}
    return out


# -- the profile key ----------------------------------------------------------------------------


def test_codex_takes_history_by_resume():
    ad = ShippedAdapter("codex")
    assert ad.traits.takes_history
    assert ad.profile.history["format"] == "codex-rollout-jsonl"
    assert ad.profile.history["args"] == ["resume", "{session_id}"]
    assert "media" in ad.capabilities()


# -- the adapter, against fake Codex CLIs ---------------------------------------------------------

PRELUDE = """
import glob, json, os, sys, tomllib, urllib.request
argv = sys.argv
print(json.dumps(argv[1:]), file=sys.stderr)
# Like Codex: $CODEX_HOME/config.toml names the provider; `exec [OPTIONS] PROMPT` takes the
# prompt positionally (before a `resume` subcommand too).
config = tomllib.load(open(os.path.join(os.environ["CODEX_HOME"], "config.toml"), "rb"))
provider = config["model_providers"][config["model_provider"]]
prompt = argv[argv.index("--json") + 1]
def ask(items):
    body = {"model": config["model"], "input": items, "stream": False}
    req = urllib.request.Request(provider["base_url"] + "/responses", json.dumps(body).encode(),
        method="POST", headers={"content-type": "application/json",
        "authorization": "Bearer " + os.environ[provider["env_key"]]})
    out = json.load(urllib.request.urlopen(req, timeout=10))["output"]
    return "".join(c.get("text", "") for o in out if o["type"] == "message" for c in o["content"])
def done(text):
    print(json.dumps({"type": "thread.started", "thread_id": "t"}))
    print(json.dumps({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                      "text": text}}))
    print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""

# Like Codex: `exec ... resume SESSION_ID` finds the rollout under $CODEX_HOME/sessions by the
# id in its file name, at any depth, checks that its session_meta names that session, and sends
# its response items before the prompt; a call left without a result it answers "aborted".
RESUMES = """
items = []
if "resume" in argv:
    sid = argv[argv.index("resume") + 1]
    home = os.environ["CODEX_HOME"]
    (path,) = glob.glob(f"{home}/sessions/**/rollout-*-{sid}.jsonl", recursive=True)
    lines = [json.loads(line) for line in open(path)]
    meta = lines[0]["payload"]
    assert lines[0]["type"] == "session_meta" and meta["id"] == sid, lines[0]
    assert meta["cwd"] == os.path.realpath(os.getcwd()), meta
    answered = {p["call_id"] for ln in lines for p in [ln["payload"]]
                if p.get("type") == "function_call_output"}
    for ln in lines[1:]:
        items.append(ln["payload"])
        if ln["payload"]["type"] == "function_call" and ln["payload"]["call_id"] not in answered:
            items.append({"type": "function_call_output", "call_id": ln["payload"]["call_id"],
                          "output": "aborted"})
done(ask(items + [{"type": "message", "role": "user", "content": prompt}]))
"""
IGNORES = """
done(ask([{"type": "message", "role": "user", "content": prompt}]))
"""


def _fake(tmp_path: Path, body: str) -> ShippedAdapter:
    path = tmp_path / "fake-codex"
    path.write_text(f"#!{sys.executable}\n" + PRELUDE + textwrap.dedent(body))
    path.chmod(0o755)
    # time_warp 1: real time (the fake is no program for the fast clock to preload into).
    return ShippedAdapter("codex", bin_path=str(path), time_warp=1.0)


def _run(gateway, ad: ShippedAdapter, scenario: str | Scenario):
    sc = scenario if isinstance(scenario, Scenario) else _scenario(scenario)
    return run_scenario(gateway, ad, sc, dialect="openai_responses", tool_transport="mcp")


def _first_messages(entry) -> list[dict[str, Any]]:
    chat = [e for e in entry["journal"]["entries"] if e.get("kind") == "chat"]
    return read_body(chat[0]["body"])["messages"]


def test_a_codex_resuming_the_history_is_judged_on_it(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, RESUMES), "ctx-03-one-of-two-unanswered")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    hello = entry["events"][0]
    assert hello["history"]["format"] == "codex-rollout-jsonl"
    assert hello["history"]["messages"] == 3
    sid = hello["history"]["how"].split()[2].rstrip(";")
    assert uuid.UUID(sid)
    # Where Codex keeps its sessions, named as it names them.
    assert re.search(
        rf"written to \.codex/sessions/\d{{4}}/\d\d/\d\d/"
        rf"rollout-\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d-{sid}\.jsonl under home$",
        hello["history"]["how"],
    ), hello["history"]["how"]
    # The prompt and the MCP overrides before the subcommand, as `exec` parses them.
    (argv,) = [json.loads(ln) for ln in entry["agent_log"].splitlines() if ln.startswith('["')]
    assert argv[argv.index("--json") + 1] == "What did the files say?"
    # The subcommand and its id; the drives' flags may follow it (measured: they apply).
    assert argv[argv.index("resume") + 1] == sid and argv.index("-c") < argv.index("resume")
    sent = _first_messages(entry)
    assert sent[0] == {"role": "user", "content": "Read a.txt and b.txt."}
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_a", "call_b"]
    assert verdicts["CTX-03"]["verdict"] == "PASS", verdicts["CTX-03"]


def test_a_codex_ignoring_the_history_shows_on_the_wire(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, IGNORES), "ctx-03-one-of-two-unanswered")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    assert _first_messages(entry) == [{"role": "user", "content": "What did the files say?"}]
    assert verdicts["CTX-03"]["verdict"] == "FAIL", verdicts["CTX-03"]
    assert "dropped" in verdicts["CTX-03"]["observed"]


def test_a_history_the_rollout_cannot_carry_is_unsupported_unrun(tmp_path, gateway):
    sc = yaml.safe_load(next(SCENARIOS.glob("*/ctx-03-call-then-user-message.yaml")).read_text())
    sc["history"] = [
        *sc["history"][:2],
        {"role": "tool", "tool_call_id": "call_x", "content": "failed", "is_error": True},
    ]
    entry, verdicts = _run(gateway, _fake(tmp_path, RESUMES), Scenario.from_dict(sc))
    assert entry["status"] == "unsupported"
    assert not [e for e in entry["journal"]["entries"] if e.get("kind") == "chat"]
    assert verdicts["CTX-03"]["verdict"] == "UNSUPPORTED"
    assert "is_error" in verdicts["CTX-03"]["observed"]


def test_no_resume_without_a_history(tmp_path, gateway):
    sc = Scenario.from_dict(
        {
            "id": "no-history",
            "title": "no history",
            "criteria": ["ERR-05"],
            "prompt": "Say hello.",
            "deadline": 20,
            "script": [{"reply": {"text": "Hello!", "finish_reason": "stop"}}],
        }
    )
    entry, _ = _run(gateway, _fake(tmp_path, RESUMES), sc)
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    assert '"resume"' not in entry["agent_log"]
    assert "history" not in entry["events"][0]
