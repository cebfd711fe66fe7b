"""The cmd: adapter against tiny fake agents: statuses, errors, redaction, no stray processes."""

from __future__ import annotations

import re
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conformance.adapters import RunRequest, make_adapter
from conformance.adapters.command import HELLO_FIRST, CommandAdapter

KEY = "sk-test-SECRET-0123456789"

PRELUDE = textwrap.dedent(
    """
    import json, os, sys, time, subprocess
    def emit(**ev):
        sys.stdout.write(json.dumps(ev) + "\\n"); sys.stdout.flush()
    def hello(caps=("tools", "abort")):
        emit(type="hello", agent="fake", version="0", capabilities=list(caps))
    """
)


def agent(tmp_path: Path, body: str) -> str:
    script = tmp_path / "agent.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    return f"{sys.executable} {script}"


def request(tmp_path: Path, deadline_s: float = 0.5) -> RunRequest:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return RunRequest(
        start={"type": "start", "protocol": 1, "scenario": "t", "prompt": "hi"},
        base_url="http://127.0.0.1:1/s/x/v1",
        api_key=KEY,
        ca_file=None,
        workdir=work,
        deadline_s=deadline_s,
        abort=threading.Event(),
    )


def group_alive(pgid: int) -> bool:
    """True if a live (non-zombie) process is still in process group `pgid`."""
    deadline = time.monotonic() + 1.0  # reparented zombies may take a moment to be reaped
    while True:
        live = False
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                live = True
                break
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.01)


def run(tmp_path: Path, body: str, deadline_s: float = 0.5, **kw):
    adapter = CommandAdapter(agent(tmp_path, body), exit_grace_s=0.5, **kw)
    req = request(tmp_path, deadline_s)
    t0 = time.monotonic()
    out = adapter.run(req)
    elapsed = time.monotonic() - t0
    assert adapter.last_pgid is not None
    assert not group_alive(adapter.last_pgid), "process group survived the run"
    return out, elapsed, req


GOOD = """
hello()
start = json.loads(sys.stdin.readline())
emit(type="message", id="m1", role="assistant", text="got " + start["prompt"]
     + " cwd=" + os.path.basename(os.getcwd()) + " proto=" + os.environ["AGENT_CONFORMANCE_PROTOCOL"]
     + " url=" + os.environ["OPENAI_BASE_URL"])
emit(type="usage", prompt_tokens=1, completion_tokens=2)
emit(type="turn_end", reason="completed")
sys.stdin.read()  # wait for the harness to close stdin
"""


def test_good_agent_runs(tmp_path):
    out, elapsed, _ = run(tmp_path, GOOD)
    assert out.status == "ran", out.error
    assert out.error is None
    assert out.hello and out.hello["capabilities"] == ["tools", "abort"]
    assert [e["type"] for e in out.events] == ["hello", "message", "usage", "turn_end"]
    assert all(isinstance(e["t_ns"], int) for e in out.events)
    assert out.events[1]["text"] == ("got hi cwd=work proto=1 url=http://127.0.0.1:1/s/x/v1")
    assert elapsed < 2


def test_crash_is_error_with_log(tmp_path):
    out, _, _ = run(tmp_path, "hello()\nraise RuntimeError('boom in agent')\n")
    assert out.status == "error"
    assert "exited with status 1 before turn_end" in out.error
    assert "1 events" in out.error
    assert "boom in agent" in out.log


def test_non_json_line_names_line_and_content(tmp_path):
    out, _, _ = run(
        tmp_path,
        "hello()\nemit(type='usage', prompt_tokens=1, completion_tokens=1)\n"
        "print('Traceback (most recent call last)', flush=True)\ntime.sleep(30)\n",
    )
    assert out.status == "error"
    assert out.error.startswith("line 3 of stdout is not JSON: 'Traceback")


def test_non_object_line(tmp_path):
    out, _, _ = run(tmp_path, "print('[1, 2]', flush=True)\ntime.sleep(30)\n")
    assert out.status == "error"
    assert "line 1 of stdout is not a JSON object" in out.error


def test_invalid_event_names_field(tmp_path):
    out, _, _ = run(tmp_path, "hello()\nemit(type='turn_end', reason='finished')\ntime.sleep(30)\n")
    assert out.status == "error"
    assert "line 2 of stdout" in out.error and "'turn_end'" in out.error
    assert "'reason'" in out.error


def test_missing_required_field(tmp_path):
    out, _, _ = run(tmp_path, "hello()\nemit(type='usage', prompt_tokens=1)\ntime.sleep(30)\n")
    assert out.status == "error"
    assert "completion_tokens" in out.error


