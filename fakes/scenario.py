"""Load and validate scenario files (YAML) against ``scenarios/schema.json``.

Theory of operation: the YAML is composed into a node tree first so that every JSON path
(``("script", 2, "fault")``) maps to the line where it starts; jsonschema errors are then
reported at the line of the deepest path that has one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from fakes.errors import ScenarioError
from fakes.faults import API_KEY_PLACEHOLDER, FAULTS

__all__ = [
    "FAST_LOADER",
    "compose_yaml",
    "line_map",
    "Scenario",
    "Step",
    "load_scenario",
    "load_scenarios",
    "SCHEMA_PATH",
    "schema",
]

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "scenarios" / "schema.json"
_SCHEMA: dict[str, Any] | None = None

# Derived from the fault classes (``fakes.faults``): faults that only make sense on a stream
# (a `match: {stream: false}` step may not use them), and faults that change the rendered reply
# itself, meaningless on recorded bytes.
STREAM_ONLY = frozenset(name for name, f in FAULTS.items() if f.stream_only)
REPLAY_UNFIT = frozenset(name for name, f in FAULTS.items() if not f.replay_ok)

# ``Step.index`` of an explicit ``otherwise:`` step (it is no script step).
OTHERWISE_INDEX = -1


def schema() -> dict[str, Any]:
    """The scenario JSON Schema (cached)."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return _SCHEMA


@dataclass(frozen=True)
class Step:
    """One script step: serves ``times`` chat requests that ``match`` accepts."""

    index: int
    reply: dict[str, Any] | None
    fault: dict[str, Any] | None
    match: dict[str, Any] = field(default_factory=dict)
    times: int = 1
    replay: dict[str, Any] | None = None  # a recorded response, carried out byte for byte

    @property
    def fault_name(self) -> str | None:
        return next(iter(self.fault)) if self.fault else None

    @property
    def fault_params(self) -> dict[str, Any]:
        if not self.fault:
            return {}
        value = next(iter(self.fault.values()))
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Scenario:
    """A validated scenario (contracts §1); ``raw`` is the original mapping."""

    id: str
    criteria: list[str]
    prompt: str
    script: list[Step]
    raw: dict[str, Any]
    title: str = ""
    capabilities: list[str] = field(default_factory=list)
    deadline: float | None = None
    tls: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_host: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    mcp_faults: list[dict[str, Any]] = field(default_factory=list)  # fakes.mcp_faults
    abort: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    source: str = "<dict>"
    otherwise: Step | None = None  # the scenario's explicit ``otherwise:`` step
    refuse_connections: dict[str, Any] | None = None  # {seconds}: a refusing port first

    @property
    def fallback_step(self) -> Step | None:
        """What serves a request no script step serves: ``otherwise:``, else the last step
        with a fault (repeated, its ``match`` ignored), else None (a harness error)."""
        if self.otherwise is not None:
            return self.otherwise
        return next((st for st in reversed(self.script) if st.fault), None)

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "<dict>", lines: dict[tuple[Any, ...], int] | None = None
    ) -> Scenario:
        """Validate ``data`` and build a Scenario; raise ScenarioError naming what is wrong."""
        _validate(data, source, lines or {})
        steps = [
            Step(
                index=i,
                reply=s.get("reply"),
                fault=_norm_fault(s.get("fault")),
                match=s.get("match") or {},
                times=s.get("times", 1),
                replay=s.get("replay"),
            )
            for i, s in enumerate(data["script"])
        ]
        raw_other = data.get("otherwise")
        otherwise = None
        if raw_other is not None:
            otherwise = Step(
                index=OTHERWISE_INDEX,
                reply=raw_other.get("reply"),
                fault=_norm_fault(raw_other.get("fault")),
                replay=raw_other.get("replay"),
            )
        _check_rules(steps, otherwise, source, lines or {})
        return cls(
            id=data["id"],
            criteria=list(data["criteria"]),
            prompt=data["prompt"],
            script=steps,
            raw=data,
            title=data.get("title", ""),
            capabilities=list(data.get("capabilities", [])),
            deadline=data.get("deadline"),
            tls=bool(data.get("tls", False)),
            config=dict(data.get("config") or {}),
            tools=list(data.get("tools", [])),
            tool_host=dict(data.get("tool_host") or {}),
            mcp_faults=list(data.get("mcp_faults") or []),
            abort=data.get("abort"),
            history=list(data.get("history", [])),
            source=source,
            otherwise=otherwise,
            refuse_connections=data.get("refuse_connections"),
        )


