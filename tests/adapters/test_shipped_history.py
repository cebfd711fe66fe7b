"""A scenario's history given to a shipped agent by resume (a profile's ``history``): the
Claude Code transcript writer, the profile key, and the adapter against a fake Claude Code that
resumes the transcript and one that ignores it.

The fakes run under the real Claude Code profile, so the path, the session id and ``--resume``
are the ones exercised; they speak the Anthropic Messages API like Claude Code does.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.adapters.shipped import ProfileError, ShippedAdapter, load_profile
from conformance.adapters.shipped_history import (
    Untellable,
    claude_code_jsonl,
    claude_code_project_key,
)
from conformance.runner import run_scenario
from fakes import Scenario
from fakes.dialects.anthropic_messages import read_body
from fakes.scenario import load_scenario

PROFILE = "claude-code-2-1-332"
SID = "9f0c4b5e-3a52-4f7e-8c1d-2b6a7e0d9c11"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"


def _write(history: list[dict[str, Any]], cwd: str = "/tmp/w") -> list[dict[str, Any]]:
    text = claude_code_jsonl(history, SID, cwd, "conformance-model", "2.1.332", NOW).text
    return [json.loads(line) for line in text.splitlines()]


def _chain(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as Claude Code reads it: from the last entry back by parentUuid."""
    by_id = {e["uuid"]: e for e in entries}
    out, at = [], entries[-1]["uuid"]
    while at is not None:
        out.append(by_id[at])
        at = by_id[at]["parentUuid"]
    return out[::-1]


def _history(name: str) -> list[dict[str, Any]]:
    return _scenario(name).history


# -- the writer ---------------------------------------------------------------------------------


def test_claude_codes_project_key_is_its_munged_cwd():
    assert claude_code_project_key("/tmp/conformance-ab_1.x/work") == "-tmp-conformance-ab-1-x-work"
    with pytest.raises(Untellable, match="longer than Claude Code keeps whole"):
        claude_code_project_key("/" + "d" * 200)


def test_unanswered_call_written_as_given_results_grouped():
    entries = _write(_history("ctx-03-one-of-two-unanswered"))
    assert [e["type"] for e in entries] == ["user", "assistant", "user"]
    assert _chain(entries) == entries
    assert all(e["sessionId"] == SID and e["cwd"] == "/tmp/w" for e in entries)
    calls = entries[1]["message"]["content"]
    assert [(b["type"], b["id"], b["name"]) for b in calls] == [
        ("tool_use", "call_a", "read_file"),
        ("tool_use", "call_b", "read_file"),
    ]
    assert calls[0]["input"] == {"path": "a.txt"}
    assert entries[1]["message"]["model"] == "conformance-model"
    # One result, no placeholder: repairing call_b is the agent's part, not the writer's.
    assert entries[2]["message"]["content"] == [
        {"tool_use_id": "call_a", "type": "tool_result", "content": "contents of a"}
    ]
    assert entries[2]["sourceToolAssistantUUID"] == entries[1]["uuid"]


def test_signed_thinking_kept_with_its_signature():
    (_, assistant) = _write(_history("mfb-04-signature-stripped"))
    assert assistant["message"]["content"] == [
        {"type": "thinking", "thinking": "The user wants a greeting.", "signature": "c2lnLWJsb2Nr"},
        {"type": "text", "text": "Hello!"},
    ]


def test_image_becomes_a_base64_image_block():
    (user, _) = _write(_history("ctx-05-image-too-large"))
    image = user["message"]["content"][1]
    assert image["type"] == "image"
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert image["source"]["data"].startswith("iVBORw0KGgo")


def test_empty_assistant_turns_stay_empty():
    entries = _write(_history("rsn-03-empty-assistant-in-history"))
    assert [e["message"]["content"] for e in entries if e["type"] == "assistant"] == [
        [{"type": "text", "text": ""}],
        [],
    ]


def test_a_thought_signature_on_a_tool_call_is_refused_naming_it():
    with pytest.raises(Untellable, match=r"history\[1\]\.tool_calls\[0\]: extra_content"):
        _write(_history("mfb-04-tool-call-signature"))


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"role": "system", "content": "Be brief."}, "role 'system'"),
        ({"role": "user", "content": "hi", "name": "bob"}, "name: no place"),
        ({"role": "user", "content": [{"type": "input_audio"}]}, "'input_audio'"),
        ({"role": "tool", "tool_call_id": "a b", "content": "x"}, "not a tool_use id"),
    ],
)
def test_what_the_transcript_cannot_carry_is_refused(message, said):
    with pytest.raises(Untellable, match=said):
        _write([message])


def test_same_history_same_transcript():
    history = _history("ctx-03-call-then-user-message")
    assert _write(history) == _write(history)
    stamps = [e["timestamp"] for e in _write(history)]
    assert stamps == sorted(stamps) and stamps[-1] < NOW.isoformat()


_ids = st.text("abcdefghij_-0123456789", min_size=1, max_size=8)
_text = st.text(min_size=1, max_size=12)