def test_exit_before_turn_end(tmp_path):
    out, _, _ = run(tmp_path, "hello()\nemit(type='message', id='1', role='assistant', text='x')\n")
    assert out.status == "error"
    assert out.error == "agent exited with status 0 before turn_end (2 events received)"


def test_exit_89_is_unsupported(tmp_path):
    out, _, _ = run(tmp_path, "hello()\nsys.exit(89)\n")
    assert out.status == "unsupported"
    assert "89" in out.error


def test_never_ending_turn_times_out_quickly(tmp_path):
    body = "hello()\nwhile True:\n    time.sleep(0.01)\n"
    out, elapsed, _ = run(tmp_path, body, deadline_s=0.3)
    assert out.status == "timeout"
    assert "no turn_end within 0.3 s" in out.error and "last: hello" in out.error
    assert 0.3 <= elapsed < 1.5


def test_children_in_group_are_killed(tmp_path):
    body = """
    hello()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    emit(type="error", kind="x", message=str(child.pid))
    time.sleep(60)
    """
    out, _, _ = run(tmp_path, body, deadline_s=0.4)
    assert out.status == "timeout"
    child_pid = int(out.events[1]["message"])
    assert _is_zombie(child_pid), "the agent's child survived"


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_stdout_flood_is_capped(tmp_path):
    body = """
    hello()
    line = json.dumps({"type": "message", "id": "m", "role": "assistant", "text": "x" * 1000}) + "\\n"
    while True:
        sys.stdout.write(line)
    """
    out, elapsed, _ = run(tmp_path, body, deadline_s=5, max_stdout_bytes=200_000)
    assert out.status == "error"
    assert out.error == "stdout flood: more than 200000 bytes of events"
    assert elapsed < 3


def test_overlong_line(tmp_path):
    body = "hello()\nsys.stdout.write('x' * 5000); sys.stdout.flush(); time.sleep(30)\n"
    out, _, _ = run(tmp_path, body, deadline_s=2, max_line_bytes=1000)
    assert out.status == "error"
    assert "line 2 of stdout is longer than 1000 bytes" in out.error


def test_stderr_flood_is_capped(tmp_path):
    body = """
    hello()
    for _ in range(300):
        sys.stderr.write("e" * 1000 + "\\n")
    sys.stderr.flush()
    sys.stdin.readline()
    emit(type="turn_end", reason="completed")
    """
    out, _, _ = run(tmp_path, body, max_log_bytes=10_000)
    assert out.status == "ran", out.error
    assert out.log.count("e") <= 10_000 + 20
    assert "[log truncated at 10000 bytes]" in out.log


def test_the_agents_output_is_handed_over_as_written(tmp_path):
    # DBG-02 is judged on what the agent wrote: the runner redacts, after the checks.
    body = """
    key = os.environ["OPENAI_API_KEY"]
    hello()
    sys.stderr.write("using key " + key + "\\n"); sys.stderr.flush()
    emit(type="error", kind="auth", message="bad key " + key)
    print("not json " + key, flush=True)
    time.sleep(30)
    """
    out, _, _ = run(tmp_path, body)
    assert out.status == "error"
    assert f"using key {KEY}" in out.log
    assert out.events[1]["message"] == f"bad key {KEY}"
    # The adapter's own error text quotes the bad line: harness text, redacted at once.
    assert KEY not in out.error and "[REDACTED]" in out.error


def test_abort_is_forwarded(tmp_path):
    body = """
    hello()
    sys.stdin.readline()
    emit(type="message", id="m1", role="assistant", text="working")
    ctl = json.loads(sys.stdin.readline())
    emit(type="turn_end", reason="aborted" if ctl == {"type": "abort"} else "error")
    """
    adapter = CommandAdapter(agent(tmp_path, body), exit_grace_s=0.5)
    req = request(tmp_path, deadline_s=2)
    timer = threading.Timer(0.1, req.abort.set)
    timer.start()
    out = adapter.run(req)
    timer.join()
    assert out.status == "ran", out.error
    assert out.events[-1]["reason"] == "aborted"
    assert not group_alive(adapter.last_pgid)


def test_lingering_after_turn_end_is_killed(tmp_path):
    body = (
        "hello()\nemit(type='turn_end', reason='completed')\nsignal_ignored = True\n"
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    )
    out, elapsed, _ = run(tmp_path, body)
    assert out.status == "ran"
    assert elapsed < 2


def test_nonzero_exit_after_turn_end_is_error(tmp_path):
    out, _, _ = run(tmp_path, "hello()\nemit(type='turn_end', reason='completed')\nsys.exit(3)\n")
    assert out.status == "error"
    assert out.error == "agent exited with status 3 after turn_end"


