"""The ``run`` console against the fake gateway: what the user sees, local tools, usage errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest

from conformance.reference.console import Renderer, main
from conformance.reference.continuation import CONTINUATION_TEXT
from fakes import Gateway, SyncGateway

KEY = "sk-console-secret-4242"
ROOT = Path(__file__).resolve().parents[2]
SCALE = "0.001"  # agent waits: Retry-After 2 s becomes 2 ms


@pytest.fixture(scope="module")
def gw() -> Iterator[SyncGateway]:
    with Gateway.running() as g:
        yield g


@pytest.fixture(scope="module")
def tls_gw() -> Iterator[SyncGateway]:
    with Gateway.running(tls=True) as g:
        yield g


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in ("OPENAI_BASE_URL", "OPENAI_MODEL", "SSL_CERT_FILE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def scenario(*steps: dict, sid: str = "console") -> dict:
    return {
        "id": sid,
        "title": sid,
        "criteria": ["STR-01"],
        "prompt": "x",
        "deadline": 30,
        "script": list(steps),
    }


def write_call(path: str, content: str = "hi") -> dict:
    args = json.dumps({"path": path, "content": content})
    return {
        "reply": {
            "tool_calls": [{"id": "call_1", "name": "write_file", "arguments": args}],
            "finish_reason": "tool_calls",
        }
    }


DONE = {"reply": {"text": "Done.", "finish_reason": "stop"}}


def run(
    gw: SyncGateway, steps: list[dict], workdir: Path, *extra: str, gw_scale: float = 0.001
) -> tuple[int, str, dict]:
    """Run the console in-process against a fresh session; (exit code, stdout, journal)."""
    session = gw.create_session(scenario(*steps), time_scale=gw_scale)
    out, err = StringIO(), StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        argv = ["run", "do it", "--model", "conformance-model", "--workdir", str(workdir)]
        rc = main([*argv, "--base-url", session.base_url, "--time-scale", SCALE, *extra])
    finally:
        sys.stdout, sys.stderr = saved
        journal = session.journal()
        gw.drop_session(session.id)
    text = out.getvalue() + err.getvalue()
    assert KEY not in text, "the API key reached the console output"
    return rc, out.getvalue(), journal


@pytest.mark.parametrize("tls", [False, True])
def test_write_file_then_answer(
    gw: SyncGateway, tls_gw: SyncGateway, tmp_path: Path, tls: bool
) -> None:
    g = tls_gw if tls else gw
    extra = ("--ca-file", str(g.ca_file)) if tls else ()
    rc, out, journal = run(g, [write_call("sub/hello.txt"), DONE], tmp_path, *extra)
    assert rc == 0
    assert (tmp_path / "sub" / "hello.txt").read_text() == "hi"
    lines = out.splitlines()
    assert lines[0] == "you: do it"
    call = lines.index('→ write_file({"path": "sub/hello.txt", "content": "hi"})')
    assert lines[call + 1] == "  ← ok: wrote 2 characters to sub/hello.txt"
    assert lines.index("assistant: Done.") > call
    assert lines[-1] == "[completed]"
    # The model saw the result of the local tool, and the local tools were offered.
    second = journal["entries"][1]["body"]
    assert second["messages"][-1]["content"] == "wrote 2 characters to sub/hello.txt"
    offered = {t["function"]["name"] for t in journal["entries"][0]["body"]["tools"]}
    assert {"read_file", "write_file", "edit_file", "list_dir", "grep", "run_shell"} <= offered


def test_path_escaping_the_workdir_is_refused(gw: SyncGateway, tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    wd.mkdir()
    rc, out, _ = run(gw, [write_call("../escape.txt"), DONE], wd)
    assert rc == 0  # the refusal goes back to the model, the turn goes on
    assert not (tmp_path / "escape.txt").exists()
    assert "← error: Error: tool 'write_file' failed: path '../escape.txt' is outside" in out
    assert "assistant: Done." in out


def test_retry_wait_is_shown(gw: SyncGateway, tmp_path: Path) -> None:
    steps = [
        {"fault": {"http_error": {"status": 429, "headers": {"Retry-After": "2"}}}},
        {"reply": {"text": "Hello!", "finish_reason": "stop"}},
    ]
    rc, out, journal = run(gw, steps, tmp_path)
    assert rc == 0
    lines = out.splitlines()
    retry = lines.index("retrying in 2.0 s (HTTP 429: retry-after 2 s, attempt 1/10)")
    assert lines.index("assistant: Hello!") > retry
    assert len(journal["entries"]) == 2


def test_stalled_stream_shows_the_removal(gw: SyncGateway, tmp_path: Path) -> None:
    # The stream stalls (5 s real) after two text chunks; the idle watchdog (60 s scaled to
    # 1.2 s, well above a chunk's gap under load) withdraws the partial reply and the request
    # is resent without streaming.
    steps = [
        {
            "reply": {"text": "Hello there, friend!", "chunk_chars": 6, "finish_reason": "stop"},
            "fault": {"stall": {"after_events": 3, "seconds": 5}},
        },
        {"match": {"stream": False}, "reply": {"text": "Hello!", "finish_reason": "stop"}},
    ]
    rc, out, _ = run(gw, steps, tmp_path, "--time-scale", "0.02", gw_scale=1.0)
    assert rc == 0
    lines = out.splitlines()
    partial = lines.index("assistant: Hello there,")
    gone = lines.index("(previous partial reply discarded)")
    assert partial < gone < lines.index("assistant: Hello!")


def test_stream_cut_leaves_no_partial_reply_standing(gw: SyncGateway, tmp_path: Path) -> None:
    # Whether the chunks before a cut reach the screen depends on the socket race (a reset drops
    # unread data), so this checks the invariant: any partial shown is then withdrawn.
    steps = [
        {
            "reply": {"text": "Hello there, friend!", "chunk_chars": 6, "finish_reason": "stop"},
            "fault": {"cut": {"after_events": 3, "mode": "reset"}},
        },
        {"match": {"stream": False}, "reply": {"text": "Hello!", "finish_reason": "stop"}},
    ]
    rc, out, _ = run(gw, steps, tmp_path)
    assert rc == 0
    lines = out.splitlines()
    final = lines.index("assistant: Hello!")
    partials = [i for i, s in enumerate(lines[:final]) if s.startswith("assistant: ")]
    discards = [i for i, s in enumerate(lines) if s == "(previous partial reply discarded)"]
    assert len(discards) == len(partials) <= 1
    assert all(p < d < final for p, d in zip(partials, discards, strict=True))


def test_meta_messages_are_hidden(gw: SyncGateway, tmp_path: Path) -> None:
    cut = {"reply": {"text": "part one", "finish_reason": "length"}}
    steps = [cut, cut, {"reply": {"text": "part two", "finish_reason": "stop"}}]
    rc, out, journal = run(gw, steps, tmp_path)
    assert rc == 0
    # The continuation message was sent (the wire shows it) but the user never sees it.
    assert journal["entries"][2]["body"]["messages"][-1]["content"] == CONTINUATION_TEXT
    assert CONTINUATION_TEXT not in out
    assert "assistant: part two" in out


def test_surfaced_error_exits_1_and_redacts_the_key(gw: SyncGateway, tmp_path: Path) -> None:
    body = {"error": {"message": f"invalid key {KEY}", "type": "invalid_request_error"}}
    rc, out, _ = run(gw, [{"fault": {"http_error": {"status": 401, "body": body}}}], tmp_path)
    assert rc == 1
    assert "error [auth]:" in out and "[REDACTED]" in out
    assert out.splitlines()[-1] == "[error]"


def test_json_prints_raw_events(gw: SyncGateway, tmp_path: Path) -> None:
    rc, out, _ = run(gw, [write_call("a.txt"), DONE], tmp_path, "--json")
    assert rc == 0
    events = [json.loads(line) for line in out.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "hello" and types[-1] == "turn_end" and "tool" in types
    assert events[-1]["reason"] == "completed"


def test_missing_key_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    rc = main(["run", "hi", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"])
    assert rc == 2
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err


def test_missing_base_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "hi", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_BASE_URL" in err and KEY not in err


def test_base_url_and_model_from_the_environment(
    gw: SyncGateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = gw.create_session(scenario(DONE), time_scale=0.001)
    monkeypatch.setenv("OPENAI_BASE_URL", session.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    try:
        assert main(["run", "hi", "--time-scale", SCALE]) == 0
        assert session.journal()["entries"][0]["body"]["model"] == "env-model"
    finally:
        gw.drop_session(session.id)
    assert "assistant: Done." in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--workdir", "/nonexistent-dir-for-test"], "is not a directory"),
        (["--ca-file", "/nonexistent-ca.pem"], "CA bundle"),
        (["--time-scale", "0"], "--time-scale must be > 0"),
    ],
)
def test_bad_options_are_usage_errors(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "hi", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", *argv]) == 2
    assert needle in capsys.readouterr().err


# ---- the renderer on hand-built events -----------------------------------------------------


def render(*events: dict) -> str:
    out = StringIO()
    r = Renderer(out, secret=KEY)
    for e in events:
        r(e)
    return out.getvalue()


def msg(mid: str, text: str, **kw: object) -> dict:
    return {"type": "message", "id": mid, "role": "assistant", "text": text, "meta": False, **kw}


def test_streamed_growth_prints_only_the_new_part() -> None:
    assert render(msg("m1", "Hel"), msg("m1", "Hello"), msg("m1", "Hello")) == "assistant: Hello"


def test_reasoning_is_prefixed_apart_from_the_text() -> None:
    out = render(msg("m1", "", reasoning="hmm"), msg("m1", "Hi", reasoning="hmm"))
    assert out == "thinking: hmm\nassistant: Hi"


def test_removal_of_a_shown_message_is_announced_once() -> None:
    out = render(msg("m1", "Hel"), {"type": "removed", "id": "m1"}, {"type": "removed", "id": "m1"})
    assert out == "assistant: Hel\n(previous partial reply discarded)\n"


def test_removal_of_a_never_shown_message_prints_nothing() -> None:
    meta = msg("m2", "continue", meta=True)
    assert render(meta, {"type": "removed", "id": "m2"}) == ""


def test_a_replaced_message_is_marked_revised() -> None:
    out = render(msg("m1", "Hello"), msg("m1", "Goodbye"))
    assert out == "assistant: Hello\n(reply revised)\nassistant: Goodbye"


def test_long_tool_output_is_cut_to_a_few_lines() -> None:
    call = {"id": "c1", "function": {"name": "grep", "arguments": '{"pattern": "x"}'}}
    output = "\n".join(f"line {i}" for i in range(20))
    out = render(
        msg("m1", "", tool_calls=[call]),
        {"type": "tool", "call_id": "c1", "name": "grep", "status": "ok", "output": output},
    ).splitlines()
    assert out[0] == '→ grep({"pattern": "x"})'
    assert out[1] == "  ← ok: line 0"
    assert out[6] == "    line 5"
    assert out[7] == "    … 14 more lines"
    assert len(out) == 8


def test_retry_line_without_a_delay() -> None:
    out = render({"type": "retry", "attempt": 3, "delay_s": None, "reason": "HTTP 503: backoff"})
    assert out == "retrying in a moment (HTTP 503: backoff, attempt 3/10)\n"


def test_key_is_redacted_in_rendered_text() -> None:
    out = render({"type": "error", "kind": "auth", "message": f"bad key {KEY}"})
    assert KEY not in out and "[REDACTED]" in out


# ---- Ctrl-C --------------------------------------------------------------------------------


def test_ctrl_c_aborts_with_130(gw: SyncGateway, tmp_path: Path) -> None:
    # The stream stalls for a long time; SIGINT once the request has arrived must end the turn.
    stall = {
        "reply": {"text": "Hello there, friend!", "chunk_chars": 6, "finish_reason": "stop"},
        "fault": {"stall": {"after_events": 2, "seconds": 60}},
    }
    session = gw.create_session(scenario(stall), time_scale=1.0)
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": str(ROOT)}
    argv = ["run", "hi", "--model", "m", "--workdir", str(tmp_path), "--base-url"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.reference", *argv, session.base_url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        session.wait_for(lambda j: len(j["entries"]) >= 1, timeout=20)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        gw.drop_session(session.id)
    assert proc.returncode == 130, err
    assert out.splitlines()[-1] == "[aborted]"
    assert KEY not in out + err


def test_json_events_redact_the_key(gw: SyncGateway, tmp_path: Path) -> None:
    body = {"error": {"message": f"invalid key {KEY}", "type": "invalid_request_error"}}
    step = {"fault": {"http_error": {"status": 401, "body": body}}}
    rc, out, _ = run(gw, [step], tmp_path, "--json")  # run() itself asserts the key is absent
    assert rc == 1
    errors = [e for e in map(json.loads, out.splitlines()) if e["type"] == "error"]
    assert len(errors) == 1 and "[REDACTED]" in errors[0]["message"]