@st.composite
def _histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """User turns, assistant turns with text and/or tool calls, and results for some calls."""
    history: list[dict[str, Any]] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "calls"]))
        if kind == "user":
            history.append({"role": "user", "content": draw(_text)})
        elif kind == "assistant":
            history.append({"role": "assistant", "content": draw(_text)})
        else:
            ids = [i for i in draw(st.lists(_ids, min_size=1, max_size=3, unique=True))]
            ids = [i for i in ids if i not in used]
            if not ids:
                continue
            used.update(ids)
            calls = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": '{"n": 1}'}}
                for i in ids
            ]
            history.append(
                {"role": "assistant", "content": draw(st.none() | _text), "tool_calls": calls}
            )
            for i in draw(st.lists(st.sampled_from(ids), unique=True)):
                history.append({"role": "tool", "tool_call_id": i, "content": draw(_text)})
    return history


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_histories())
def test_every_message_once_in_order_on_an_unbroken_chain(history):
    entries = _write(history)
    if not history:
        assert entries == []
        return
    # Every entry is on the chain Claude Code follows back from the last one.
    assert _chain(entries) == entries
    assert entries[0]["parentUuid"] is None
    # Read back as the gateway reads an Anthropic request: the history, message for message.
    read = read_body({"messages": [e["message"] for e in entries]})["messages"]
    assert read == [_as_read(m) for m in history]


def _as_read(m: dict[str, Any]) -> dict[str, Any]:
    """A history message as the gateway's chat view shows it (arguments re-serialized)."""
    if m["role"] != "assistant" or "tool_calls" not in m:
        return m
    calls = [
        {
            **c,
            "function": {
                **c["function"],
                "arguments": json.dumps(json.loads(c["function"]["arguments"])),
            },
        }
        for c in m["tool_calls"]
    ]
    return {"role": "assistant", "content": m["content"] or None, "tool_calls": calls}


# -- the profile key ----------------------------------------------------------------------------


def _profile(tmp_path: Path, history: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(
        'name: p\ninstall: {npm: "p@1.0.0", bin: p}\ncommand: ["{bin}"]\n'
        + textwrap.dedent(history)
    )
    return path


def test_both_claude_code_profiles_take_history_by_resume():
    for name in ("claude-code-2-1-332", "claude-code-2-1-197"):
        ad = ShippedAdapter(name)
        assert ad.traits.takes_history
        assert ad.profile.history["format"] == "claude-code-jsonl"
        assert "media" in ad.capabilities()


@pytest.mark.parametrize(
    ("fmt", "path", "error"),
    [
        # An unknown format names its line.
        ("bash-history", "x/{session_id}", r"p\.yaml:5: history\.format"),
        # A placeholder typo names its line.
        (
            "claude-code-jsonl",
            '"x/{sesion_id}.jsonl"',
            r"p\.yaml:7: .*unknown placeholder \{sesion_id\}",
        ),
    ],
)
def test_a_bad_history_section_names_file_and_line(tmp_path, fmt, path, error):
    text = f"""\
        history:
          format: {fmt}
          root: home
          path: {path}
          args: [--resume, "{{session_id}}"]
        """
    with pytest.raises(ProfileError, match=error):
        load_profile(_profile(tmp_path, text))


def test_a_capability_earned_by_history_is_not_declared_twice(tmp_path):
    path = _profile(
        tmp_path,
        """\
        capabilities: [media]
        history:
          format: claude-code-jsonl
          root: home
          path: x.jsonl
          args: [--resume, "{session_id}"]
          capabilities: [media]
        """,
    )
    with pytest.raises(ProfileError, match=r"capabilities: \['media'\] are earned by `history`"):
        load_profile(path)


# -- the adapter, against fake Claude Codes -------------------------------------------------------

PRELUDE = """
import json, os, re, sys, urllib.error, urllib.request
prompt = sys.argv[sys.argv.index("-p") + 1]
def ask(messages, model=None):
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    body = {"model": model or os.environ["ANTHROPIC_MODEL"], "max_tokens": 64,
            "messages": messages}
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"],
        "anthropic-version": "2023-06-01"})
    try:
        return json.load(urllib.request.urlopen(req, timeout=10))
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}
def done(text):
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text}))
print(json.dumps(sys.argv[1:]), file=sys.stderr)
"""

# Like Claude Code: --resume SESSION reads ~/.claude/projects/<cwd as a key>/SESSION.jsonl and
# follows the chain back from its last entry.
READS = """
history = []
if "--resume" in sys.argv:
    sid = sys.argv[sys.argv.index("--resume") + 1]
    key = re.sub(r"[^a-zA-Z0-9]", "-", os.path.realpath(os.getcwd()))
    path = os.path.expanduser(f"~/.claude/projects/{key}/{sid}.jsonl")
    entries = {}
    for line in open(path):
        e = json.loads(line)
        entries[e["uuid"]] = last = e
    at = last["uuid"]
    while at:
        history.insert(0, {k: entries[at]["message"][k] for k in ("role", "content")})
        at = entries[at]["parentUuid"]
"""
# ... and answers a call left without a result.
RESUMES = (
    READS
    + """
for i, m in enumerate(history):
    calls = [b["id"] for b in m["content"] if m["role"] == "assistant" and b["type"] == "tool_use"]
    nxt = history[i + 1]["content"] if i + 1 < len(history) else []
    answered = {b["tool_use_id"] for b in nxt if isinstance(b, dict) and b["type"] == "tool_result"}
    missing = [{"type": "tool_result", "tool_use_id": c, "content": "[no result recorded]",
                "is_error": True} for c in calls if c not in answered]
    if missing:
        nxt[:0] = missing
done(ask(history + [{"role": "user", "content": prompt}])["content"][0]["text"])
"""
)
IGNORES = """
done(ask([{"role": "user", "content": prompt}])["content"][0]["text"])
"""


def _fake(tmp_path: Path, body: str) -> ShippedAdapter:
    path = tmp_path / "fake-claude"
    path.write_text(f"#!{sys.executable}\n" + PRELUDE + textwrap.dedent(body))
    path.chmod(0o755)
    return ShippedAdapter(PROFILE, bin_path=str(path))


def _run(gateway, ad, scenario: str | Scenario):
    sc = scenario if isinstance(scenario, Scenario) else _scenario(scenario)
    return run_scenario(gateway, ad, sc, dialect="anthropic_messages")


def _scenario(name: str) -> Scenario:
    return load_scenario(next(SCENARIOS.glob(f"*/{name}.yaml")))


def _first_messages(entry) -> list[dict[str, Any]]:
    chat = [e for e in entry["journal"]["entries"] if e.get("kind") == "chat"]
    return chat[0]["body"]["messages"]


def test_an_agent_resuming_the_history_is_judged_on_it(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, RESUMES), "ctx-03-one-of-two-unanswered")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    hello = entry["events"][0]
    assert hello["history"]["format"] == "claude-code-jsonl"
    assert hello["history"]["messages"] == 3
    sid = hello["history"]["how"].split()[2].rstrip(";")
    assert uuid.UUID(sid) and f'"--resume", "{sid}"' in entry["agent_log"]
    assert hello["history"]["how"].endswith(f"/{sid}.jsonl under home")
    sent = _first_messages(entry)
    assert sent[0] == {"role": "user", "content": "Read a.txt and b.txt."}
    assert [b["id"] for b in sent[1]["content"]] == ["call_a", "call_b"]
    assert verdicts["CTX-03"]["verdict"] == "PASS", verdicts["CTX-03"]


