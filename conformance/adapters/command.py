"""The `cmd:COMMAND` adapter: run any program that speaks the adapter protocol.

Theory of operation: the agent runs in its own process group (new session) so that it and
every child it spawns can be killed together. Two daemon threads drain stdout (lines, into a
queue) and stderr (chunks, kept up to a cap) so the agent never blocks on a full pipe and the
main thread never blocks on a read: it only waits on the queue with a timeout, which lets it
watch the deadline and forward the user abort. Whatever happens, the process group is killed
with SIGKILL before `run` returns, then the threads are joined with a bound.

The agent runs in a scratch directory of its own, but its command was written where the user
stands: a word of it naming a file or directory that exists relative to the directory
`conformance` was started from (``node examples/agent.mjs``, ``./my-agent``,
``--config=agent.json``) is made absolute there, once, when the adapter is made.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest, as_status, redact

__all__ = ["EXIT_UNSUPPORTED", "HELLO_FIRST", "CommandAdapter", "kill_group", "resolve_paths"]

EXIT_UNSUPPORTED = 89
_INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT", "TZ")
_POLL_S = 0.02  # how often the main loop looks at the abort flag
_HEAD_BYTES = 400  # how much of the agent's stdout and stderr a probe error quotes
HELLO_FIRST = "docs/adapter-protocol.md#hello-before-start"  # the section a probe error names


def resolve_paths(argv: list[str], cwd: Path) -> list[str]:
    """``argv`` with each relative word that names an existing path under ``cwd`` made absolute
    (also the value of ``--option=VALUE``). A bare program name (``node``) is left to PATH; a
    word that names nothing there is left as it is."""

    def resolved(word: str) -> str:
        if not word or os.path.isabs(word) or word.startswith("~"):
            return word
        return str(cwd / word) if (cwd / word).exists() else word

    out = []
    for i, word in enumerate(argv):
        if i == 0 and "/" not in word:
            out.append(word)  # a program looked up on PATH, as a shell would
        elif word.startswith("-") and "=" in word:
            flag, value = word.split("=", 1)
            out.append(f"{flag}={resolved(value)}")
        elif word.startswith("-"):
            out.append(word)
        else:
            out.append(resolved(word))
    return out


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group of `proc` (its own session); ignore if already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    # SIGKILL cannot be ignored, so this wait is short; the bound is only a safety net.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class _Reader:
    """Drains the agent's stdout (lines) and stderr (bytes) on daemon threads."""

    def __init__(self, proc: subprocess.Popen[bytes], max_line: int, max_stdout: int, max_log: int):
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stdout_overflow = False
        self.line_too_long = False
        self._out_head = bytearray()  # the first bytes of stdout, whatever they were
        self._log = bytearray()
        self._max_log = max_log
        self._threads = [
            threading.Thread(
                target=self._read_stdout, args=(proc.stdout, max_line, max_stdout), daemon=True
            ),
            threading.Thread(target=self._read_stderr, args=(proc.stderr,), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self, pipe: IO[bytes], max_line: int, max_total: int) -> None:
        total = 0
        try:
            while True:
                line = pipe.readline(max_line + 1)
                if not line:
                    break
                if len(self._out_head) < _HEAD_BYTES:
                    self._out_head += line[: _HEAD_BYTES - len(self._out_head)]
                total += len(line)
                if total > max_total:
                    self.stdout_overflow = True
                    break
                if len(line) > max_line and not line.endswith(b"\n"):
                    self.line_too_long = True
                    break
                self.lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self.lines.put(None)

    def _read_stderr(self, pipe: IO[bytes]) -> None:
        try:
            while True:
                chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
                if not chunk:
                    break
                room = self._max_log - len(self._log)
                if room > 0:
                    self._log += chunk[:room]
        except (OSError, ValueError):
            pass

    def log(self) -> str:
        text = self._log.decode("utf-8", errors="replace")
        if len(self._log) >= self._max_log:
            text += f"\n[log truncated at {self._max_log} bytes]"
        return text

    def heads(self) -> str:
        """What the agent wrote, the first bytes of each stream; call after ``join``."""

        def head(data: bytes) -> str:
            if not data:
                return "nothing"
            text = repr(data[:_HEAD_BYTES].decode("utf-8", errors="replace"))
            return text + (" …" if len(data) > _HEAD_BYTES else "")

        # The stdout head holds at most _HEAD_BYTES, so it cannot tell it was cut: ask the log.
        return f"stdout: {head(bytes(self._out_head))}; stderr: {head(bytes(self._log))}"

    def join(self, timeout: float = 2.0) -> None:
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))


