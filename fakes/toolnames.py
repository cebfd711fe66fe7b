"""Agent-neutral tool names: a scripted tool call named as the agent offers that tool.

A scenario names its tools once (``write_file``); an agent that takes them from the MCP tool
host offers them under names of its own, the server's name joined on (``mcp__<server>__write_file``
in Claude Code, ``<server>__write_file`` elsewhere). A scripted call keeps its name when the
request offers it; else it takes the one offered name that ends with ``__<name>``; else (none,
or more than one) it keeps its name, and the agent meets a tool it did not offer. A name offered
only inside a Responses ``namespace`` tool (Codex offers MCP tools so) keeps its name, and the
call names that namespace (``namespace``), as the agent routes it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fakes.scenario import Step

__all__ = ["offered_names", "agent_name", "namespaces", "with_agent_names"]


def offered_names(body: Any) -> list[str]:
    """The tool names a request offers, in any dialect (``name`` or ``function.name``)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    names: list[str] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function")
        name = t.get("name") or (fn.get("name") if isinstance(fn, dict) else None)
        if isinstance(name, str):
            names.append(name)
    return names


def agent_name(scripted: str, offered: list[str]) -> str:
    """``scripted`` as the agent offers it (module docstring)."""
    if scripted in offered:
        return scripted
    joined = [n for n in offered if n.endswith("__" + scripted)]
    return joined[0] if len(joined) == 1 else scripted


def namespaces(body: Any) -> dict[str, str]:
    """{tool name: namespace} of the tools a request offers inside ``namespace`` tools."""
    tools = body.get("tools") if isinstance(body, dict) else None
    out: dict[str, str] = {}
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict) and t.get("type") == "namespace" and isinstance(t.get("name"), str):
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    out.setdefault(inner["name"], t["name"])
    return out


def with_agent_names(step: Step, body: Any) -> Step:
    """``step`` whose reply's tool calls carry the names the request ``body`` offers (the same
    step when none changes)."""
    calls = (step.reply or {}).get("tool_calls")
    if not calls:
        return step
    offered = offered_names(body)
    spaces = namespaces(body)
    named: list[dict[str, Any]] = []
    for c in calls:
        name = c.get("name")
        if not isinstance(name, str):
            named.append(c)
        elif name not in offered and name in spaces:
            named.append({**c, "namespace": spaces[name]})
        else:
            named.append({**c, "name": agent_name(name, offered)})
    if named == calls:
        return step
    return dataclasses.replace(step, reply={**(step.reply or {}), "tool_calls": named})