def test_an_agent_ignoring_the_history_shows_on_the_wire(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, IGNORES), "ctx-03-one-of-two-unanswered")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    assert _first_messages(entry) == [{"role": "user", "content": "What did the files say?"}]
    assert verdicts["CTX-03"]["verdict"] == "FAIL", verdicts["CTX-03"]
    assert "dropped" in verdicts["CTX-03"]["observed"]


def test_a_history_the_format_cannot_carry_is_unsupported_unrun(tmp_path, gateway):
    entry, verdicts = _run(gateway, _fake(tmp_path, RESUMES), "mfb-04-tool-call-signature")
    assert entry["status"] == "unsupported"
    assert not [e for e in entry["journal"]["entries"] if e.get("kind") == "chat"]
    assert verdicts["MFB-04"]["verdict"] == "UNSUPPORTED"
    assert "extra_content" in verdicts["MFB-04"]["observed"]


# After three overloads, the fallback model, the history resent: as it was (its signed thinking
# included), or without the thinking blocks the primary signed.
FALLS_BACK = (
    READS
    + """
models = [os.environ["ANTHROPIC_MODEL"], sys.argv[sys.argv.index("--fallback-model") + 1]]
for n in range(8):
    sent = history if n < 3 or KEEPS else [
        {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}
        if m["role"] == "assistant" else m for m in history]
    r = ask(sent + [{"role": "user", "content": prompt}], models[min(n // 3, 1)])
    if "content" in r:
        done(r["content"][0]["text"])
        sys.exit(0)
sys.exit(1)
"""
)


# MFB-04 is a SHOULD: a signature sent to the fallback model is NON-STRICT.
@pytest.mark.parametrize(("keeps", "verdict"), [(False, "PASS"), (True, "NON-STRICT")])
def test_signed_thinking_of_the_history_reaches_the_wire(tmp_path, gateway, keeps, verdict):
    body = f"KEEPS = {keeps}\n" + FALLS_BACK
    entry, verdicts = _run(gateway, _fake(tmp_path, body), "mfb-04-signature-stripped")
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    (thinking,) = [b for b in _first_messages(entry)[1]["content"] if b["type"] == "thinking"]
    assert thinking["signature"] == "c2lnLWJsb2Nr"
    assert verdicts["MFB-01"]["verdict"] == "PASS", verdicts["MFB-01"]
    assert verdicts["MFB-04"]["verdict"] == verdict, verdicts["MFB-04"]


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
    assert "--resume" not in entry["agent_log"]
    assert "history" not in entry["events"][0]
