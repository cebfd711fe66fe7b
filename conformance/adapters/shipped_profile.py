"""A shipped agent's profile: how to run its own headless mode, loaded and checked.

A profile (``conformance/profiles/<name>.yaml``) says how to install the agent (a pinned npm
package), the argv template, environment variables and configuration files to write, the
capabilities it can honestly declare, the features it has that a harness drives from outside
(``drive``: an abort signal, arguments, environment, files, each earning a capability), the
output parser for what it prints, the wire dialect it speaks, and how it is given a scenario's
history (``history``: a saved conversation it resumes, `conformance.adapters.shipped_history`).
`load_profile` validates it against `_SCHEMA` and names ``file:line`` in every error; `render`
fills the ``{placeholders}`` of a template with a run's values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from conformance.adapters.shipped_history import FORMATS
from conformance.adapters.shipped_parsers import PARSERS
from conformance.errors import ConformanceError
from fakes.dialects import NAMES
from fakes.scenario import line_map

__all__ = [
    "DEBUG_FORMATS",
    "DIALECTS",
    "DRIVABLE",
    "SIGNALS",
    "PLACEHOLDERS",
    "PROFILE_DIR",
    "Profile",
    "ProfileError",
    "agent_cache_dir",
    "load_profile",
    "render",
    "which_profiles",
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
    # Drives (see `drive` below): what the scenario's config asks, and where the hosted tools are.
    "fallback_model",
    "context_window",
    "tool_timeout_ms",
    "tool_timeout_s",
    "max_output_tokens",
    "tool_endpoint",
    "python",
    # The run's credential source (RTY-10): GET gives the key to use after an expired one.
    "credential_url",
    # The session's MCP tool host (`mcp` below): where the agent takes the hosted tools from.
    "mcp_endpoint",
    # The run's debug directory (start.debug_dir): what the agent writes there is collected as
    # its debug files (`drive.debug_dump`).
    "debug_dir",
    # A history resumed (`history` below): the saved conversation's id, and the working
    # directory as the history's format names it (Claude Code: a project folder's name); when
    # it was saved (UTC), as date folders YYYY/MM/DD and as YYYY-MM-DDThh-mm-ss (Codex names
    # its sessions so).
    "session_id",
    "workdir_key",
    "session_date",
    "session_time",
)
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ANY_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# The wire dialect an agent speaks (documentation, and which base URL form it takes).
DIALECTS = NAMES  # the registry's names (fakes.dialects)

# Signals an abort may be (sent to the agent's process group, as a terminal's Ctrl-C is).
SIGNALS = ("SIGINT", "SIGTERM", "SIGQUIT")
# Capabilities a profile can earn by driving one of the agent's features from outside.
DRIVABLE = (
    "abort",
    "fallback_model",
    "hooks",
    "compaction",
    "debug_dump",
    "stream_fallback_config",
    "credential_refresh",
)
# The formats of an agent's own debug files the judge has a reader for
# (conformance.judging.debug_formats); a profile's `drive.debug_dump.format` names one. Absent:
# the files are the harness's format (docs/contracts.md §5).
DEBUG_FORMATS = ("claude-code",)
_FILE: dict[str, Any] = {
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
}

_SCHEMA: dict[str, Any] = {
    "$defs": {
        # A feature driven by arguments, environment and files, added to every run, or only
        # to runs whose start config sets `when` (a key of `config`, to a value not null/false;
        # or {key: value}: that key equal to that value).
        "mapping": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "when": {
                    "oneOf": [
                        {"type": "string", "minLength": 1},
                        {"type": "object", "minProperties": 1, "maxProperties": 1},
                    ]
                },
                "args": {"type": "array", "items": {"type": "string"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "files": {"type": "array", "items": _FILE},
                "note": {"type": "string"},
            },
        },
        # The debug dump: a mapping as above, with the format of the files the agent writes
        # (DEBUG_FORMATS; absent: the harness's own, contracts §5) and the files it writes
        # elsewhere that are copied, byte for byte, into the run's debug directory after it
        # stops (`collect`: a glob under a root; never a file the harness wrote there).
        "debug_mapping": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "when": {"$ref": "#/$defs/mapping/properties/when"},
                "args": {"$ref": "#/$defs/mapping/properties/args"},
                "env": {"$ref": "#/$defs/mapping/properties/env"},
                "files": {"$ref": "#/$defs/mapping/properties/files"},
                "note": {"type": "string"},
                "format": {"type": "string", "minLength": 1},
                "collect": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["root", "glob"],
                        "additionalProperties": False,
                        "properties": {
                            "root": {"enum": ["home", "config_home", "workdir"]},
                            "glob": {"type": "string", "minLength": 1},
                        },
                    },
                },
            },
        },
    },
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
        "files": {"type": "array", "items": _FILE},
        "capabilities": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        # Keys of the scenario's `config` the agent cannot be given (no flag, setting or
        # variable carries them): a criterion judged against one of them is UNSUPPORTED.
        "config_ignored": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        # Keys of the scenario's `config` the agent is given through its own settings: each a
        # mapping (arguments, environment, files) added to a run whose config sets that key.
        "config_carried": {"type": "object", "additionalProperties": {"$ref": "#/$defs/mapping"}},
        # The agent's own features, driven from outside, each earning the capability it is
        # keyed by (DRIVABLE); see docs/agents/shipped.md.
        "drive": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "abort": {
                    "type": "object",
                    "required": ["signal"],
                    "additionalProperties": False,
                    "properties": {
                        "signal": {"enum": list(SIGNALS)},
                        "note": {"type": "string"},
                    },
                },
                **{
                    cap: {"$ref": "#/$defs/mapping"}
                    for cap in DRIVABLE
                    if cap not in ("abort", "debug_dump")
                },
                "debug_dump": {"$ref": "#/$defs/debug_mapping"},
            },
        },
        # How the agent takes the hosted tools from the session's MCP tool host: arguments,
        # environment and files added to every run whose scenario offers tools, earning
        # `capabilities` (what becomes observable once its tool calls reach the tool host).
        "mcp": {
            "type": "object",
            "required": ["capabilities"],
            "additionalProperties": False,
            "properties": {
                "capabilities": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string"},
                    "uniqueItems": True,
                },
                "args": {"type": "array", "items": {"type": "string"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "files": {"type": "array", "items": _FILE},
                "note": {"type": "string"},
            },
        },
        # How a scenario's history is given: written in the agent's own saved-conversation
        # format (`format`, shipped_history.FORMATS) at `path` under `root`, and resumed with
        # `args` (and `env`); absent: it starts a new conversation, and cannot be given one.
        # `capabilities`: what becomes observable once a history reaches the wire (`media`:
        # an image of the history is sent as the agent sends images).
        "history": {
            "type": "object",
            "required": ["format", "root", "path", "args"],
            "additionalProperties": False,
            "properties": {
                "format": {"enum": list(FORMATS)},
                "root": {"enum": ["home", "config_home", "workdir"]},
                "path": {"type": "string", "minLength": 1},
                "args": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "capabilities": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "note": {"type": "string"},
            },
        },
        "output": {"enum": list(PARSERS)},
        "telemetry": {"type": "string"},
        "dialect": {"enum": list(DIALECTS)},
        "min_deadline_s": {"type": "number", "minimum": 0},
        # Run the agent on a clock this many times as fast (conformance.adapters.warp); a list
        # is tried in order, the first the calibration accepts is used.
        "time_warp": {
            "oneOf": [
                {"type": "number", "minimum": 1},
                {"type": "array", "minItems": 1, "items": {"type": "number", "minimum": 1}},
            ]
        },
        # Its clock reads and sleeps are raw system calls (Bun's Zig code): the warp preloads
        # the harness's shim beside libfaketime (conformance/adapters/warp_shim.c).
        "time_warp_raw_clock": {"type": "boolean"},
    },
}


class ProfileError(ConformanceError, ValueError):
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
    # Speeds of the fast clock to try, in order (conformance.adapters.warp); empty: real time.
    time_warp: list[float] = field(default_factory=list)
    time_warp_raw_clock: bool = False  # the warp needs the raw-clock shim (warp.build_shim)
    # {capability: how the agent's own feature is driven} (schema: _SCHEMA "drive").
    drive: dict[str, dict[str, Any]] = field(default_factory=dict)
    # How the agent is pointed at the session's MCP tool host (schema: _SCHEMA "mcp"); {}: never.
    mcp: dict[str, Any] = field(default_factory=dict)
    # Scenario config keys it cannot be given (schema: _SCHEMA "config_ignored").
    config_ignored: list[str] = field(default_factory=list)
    # {config key: how the agent is given it} (schema: _SCHEMA "config_carried").
    config_carried: dict[str, dict[str, Any]] = field(default_factory=dict)
    # How a scenario's history is given, by resume (schema: _SCHEMA "history"); {}: it cannot be.
    history: dict[str, Any] = field(default_factory=dict)

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


def _where(source: str, lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> str:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return f"{source}:{lines[path[:n]]}"
    return source


def _strings(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
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
    path = _profile_path(spec)
    src = str(path)
    data, lines = _read_yaml(path)
    _check_schema(data, src, lines)
    _check_placeholders(data, src, lines)
    _check_fields(data, src, lines, path.stem)
    return _profile_of(data, src)


def _profile_path(spec: str | Path) -> Path:
    """The file of a profile named ``spec`` (a bare name: one of conformance/profiles/)."""
    path = Path(spec)
    if not path.suffix:
        path = PROFILE_DIR / f"{spec}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
            raise ProfileError(f"{path}: no such profile {str(spec)!r}; known: {known}")
    return path


def _read_yaml(path: Path) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """The profile's data and the line of each of its nodes (by path)."""
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
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        line_map(node, (), lines)
    return data, lines


