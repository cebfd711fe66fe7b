"""The gate: whether an agent is run on a scenario, and if not, why. Pure: nothing runs.

A scenario needs the capabilities it lists, the run's dialect (``dialect:<name>`` unless it is
chat completions) and, over ``--tool-transport mcp``, ``mcp_tools``; an agent whose adapter says
it cannot be given a history (a CLI run as it ships) is not run on a scenario with one. Config a
scenario sets that the agent cannot be given makes only the criteria that read it UNSUPPORTED,
so it does not stop the run: :class:`Admission` carries it for the judge.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.adapters.interface import AgentTraits
from fakes import Scenario
from fakes.dialects import NAMES

__all__ = ["DEFAULT_DIALECT", "HISTORY", "MCP_TOOLS", "TOOL_TRANSPORTS", "Admission", "admit"]

DEFAULT_DIALECT = "openai_chat"
TOOL_TRANSPORTS = ("http", "mcp")
MCP_TOOLS = "mcp_tools"  # the capability of an agent that takes its hosted tools from MCP
HISTORY = "history"  # what a scenario with a history needs of an agent that says it cannot take one


def dialect_capability(dialect: str) -> str | None:
    """The capability an agent declares to be run in ``dialect`` (None: every agent speaks it)."""
    if dialect not in NAMES:
        raise ValueError(f"unknown dialect {dialect!r}; known: {', '.join(NAMES)}")
    return None if dialect == DEFAULT_DIALECT else f"dialect:{dialect}"


@dataclass(frozen=True)
class Admission:
    """The gate's word on one (agent, scenario) pair in one run."""

    dialect: str
    tool_transport: str
    capabilities: frozenset[str]  # the agent's, as this run counts them
    missing: tuple[str, ...]  # what the scenario needs and the agent does not have, sorted
    speaks: str | None  # the dialect's capability (None: chat completions)
    no_history: bool  # the scenario has a history the agent cannot be given
    ignored: frozenset[str]  # config keys the scenario sets that the agent cannot be given

    @property
    def runs(self) -> bool:
        return not self.missing

    def reason(self) -> str:
        """Why the scenario is not run, in the words the results give ("" when it runs)."""
        if self.runs:
            return ""
        why = f"needs {', '.join(self.missing)}"
        if self.speaks in self.missing:
            why += (
                f" (the agent does not declare {self.speaks}, so it is not run in the "
                f"{self.dialect} dialect)"
            )
        elif MCP_TOOLS in self.missing and self.tool_transport != "mcp":
            why += " (the run's tools go over http: --tool-transport mcp runs them over MCP)"
        elif self.no_history:
            why += (
                " (the agent cannot be given the scenario's history: it starts a new conversation)"
            )
        return why


def admit(
    scenario: Scenario,
    capabilities: set[str] | frozenset[str],
    traits: AgentTraits,
    *,
    dialect: str = DEFAULT_DIALECT,
    tool_transport: str = "http",
) -> Admission:
    """Whether an agent with ``capabilities`` and ``traits`` runs ``scenario`` (module doc)."""
    if tool_transport not in TOOL_TRANSPORTS:
        raise ValueError(f"unknown tool transport {tool_transport!r}; known: http, mcp")
    caps = set(capabilities)
    if tool_transport != "mcp":
        caps.discard(MCP_TOOLS)  # its tools do not go over MCP in this run
    needed = set(scenario.capabilities)
    speaks = dialect_capability(dialect)
    if speaks is not None:
        needed.add(speaks)
    if tool_transport == "mcp":
        needed.add(MCP_TOOLS)
    missing = sorted(needed - caps)
    # A scenario's history the agent cannot be given (a CLI run as it ships starts a new
    # conversation): judging it would judge a setup it never had.
    no_history = bool(scenario.history) and not traits.takes_history
    if no_history:
        missing.append(HISTORY)
    set_keys = {k for k, v in scenario.config.items() if v is not None}
    return Admission(
        dialect=dialect,
        tool_transport=tool_transport,
        capabilities=frozenset(caps),
        missing=tuple(missing),
        speaks=speaks,
        no_history=no_history,
        ignored=frozenset(set_keys & traits.config_ignored),
    )