@dataclass
class _Turn:
    """What the agent's stdout has given so far in one run, and how the reading ended."""

    events: list[dict[str, Any]] = field(default_factory=list)
    hello: dict[str, Any] | None = None
    status: str = "error"
    error: str | None = None
    crashed: bool = False
    lineno: int = 0

    def no_turn_end(self, req: RunRequest) -> str:
        last = self.events[-1].get("type") if self.events else "none"
        return (
            f"no turn_end within {req.deadline_s:g} s ({len(self.events)} events received; "
            f"last: {last})"
        )


class CommandAdapter(AdapterBase):
    """Drive the command `command` (a shell-like string, split with shlex) as an agent."""

    def __init__(
        self,
        command: str,
        *,
        exit_grace_s: float = 5.0,
        hello_timeout_s: float = 10.0,
        max_line_bytes: int = 1_000_000,
        max_stdout_bytes: int = 10_000_000,
        max_log_bytes: int = 1_000_000,
        validate: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self.argv = resolve_paths(shlex.split(command), Path.cwd())
        if not self.argv:
            raise ValueError("cmd: adapter needs a command, e.g. 'cmd:node agent.mjs'")
        self.name = f"cmd:{command}"
        self.exit_grace_s = exit_grace_s
        self.hello_timeout_s = hello_timeout_s
        self.max_line_bytes = max_line_bytes
        self.max_stdout_bytes = max_stdout_bytes
        self.max_log_bytes = max_log_bytes
        if validate is None:
            from conformance.adapters.validation import validate_event

            validate = validate_event
        self._validate = validate
        self._caps: set[str] | None = None
        self.last_pgid: int | None = None  # for tests/diagnostics: the last process group

    # -- process handling -------------------------------------------------------------

    def _env(self, base_url: str, api_key: str, ca_file: str | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
        env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY=api_key, AGENT_CONFORMANCE_PROTOCOL="1")
        if ca_file:
            env["SSL_CERT_FILE"] = ca_file
        return env

    def _spawn(self, req: RunRequest) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.argv,
            cwd=str(req.workdir),
            env=self._env(req.base_url, req.api_key, req.ca_file),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.last_pgid = proc.pid
        return proc

    @staticmethod
    def _write(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> bool:
        try:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    @staticmethod
    def _close_stdin(proc: subprocess.Popen[bytes]) -> None:
        try:
            if proc.stdin:
                proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    # -- public API ---------------------------------------------------------------------

    def capabilities(self) -> set[str]:
        """Start the command once without a start message, read `hello`, kill it (cached)."""
        if self._caps is None:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                req = RunRequest(
                    start={},
                    base_url="http://127.0.0.1:9/v1",
                    api_key="capabilities-probe",
                    ca_file=None,
                    workdir=Path(tmp),
                    deadline_s=self.hello_timeout_s,
                )
                out = self._run(req, probe=True)
            if out.hello is None:
                raise RuntimeError(f"{self.name}: {out.error}")
            self._caps = {str(c) for c in out.hello.get("capabilities", [])}
        return set(self._caps)

    def run(self, req: RunRequest) -> RunOutcome:
        """Run one scenario; bounded by `req.deadline_s` plus the exit grace."""
        return self._run(req, probe=False)

    # -- the loop -------------------------------------------------------------------------

    def _run(self, req: RunRequest, *, probe: bool) -> RunOutcome:
        key = req.api_key
        try:
            proc = self._spawn(req)
        except OSError as exc:
            return RunOutcome(
                "error", [], None, "", redact(f"cannot start {self.argv[0]!r}: {exc}", key)
            )
        reader = _Reader(proc, self.max_line_bytes, self.max_stdout_bytes, self.max_log_bytes)
        turn = _Turn()
        try:
            if not probe:
                self._write(proc, req.start)
            self._read_turn(proc, reader, req, turn, probe=probe)
        finally:
            kill_group(proc)
            self._close_stdin(proc)
            reader.join()
        if probe and turn.hello is None and turn.error:
            if turn.status != "timeout":  # the timeout's own text says it first
                turn.error = f"no hello line: {turn.error}"
            turn.error += f". The agent wrote: {reader.heads()}"
        return RunOutcome(
            status=as_status(turn.status),
            events=turn.events,
            hello=turn.hello,
            log=reader.log(),
            error=redact(turn.error, key) if turn.error else None,
            crashed=turn.crashed,
        )

    def _read_turn(
        self,
        proc: subprocess.Popen[bytes],
        reader: _Reader,
        req: RunRequest,
        turn: _Turn,
        *,
        probe: bool,
    ) -> None:
        """Read the agent's lines into ``turn`` until its turn ends (or its hello, probing), it
        breaks the protocol, it exits, or the deadline passes; send the abort when asked."""
        deadline = time.monotonic() + req.deadline_s
        abort_sent = False
        while True:
            if not probe and req.abort.is_set() and not abort_sent:
                abort_sent = self._write(proc, {"type": "abort"}) or True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                turn.status = "timeout"
                turn.error = self._no_hello(req.deadline_s) if probe else turn.no_turn_end(req)
                return
            try:
                raw = reader.lines.get(timeout=min(_POLL_S, remaining))
            except queue.Empty:
                continue
            if raw is None:
                status, turn.error = self._after_eof(
                    proc, reader, len(turn.events), turn.lineno, "hello" if probe else "turn_end"
                )
                # It ended on its own before its turn did (the harness stopped nothing).
                turn.crashed = status == "crashed" and not probe
                turn.status = "error" if status == "crashed" else status
                return
            if self._take(raw, turn, proc, probe=probe):
                return

    def _take(self, raw: bytes, turn: _Turn, proc: subprocess.Popen[bytes], *, probe: bool) -> bool:
        """Take one line of the agent's stdout into ``turn``; whether the reading is over."""
        turn.lineno += 1
        t_ns = time.monotonic_ns()
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return False
        where = f"line {turn.lineno} of stdout"
        try:
            event = json.loads(text)
        except ValueError:
            turn.error = f"{where} is not JSON: {text[:200]!r}"
            return True
        if not isinstance(event, dict):
            turn.error = f"{where} is not a JSON object: {text[:200]!r}"
            return True
        problem = self._validate(event)
        if problem:
            turn.error = f"{where}: invalid {event.get('type')!r} event: {problem}"
            return True
        event["t_ns"] = t_ns
        turn.events.append(event)
        if event.get("type") == "hello" and turn.hello is None:
            turn.hello = event
            if probe:
                turn.status = "ran"
                return True
        if event.get("type") == "turn_end":
            turn.status, turn.error = self._after_turn_end(proc)
            return True
        return False

    @staticmethod
    def _no_hello(waited_s: float) -> str:
        return (
            f"no hello line within {waited_s:g} s: the agent must write `hello` before reading "
            "`start`. The harness writes `start` only after it has read `hello`, because the "
            "capabilities in `hello` decide the time scale in `start` and which scenarios run; "
            f"an agent that reads `start` first waits forever. See {HELLO_FIRST}"
        )

    def _after_turn_end(self, proc: subprocess.Popen[bytes]) -> tuple[str, str | None]:
        """Close stdin and give the agent the grace period to exit on its own."""
        self._close_stdin(proc)
        try:
            rc = proc.wait(timeout=self.exit_grace_s)
        except subprocess.TimeoutExpired:
            # The turn completed; lingering is only impolite: the group is killed anyway.
            return "ran", None
        if rc == EXIT_UNSUPPORTED:
            return "unsupported", "agent exited with status 89 (scenario unsupported)"
        if rc != 0:
            return "error", f"agent exited with status {rc} after turn_end"
        return "ran", None

    def _after_eof(
        self,
        proc: subprocess.Popen[bytes],
        reader: _Reader,
        n_events: int,
        lineno: int,
        awaited: str,
    ) -> tuple[str, str | None]:
        """stdout ended (or overflowed) before the ``awaited`` event: find out why ("crashed":
        the agent exited, or died of a signal, on its own)."""
        if reader.stdout_overflow:
            return "error", f"stdout flood: more than {self.max_stdout_bytes} bytes of events"
        if reader.line_too_long:
            return "error", (
                f"line {lineno + 1} of stdout is longer than {self.max_line_bytes} bytes"
            )
        try:
            rc = proc.wait(timeout=min(self.exit_grace_s, 1.0))
        except subprocess.TimeoutExpired:
            return "error", f"agent closed stdout before {awaited} ({n_events} events received)"
        if rc == EXIT_UNSUPPORTED:
            return "unsupported", "agent exited with status 89 (scenario unsupported)"
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
        return "crashed", f"agent {how} before {awaited} ({n_events} events received)"