def _check_rules(
    steps: list[Step], otherwise: Step | None, source: str, lines: dict[tuple[Any, ...], int]
) -> None:
    """The rules the schema cannot say, each reported at its step's line."""

    def fail(path: tuple[Any, ...], msg: str) -> ScenarioError:
        return ScenarioError(f"{_where(source, lines, path)}: {_fmt(path)}: {msg}")

    located: list[tuple[Step, tuple[Any, ...]]] = [(st, ("script", st.index)) for st in steps]
    if otherwise is not None:
        located.append((otherwise, ("otherwise",)))
    for st, where in located:
        path, name, p = (*where, "fault"), st.fault_name, st.fault_params
        if name in STREAM_ONLY and st.match.get("stream") is False:
            raise fail(path, f"{name!r} is a stream-only fault but the step matches stream: false")
        if name in REPLAY_UNFIT and st.replay is not None:
            raise fail(
                path, f"{name!r} rewrites a rendered reply and cannot apply to a replay step"
            )
        # `otherwise` serves both modes: without a reply, a non-streaming request would get an
        # empty success where the script meant a failure.
        if name in STREAM_ONLY and where == ("otherwise",) and not (st.reply or st.replay):
            raise fail(
                path,
                f"{name!r} is a stream-only fault and `otherwise` also serves non-streaming "
                "requests, which would get an empty reply: give it a `reply` (sent whole to them)",
            )
        echo_body = p.get("body") if name == "http_error" and p.get("echo_api_key") else None
        if echo_body is not None and API_KEY_PLACEHOLDER not in json.dumps(echo_body):
            raise fail(
                (*path, "http_error", "body"),
                f"echo_api_key needs {API_KEY_PLACEHOLDER} in the body, where the key goes",
            )


def _norm_fault(fault: dict[str, Any] | None) -> dict[str, Any] | None:
    if not fault:
        return None
    name, value = next(iter(fault.items()))
    return {name: value if isinstance(value, dict) else {}}


def _fmt(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def _where(source: str, lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> str:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return f"{source}:{lines[path[:n]]}"
    return source


def _validate(data: Any, source: str, lines: dict[tuple[Any, ...], int]) -> None:
    validator = jsonschema.Draft202012Validator(schema())
    err = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if err is None:
        return
    path = tuple(err.absolute_path)
    msg = err.message
    if err.validator == "additionalProperties":
        msg += f"; allowed: {', '.join(sorted(err.schema.get('properties', {})))}"
    raise ScenarioError(f"{_where(source, lines, path)}: {_fmt(path)}: {msg}")


def line_map(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    """Fill ``out`` with the 1-based line where each JSON path under ``node`` starts (the YAML
    files of scenarios and of agent profiles name lines in their errors)."""
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[path + (key,)] = k.start_mark.line + 1
            line_map(v, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            line_map(v, path + (i,), out)


# libyaml's parser where PyYAML was built with it: a whole suite's files parse some 14 times faster
# (each of a run's processes loads every scenario). Same documents, same marks for errors.
FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """Parse ``text`` once: its node tree (for :func:`line_map`) and the document built from it.
    Raises yaml.YAMLError."""
    node = yaml.compose(text, Loader=FAST_LOADER)
    if node is None:
        return None, None
    return node, yaml.SafeLoader("").construct_document(node)


def load_scenario(path: str | Path) -> Scenario:
    """Load one scenario YAML file; the id must equal the file stem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read: {e}") from e
    try:
        node, data = compose_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ScenarioError(f"{p}{line}: invalid YAML: {e}") from e
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        line_map(node, (), lines)
    sc = Scenario.from_dict(data, source=str(p), lines=lines)
    if sc.id != p.stem:
        raise ScenarioError(
            f"{_where(str(p), lines, ('id',))}: id: {sc.id!r} must equal the file stem {p.stem!r}"
        )
    return sc


def load_scenarios(path: str | Path) -> list[Scenario]:
    """Load a file, or every ``*.yaml`` under a directory (recursive, sorted)."""
    p = Path(path)
    if p.is_dir():
        return [load_scenario(f) for f in sorted(p.rglob("*.yaml"))]
    return [load_scenario(p)]