def _check_schema(data: Any, src: str, lines: dict[tuple[Any, ...], int]) -> None:
    """The schema's error at the deepest place, if any."""
    err = min(
        Draft202012Validator(_SCHEMA).iter_errors(data),
        key=lambda e: (-len(e.absolute_path), str(e.message)),
        default=None,
    )
    if err is not None:
        p = tuple(err.absolute_path)
        field_name = ".".join(str(x) for x in p) or "(profile)"
        raise ProfileError(f"{_where(src, lines, p)}: {field_name}: {err.message}")


def _check_placeholders(data: dict[str, Any], src: str, lines: dict[tuple[Any, ...], int]) -> None:
    """Unknown placeholders are typos that would reach the agent verbatim: refuse them."""
    placed = ("command", "env", "files", "drive", "mcp", "config_carried", "history")
    for p, s in _strings({k: data.get(k) for k in placed}):
        for m in _ANY_PLACEHOLDER.finditer(s):
            if m.group(1) not in PLACEHOLDERS:
                raise ProfileError(
                    f"{_where(src, lines, p)}: {'.'.join(map(str, p))}: unknown placeholder "
                    f"{{{m.group(1)}}}; known: {', '.join(PLACEHOLDERS)}"
                )


def _check_fields(
    data: dict[str, Any], src: str, lines: dict[tuple[Any, ...], int], stem: str
) -> None:
    """What the schema cannot say: the name is the file's, no key both carried and ignored,
    no capability both declared and earned, and no time scaling."""
    if data["name"] != stem:
        raise ProfileError(
            f"{_where(src, lines, ('name',))}: name: {data['name']!r} must equal the file stem "
            f"{stem!r}"
        )
    both = set(data.get("config_ignored") or []) & set(data.get("config_carried") or {})
    if both:
        raise ProfileError(
            f"{_where(src, lines, ('config_carried',))}: config_carried: {sorted(both)} are "
            "named in config_ignored too"
        )
    declared = set(data.get("capabilities") or [])
    earned = (
        ("drive", set(data.get("drive") or {})),
        ("mcp", set((data.get("mcp") or {}).get("capabilities", []))),
        ("history", set((data.get("history") or {}).get("capabilities", []))),
    )
    for by, caps in earned:
        both = declared & caps
        if both:
            raise ProfileError(
                f"{_where(src, lines, ('capabilities',))}: capabilities: {sorted(both)} are "
                f"earned by `{by}`; do not declare them as well"
            )
    dump = (data.get("drive") or {}).get("debug_dump") or {}
    if "format" in dump and dump["format"] not in DEBUG_FORMATS:
        raise ProfileError(
            f"{_where(src, lines, ('drive', 'debug_dump', 'format'))}: drive.debug_dump.format: "
            f"unknown debug file format {dump['format']!r}; known: {', '.join(DEBUG_FORMATS)}"
        )
    for i, spec in enumerate(dump.get("collect") or []):
        glob = str(spec["glob"])
        if glob.startswith("/") or ".." in Path(glob).parts:
            raise ProfileError(
                f"{_where(src, lines, ('drive', 'debug_dump', 'collect', i))}: "
                f"drive.debug_dump.collect[{i}].glob: {glob!r} must stay under its root"
            )
    if "time_scale" in declared:
        raise ProfileError(
            f"{_where(src, lines, ('capabilities',))}: capabilities: a shipped agent cannot "
            "scale its waits; time_scale is not allowed"
        )


def _profile_of(data: dict[str, Any], src: str) -> Profile:
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
        time_warp=[float(x) for x in _as_list(data.get("time_warp"))],
        time_warp_raw_clock=bool(data.get("time_warp_raw_clock", False)),
        drive=dict(data.get("drive") or {}),
        mcp=dict(data.get("mcp") or {}),
        config_ignored=list(data.get("config_ignored") or []),
        config_carried=dict(data.get("config_carried") or {}),
        history=dict(data.get("history") or {}),
    )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def render(template: Any, values: dict[str, str]) -> Any:
    """Replace known {placeholders} in every string of `template` (other braces untouched)."""
    if isinstance(template, str):
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), template)
    if isinstance(template, dict):
        return {render(k, values): render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    return template


def which_profiles() -> list[str]:
    """Names of the bundled profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
