"""The `shipped:<profile>` adapter: certify an agent as it ships, knowing nothing of our protocol.

Theory of operation: a *profile* (``conformance/profiles/<name>.yaml``, validated against a
schema with file:line errors) says how to run the agent's own headless mode: an argv template,
environment variables and configuration files written into a fresh ``HOME`` /
``XDG_CONFIG_HOME`` (and the working directory), all templated with the run's ``{prompt}``,
``{base_url}``, ``{model}`` and ``{api_key}``. The agent runs once per scenario under the
loopback guard (conformance.guard), in its own process group, killed as a group at the run's
wall-clock deadline. Evidence comes from the wire (the gateway's journal); the agent's output is
mapped to protocol events only where the mapping is honest:

- ``hello`` is synthesised from the profile (name, pinned version, declared capabilities);
- the assistant's final text, and the tool calls it printed, come from its structured output
  when the profile names a parser (``text`` takes the whole stdout as the final answer);
- a non-zero exit is an ``error`` event (kind ``agent_exit``: the agent's words are not mapped
  to our error kinds) and ``turn_end`` with reason ``error``; exit 0 is ``completed``.

Removals, hidden (meta) messages, retries the agent does not print and user aborts cannot be
observed: the profile's capabilities leave them out, so their criteria are UNSUPPORTED rather
than guessed. Outside connection attempts logged by the guard are kept on the adapter
(``last_outside_attempts``) and written into the scenario's ``agent_log``; see
``outside_attempts`` for the certification hook.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from conformance.adapters.command import kill_group
from conformance.adapters.interface import RunOutcome, RunRequest, redact
from conformance.guard import LoopbackGuard

__all__ = [
    "PLACEHOLDERS",
    "PROFILE_DIR",
    "Profile",
    "ProfileError",
    "ShippedAdapter",
    "agent_cache_dir",
    "load_profile",
    "error_event",
    "parse_output",
    "render",
]

PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"
PLACEHOLDERS = (
    "prompt",
    "base_url",
    "model",
    "api_key",
    "home",
    "config_home",
    "workdir",
    "install",
    "bin",
    "ca_file",
    "base_url_root",
)
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ANY_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
PARSERS = ("text", "qwen-json", "opencode-json", "claude-stream-json", "codex-json")
# The wire dialect an agent speaks (documentation, and which base URL form it takes).
DIALECTS = ("openai_chat", "anthropic_messages", "openai_responses")
_MAX_LOG = 1_000_000

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "install", "command"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
        "description": {"type": "string"},
        "install": {
            "type": "object",
            "required": ["npm", "bin"],
            "additionalProperties": False,
            "properties": {
                "npm": {"type": "string", "pattern": "^(@[^/@]+/)?[^/@]+@[0-9][^@]*$"},
                "extra": {"type": "array", "items": {"type": "string", "pattern": "@[0-9]"}},
                "bin": {"type": "string", "minLength": 1},
                "chmod_x": {"type": "array", "items": {"type": "string"}},
            },
        },
        "command": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "root"],
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "root": {"enum": ["home", "config_home", "workdir"]},
                    "json": {},
                    "text": {"type": "string"},
                    "link": {"type": "string"},
                },
                "oneOf": [
                    {"required": ["json"]},
                    {"required": ["text"]},
                    {"required": ["link"]},
                ],
            },
        },
        "capabilities": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "output": {"enum": list(PARSERS)},
        "telemetry": {"type": "string"},
        "dialect": {"enum": list(DIALECTS)},
        "min_deadline_s": {"type": "number", "minimum": 0},
    },
}


class ProfileError(ValueError):
    """A profile that cannot be used; the message starts with file:line."""


@dataclass
class Profile:
    name: str
    source: str
    npm: str
    bin: str
    command: list[str]
    extra: list[str] = field(default_factory=list)
    chmod_x: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    files: list[dict[str, Any]] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    output: str = "text"
    description: str = ""
    telemetry: str = ""
    dialect: str = "openai_chat"
    # Real seconds a run gets at least: an agent that cannot scale its waits needs its own
    # retry budget (scenario deadlines are written for scaled time).
    min_deadline_s: float = 0.0

    @property
    def package(self) -> str:
        return self.npm.rpartition("@")[0]

    @property
    def version(self) -> str:
        return self.npm.rpartition("@")[2]

    @property
    def install_dir(self) -> Path:
        return agent_cache_dir() / f"{self.name}-{self.version}"

    @property
    def bin_path(self) -> Path:
        return self.install_dir / "node_modules" / ".bin" / self.bin


def agent_cache_dir() -> Path:
    """Where pinned agents are installed: $CONFORMANCE_AGENT_CACHE or <project>/.cache/agents."""
    env = os.environ.get("CONFORMANCE_AGENT_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".cache" / "agents"


def _line_map(node: yaml.Node, path: tuple, out: dict[tuple, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[path + (key,)] = k.start_mark.line + 1
            _line_map(v, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _line_map(v, path + (i,), out)


def _where(source: str, lines: dict[tuple, int], path: tuple) -> str:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return f"{source}:{lines[path[:n]]}"
    return source


def _strings(obj: Any, path: tuple = ()):
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _strings(v, path + (i,))


def load_profile(spec: str | Path) -> Profile:
    """Load a profile by name (from conformance/profiles/) or by path; ProfileError names file:line."""
    path = Path(spec)
    if not path.suffix:
        path = PROFILE_DIR / f"{spec}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
            raise ProfileError(f"{path}: no such profile {str(spec)!r}; known: {known}")
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{src}: cannot read profile: {exc}") from exc
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ProfileError(f"{src}{line}: invalid YAML: {exc}") from exc
    lines: dict[tuple, int] = {}
    if node is not None:
        _line_map(node, (), lines)
    err = min(
        Draft202012Validator(_SCHEMA).iter_errors(data),
        key=lambda e: (-len(e.absolute_path), str(e.message)),
        default=None,
    )
    if err is not None:
        p = tuple(err.absolute_path)
        field_name = ".".join(str(x) for x in p) or "(profile)"
        raise ProfileError(f"{_where(src, lines, p)}: {field_name}: {err.message}")
    # Unknown placeholders are typos that would reach the agent verbatim: refuse them.
    for p, s in _strings({k: data.get(k) for k in ("command", "env", "files")}):
        for m in _ANY_PLACEHOLDER.finditer(s):
            if m.group(1) not in PLACEHOLDERS:
                raise ProfileError(
                    f"{_where(src, lines, p)}: {'.'.join(map(str, p))}: unknown placeholder "
                    f"{{{m.group(1)}}}; known: {', '.join(PLACEHOLDERS)}"
                )
    if data["name"] != path.stem:
        raise ProfileError(
            f"{_where(src, lines, ('name',))}: name: {data['name']!r} must equal the file stem "
            f"{path.stem!r}"
        )
    if "time_scale" in (data.get("capabilities") or []):
        raise ProfileError(
            f"{_where(src, lines, ('capabilities',))}: capabilities: a shipped agent cannot "
            "scale its waits; time_scale is not allowed"
        )
    inst = data["install"]
    return Profile(
        name=data["name"],
        source=src,
        npm=inst["npm"],
        bin=inst["bin"],
        extra=list(inst.get("extra") or []),
        chmod_x=list(inst.get("chmod_x") or []),
        command=list(data["command"]),
        env=dict(data.get("env") or {}),
        files=list(data.get("files") or []),
        capabilities=list(data.get("capabilities") or []),
        output=data.get("output", "text"),
        description=data.get("description", ""),
        telemetry=data.get("telemetry", ""),
        dialect=data.get("dialect", "openai_chat"),
        min_deadline_s=float(data.get("min_deadline_s", 0.0)),
    )


def render(template: Any, values: dict[str, str]) -> Any:
    """Replace known {placeholders} in every string of `template` (other braces untouched)."""
    if isinstance(template, str):
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), template)
    if isinstance(template, dict):
        return {render(k, values): render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    return template


# -- output parsers ----------------------------------------------------------------------


def _json_values(stdout: str) -> list[Any]:
    """Every JSON value in stdout: one document, or one per line (non-JSON lines skipped)."""
    text = stdout.strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


# An HTTP status the agent itself printed names the error's type; without one the error stays
# untyped (kind ``agent_exit``): the agent's prose is never read for meaning.
_STATUS_KINDS = {
    400: "bad_request",
    401: "auth",
    402: "billing",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "prompt_too_long",
    429: "rate_limit",
    529: "overloaded",
}
_PRINTED_STATUS = re.compile(r"\bAPI Error: (\d{3})\b")


def error_event(message: str, status: int | None = None) -> dict:
    """An ``error`` event; typed only from a status the agent printed (field or API Error: N)."""
    if status is None:
        m = _PRINTED_STATUS.search(message)
        status = int(m.group(1)) if m else None
    kind = "agent_exit"
    if isinstance(status, int):
        kind = _STATUS_KINDS.get(status) or ("server" if status >= 500 else "agent_exit")
    ev: dict = {"type": "error", "kind": kind, "message": message[:2000]}
    if isinstance(status, int):
        ev["status"] = status
    return ev


def _parse_qwen(stdout: str) -> list[dict]:
    """Qwen Code ``-o json``: a JSON array of stream messages (assistant / result)."""
    events: list[dict] = []
    msgs: list[Any] = []
    for v in _json_values(stdout):
        msgs.extend(v if isinstance(v, list) else [v])
    n = 0
    for m in msgs:
        if not isinstance(m, dict):
            continue
        if m.get("type") == "assistant":
            content = (m.get("message") or {}).get("content") or []
            text = "".join(
                c.get("text", "")
                for c in content
                if isinstance(c, dict) and c.get("type") == "text"
            )
            calls = [
                {
                    "id": str(c.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(c.get("name", "")),
                        "arguments": json.dumps(c.get("input", {})),
                    },
                }
                for c in content
                if isinstance(c, dict) and c.get("type") == "tool_use"
            ]
            events.append(
                {
                    "type": "message",
                    "id": f"a{n}",
                    "role": "assistant",
                    "text": text,
                    "tool_calls": calls,
                }
            )
            n += 1
        elif m.get("type") == "result" and m.get("is_error"):
            err = m.get("error") or {}
            msg = err.get("message") if isinstance(err, dict) else str(err)
            events.append(error_event(str(msg or m.get("result"))))
    return events


def _parse_opencode(stdout: str) -> list[dict]:
    """opencode ``run --format json``: one event per line (text parts, tool uses, errors)."""
    events: list[dict] = []
    texts: dict[str, str] = {}
    order: list[str] = []
    calls: list[dict] = []
    for v in _json_values(stdout):
        if not isinstance(v, dict):
            continue
        part = v.get("part") or {}
        if v.get("type") == "text" and isinstance(part, dict):
            mid = str(part.get("messageID") or part.get("id") or len(order))
            if mid not in texts:
                order.append(mid)
                texts[mid] = ""
            texts[mid] += str(part.get("text") or "")
        elif v.get("type") == "tool_use" and isinstance(part, dict):
            state = part.get("state") or {}
            calls.append(
                {
                    "id": str(part.get("callID", "")),
                    "type": "function",
                    "function": {
                        "name": str(part.get("tool", "")),
                        "arguments": json.dumps(state.get("input", {})),
                    },
                }
            )
        elif v.get("type") == "error":
            err = v.get("error") or {}
            data = err.get("data") if isinstance(err, dict) else None
            msg = (data or {}).get("message") if isinstance(data, dict) else None
            code = (data or {}).get("statusCode") if isinstance(data, dict) else None
            events.append(
                error_event(str(msg or err or v), code if isinstance(code, int) else None)
            )
    msgs = [
        {"type": "message", "id": mid, "role": "assistant", "text": texts[mid], "tool_calls": []}
        for mid in order
    ]
    if calls:
        if not msgs:
            msgs.append({"type": "message", "id": "a0", "role": "assistant", "text": ""})
        msgs[0]["tool_calls"] = calls
    return msgs + events


def parse_output(kind: str, stdout: str) -> list[dict]:
    """Map an agent's stdout to protocol events (no hello/turn_end; the adapter adds those)."""
    if kind == "text":
        text = stdout.strip()
        return (
            [{"type": "message", "id": "a0", "role": "assistant", "text": text, "tool_calls": []}]
            if text
            else []
        )
    if kind == "qwen-json":
        return _parse_qwen(stdout)
    if kind == "opencode-json":
        return _parse_opencode(stdout)
    if kind in ("claude-stream-json", "codex-json"):
        from conformance.adapters import shipped_parsers

        return shipped_parsers.parse(kind, stdout)
    raise ValueError(f"unknown output parser {kind!r}; known: {', '.join(PARSERS)}")