def test_missing_command(tmp_path):
    adapter = CommandAdapter(str(tmp_path / "no-such-agent"))
    out = adapter.run(request(tmp_path))
    assert out.status == "error"
    assert "cannot start" in out.error and "no-such-agent" in out.error


def test_capabilities_probe(tmp_path):
    adapter = make_adapter(
        "cmd:" + agent(tmp_path, "hello(['tools', 'time_scale'])\ntime.sleep(30)\n")
    )
    t0 = time.monotonic()
    assert adapter.capabilities() == {"tools", "time_scale"}
    assert not group_alive(adapter.last_pgid)
    assert adapter.capabilities() == {"tools", "time_scale"}  # cached: no second start
    assert time.monotonic() - t0 < 2


def test_make_adapter_rejects_unknown():
    with pytest.raises(ValueError, match="unknown adapter 'bogus'"):
        make_adapter("bogus")
    with pytest.raises(ValueError, match="needs a command"):
        make_adapter("cmd:")


def _probe_error(
    tmp_path: Path, body: str, hello_timeout_s: float = 0.3
) -> tuple[str, float, int | None]:
    adapter = make_adapter("cmd:" + agent(tmp_path, body))
    assert isinstance(adapter, CommandAdapter)
    adapter.hello_timeout_s = hello_timeout_s  # the 10 s default, shortened where it is waited
    t0 = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        adapter.capabilities()
    return str(info.value), time.monotonic() - t0, adapter.last_pgid


def test_agent_that_reads_start_first_is_told_to_write_hello_first(tmp_path):
    body = """
    emit(type="usage", prompt_tokens=1, completion_tokens=0)
    print("waiting for start; key=" + os.environ["OPENAI_API_KEY"], file=sys.stderr, flush=True)
    start = json.loads(sys.stdin.readline())
    hello()
    """
    msg, elapsed, pgid = _probe_error(tmp_path, body)
    assert "no hello line within 0.3 s" in msg
    assert "must write `hello` before reading `start`" in msg
    assert HELLO_FIRST in msg
    # What the agent wrote, both streams, the key redacted like everything else.
    assert '"type": "usage"' in msg
    assert "waiting for start; key=[REDACTED]" in msg
    assert elapsed < 3
    assert pgid is not None and not group_alive(pgid)


def test_agent_that_dies_before_hello_shows_what_it_wrote(tmp_path):
    # The agent ends by itself: the default wait for hello leaves a loaded machine time to start it.
    body = "print('cannot import x', file=sys.stderr)\nsys.exit(1)\n"
    msg, _, _ = _probe_error(tmp_path, body, hello_timeout_s=10.0)
    assert "no hello line: agent exited with status 1 before hello" in msg
    assert "stdout: nothing; stderr: 'cannot import x\\n'" in msg


def test_the_section_the_hello_error_names_exists():
    doc, anchor = HELLO_FIRST.split("#")
    text = (Path(__file__).resolve().parents[2] / doc).read_text(encoding="utf-8")
    # GitHub's anchor of a heading: lower case, spaces to dashes, punctuation dropped.
    slugs = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in text.splitlines()
        if line.startswith("#")
    }
    assert anchor in slugs
    assert "writes `hello` first, then reads the `start` line" in text


def test_relative_paths_resolve_where_conformance_was_started(tmp_path, monkeypatch):
    # `cmd:python3 agents/hello.py` from the directory holding agents/: the agent still runs
    # in a scratch directory of its own (its cwd), yet its script is found. Before, the probe
    # failed with "can't open file '<scratch>/agents/hello.py'".
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "hello.py").write_text(PRELUDE + GOOD, encoding="utf-8")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    adapter = CommandAdapter(f"{sys.executable} agents/hello.py --flag=agents unknown.txt")
    assert adapter.name == f"cmd:{sys.executable} agents/hello.py --flag=agents unknown.txt"
    assert adapter.capabilities() == {"tools", "abort"}
    req = RunRequest(
        {"type": "start", "prompt": "hi"},
        "http://127.0.0.1:1/s/x/v1",
        KEY,
        None,
        tmp_path / "work",
        5.0,
        threading.Event(),
    )
    out = adapter.run(req)
    assert out.status == "ran", (out.error, out.log)
    assert "cwd=work" in out.events[1]["text"]  # run where the harness put it


def test_resolve_paths_leaves_programs_flags_and_unknown_words() -> None:
    from conformance.adapters.command import resolve_paths

    here = Path(__file__).resolve().parent
    name = Path(__file__).name
    assert resolve_paths(["node", name, "-v", f"--x={name}", "nope", "/abs"], here) == [
        "node",
        str(here / name),
        "-v",
        f"--x={here / name}",
        "nope",
        "/abs",
    ]
    assert resolve_paths([f"./{name}"], here) == [str(here / f"./{name}")]