# -- the adapter -------------------------------------------------------------------------


def _drain(pipe, sink: bytearray, cap: int) -> None:
    try:
        while True:
            chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
            if not chunk:
                return
            room = cap - len(sink)
            if room > 0:
                sink += chunk[:room]
    except (OSError, ValueError):
        return


class ShippedAdapter:
    """Run an agent's own headless CLI per its profile; see the module docstring."""

    def __init__(
        self,
        profile: str | Path | Profile,
        *,
        use_netns: bool | None = None,
        bin_path: str | None = None,
    ) -> None:
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.name = f"shipped:{self.profile.name}"
        self.use_netns = use_netns
        self._bin = bin_path  # tests point this at a fake agent
        self.last_outside_attempts: list[dict] = []
        self.last_guard: dict[str, Any] = {}
        self.last_pgid: int | None = None
        self.outside_attempts: list[dict] = []  # every attempt of this adapter's lifetime
        self._lock = threading.Lock()

    def capabilities(self) -> set[str]:
        caps = set(self.profile.capabilities)
        if self.profile.dialect != "openai_chat":
            # The runner serves a run in dialect D only to agents declaring dialect:D.
            caps.add(f"dialect:{self.profile.dialect}")
        return caps

    def _resolve_bin(self) -> str:
        if self._bin:
            return self._bin
        path = self.profile.bin_path
        if not path.exists():
            raise FileNotFoundError(
                f"{self.name}: {self.profile.npm} is not installed at {path}; run "
                f"`python scripts/install_agents.py {self.profile.name}`"
            )
        return str(path)

    def _values(self, req: RunRequest, home: Path, config_home: Path, binp: str) -> dict:
        return {
            "prompt": str(req.start.get("prompt", "")),
            "base_url": req.base_url,
            "model": str(req.start.get("model", "conformance-model")),
            "api_key": req.api_key,
            "home": str(home),
            "config_home": str(config_home),
            "workdir": str(req.workdir),
            "install": str(self.profile.install_dir),
            "bin": binp,
            "ca_file": req.ca_file or "",
            # Agents that append /v1/... themselves (Claude Code) take the session root.
            "base_url_root": _strip_v1(req.base_url),
        }

    def _write_files(self, values: dict, roots: dict[str, Path]) -> None:
        for spec in self.profile.files:
            root = roots[spec["root"]]
            target = (root / render(spec["path"], values)).resolve()
            if not target.is_relative_to(root.resolve()):
                raise ValueError(f"{self.profile.source}: file {spec['path']!r} leaves its root")
            target.parent.mkdir(parents=True, exist_ok=True)
            if "json" in spec:
                target.write_text(json.dumps(render(spec["json"], values), indent=2), "utf-8")
            elif "text" in spec:
                target.write_text(render(spec["text"], values), "utf-8")
            else:
                target.symlink_to(render(spec["link"], values))

    def run(self, req: RunRequest) -> RunOutcome:
        key = req.api_key
        with self._lock:
            self.last_outside_attempts, self.last_guard = [], {}
        hello = {
            "type": "hello",
            "agent": self.profile.package,
            "version": self.profile.version,
            "capabilities": sorted(self.capabilities()),
            "t_ns": time.monotonic_ns(),
        }
        events: list[dict] = [hello]
        asked = str(req.start.get("dialect") or "openai_chat")
        if asked != self.profile.dialect:
            # The agent speaks one wire API whatever we ask: judging it as another would mislead.
            return RunOutcome(
                "unsupported",
                events,
                hello,
                "",
                f"{self.name} speaks {self.profile.dialect} only; this run asks for {asked} "
                f"(run it with --dialect {self.profile.dialect})",
            )
        try:
            binp = self._resolve_bin()
        except FileNotFoundError as exc:
            return RunOutcome("error", events, hello, "", str(exc))
        with tempfile.TemporaryDirectory(prefix="shipped-home-") as tmp:
            home = Path(tmp) / "home"
            config_home = home / ".config"
            config_home.mkdir(parents=True)
            values = self._values(req, home, config_home, binp)
            try:
                self._write_files(
                    values, {"home": home, "config_home": config_home, "workdir": req.workdir}
                )
            except (OSError, ValueError) as exc:
                return RunOutcome("error", events, hello, "", redact(str(exc), key))
            env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
            env.update(
                HOME=str(home),
                XDG_CONFIG_HOME=str(config_home),
                XDG_DATA_HOME=str(home / ".local" / "share"),
                XDG_CACHE_HOME=str(home / ".cache"),
                XDG_STATE_HOME=str(home / ".local" / "state"),
                TMPDIR=str(Path(tmp)),
            )
            if req.ca_file:
                env.update(SSL_CERT_FILE=req.ca_file, NODE_EXTRA_CA_CERTS=req.ca_file)
            env.update(render(self.profile.env, values))
            argv = render(self.profile.command, values)
            return self._run(req, argv, env, events, hello)

    def _run(self, req, argv, env, events, hello) -> RunOutcome:
        key = req.api_key
        port = _port_of(req.base_url)
        guard = LoopbackGuard(use_netns=self.use_netns, forward_ports=(port,) if port else ())
        out, err = bytearray(), bytearray()
        status, error = "error", None
        began = time.monotonic()
        try:
            try:
                gp = guard.popen(
                    argv,
                    env=env,
                    cwd=str(req.workdir),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except (OSError, RuntimeError) as exc:
                return RunOutcome(
                    "error", events, hello, "", redact(f"cannot start {argv[0]!r}: {exc}", key)
                )
            proc = gp.proc
            self.last_pgid = proc.pid
            readers = [
                threading.Thread(
                    target=_drain, args=(proc.stdout, out, 10 * _MAX_LOG), daemon=True
                ),
                threading.Thread(target=_drain, args=(proc.stderr, err, _MAX_LOG), daemon=True),
            ]
            for t in readers:
                t.start()
            try:
                limit = max(req.deadline_s, self.profile.min_deadline_s)
                rc = _wait(proc, req, limit)
            finally:
                # Also on Ctrl-C / SIGTERM: no agent (nor its children) outlives the run.
                kill_group(proc)
            elapsed = time.monotonic() - began
            for t in readers:
                t.join(2)
            stdout = out.decode("utf-8", errors="replace")
            if rc is None:
                status = "timeout"
                error = f"the agent did not exit within {limit:g} s (process group killed)"
                # What it printed before the kill stays in the results (no turn_end: it never
                # ended its turn).
                try:
                    for e in parse_output(self.profile.output, stdout):
                        e["t_ns"] = time.monotonic_ns()
                        events.append(e)
                except ValueError:
                    pass
            else:
                parsed = parse_output(self.profile.output, stdout)
                for e in parsed:
                    e["t_ns"] = time.monotonic_ns()
                events.extend(parsed)
                if rc != 0:
                    if not any(e["type"] == "error" for e in parsed):
                        tail = err.decode("utf-8", errors="replace").strip().splitlines()[-3:]
                        ev = error_event(" | ".join(tail) or f"exit status {rc}")
                        ev["t_ns"] = time.monotonic_ns()
                        events.append(ev)
                    events.append(
                        {"type": "turn_end", "reason": "error", "t_ns": time.monotonic_ns()}
                    )
                else:
                    events.append(
                        {"type": "turn_end", "reason": "completed", "t_ns": time.monotonic_ns()}
                    )
                status = "ran"
            attempts = guard.attempts()
            guard_info = {"netns": gp.netns, "note": gp.netns_note}
        finally:
            guard.close()
        with self._lock:
            self.last_outside_attempts = attempts
            self.last_guard = guard_info
            self.outside_attempts.extend(attempts)
        log = (
            f"[shipped] {self.name} {self.profile.version}; guard: {guard_info['note']}; "
            f"exit {rc if rc is not None else 'killed'} after {elapsed:.1f} s\n"
            f"[shipped] outside attempts: {json.dumps(attempts)}\n"
            "--- stdout ---\n"
            + stdout[:_MAX_LOG]
            + "\n--- stderr ---\n"
            + err.decode("utf-8", errors="replace")
        )
        return RunOutcome(
            status=status,
            events=events,
            hello=hello,
            log=log,
            error=redact(error, key) if error else None,
        )


def _strip_v1(base_url: str) -> str:
    """The base URL without its trailing ``/v1`` (the gateway session's root)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _port_of(base_url: str) -> int | None:
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.hostname not in ("127.0.0.1", "localhost"):
        return None
    return parts.port or (443 if parts.scheme == "https" else 80)


def _wait(proc: subprocess.Popen, req: RunRequest, limit: float | None = None) -> int | None:
    """The exit status, or None once the run's wall-clock deadline has passed."""
    deadline = time.monotonic() + (req.deadline_s if limit is None else limit)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            return proc.wait(timeout=min(0.05, remaining))
        except subprocess.TimeoutExpired:
            continue


@cache
def _installed(name: str) -> bool:  # pragma: no cover - convenience for tests/docs
    try:
        return load_profile(name).bin_path.exists()
    except ProfileError:
        return False


def which_profiles() -> list[str]:
    """Names of the bundled profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
