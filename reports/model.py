"""The view model shared by the HTML, JUnit and Markdown renderers.

Several results documents (one per run, possibly one agent each) are merged into one
``Report``: the union of their catalogues (first definition of an ID wins) and the list of
all agents, each remembering the run it came from. Agent names are made unique.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reports.merge import merge_shards, missing_shards
from reports.verdicts import JUDGED, SEVERITY, VERDICTS, worst

__all__ = [
    "VERDICTS",
    "SEVERITY",
    "JUDGED",
    "AgentView",
    "Report",
    "build_report",
    "junit_classname",
    "worst",
]


@dataclass
class AgentView:
    """One agent of one run."""

    name: str
    data: dict[str, Any]
    run: dict[str, Any]
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)

    def verdict(self, cid: str) -> str | None:
        """The agent's aggregate verdict for criterion ``cid``, or None when not assessed."""
        res = self.data["criteria"].get(cid)
        return res["verdict"] if res else None

    def scenario_verdicts(self, cid: str) -> list[str]:
        """The verdicts criterion ``cid`` got in each scenario that judged it."""
        res = self.data["criteria"].get(cid) or {}
        return [s["verdict"] for s in res.get("scenarios") or []]

    def totals(self) -> dict[str, int]:
        """Count of criteria per verdict."""
        out = dict.fromkeys(VERDICTS, 0)
        for res in self.data["criteria"].values():
            out[res["verdict"]] += 1
        return out


@dataclass
class Report:
    """Everything the renderers need."""

    runs: list[dict[str, Any]]
    catalogue: list[dict[str, Any]]
    agents: list[AgentView]

    @property
    def interrupted(self) -> bool:
        """True when any merged run was interrupted."""
        return any(r.get("interrupted") for r in self.runs)

    def incomplete(self) -> list[tuple[AgentView, list[int], int]]:
        """Agents of sharded runs that lack parts: (agent, missing shard numbers, shard count)."""
        out = []
        for a in self.agents:
            missing = missing_shards(a.run)
            if missing:
                count = (a.run.get("shards") or a.run.get("shard") or {})["count"]
                out.append((a, missing, count))
        return out

    def areas(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Catalogue grouped by area, in catalogue order."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for c in self.catalogue:
            groups.setdefault(c["area"], []).append(c)
        return list(groups.items())

    def totals(self) -> dict[str, int]:
        """Count of (criterion, agent) verdicts per verdict, over all agents."""
        out = dict.fromkeys(VERDICTS, 0)
        for a in self.agents:
            for k, v in a.totals().items():
                out[k] += v
        return out

    def must_unsupported(self, agent: AgentView) -> list[str]:
        """IDs of MUST criteria the agent got UNSUPPORTED for."""
        return [
            c["id"]
            for c in self.catalogue
            if c["level"] == "MUST" and agent.verdict(c["id"]) == "UNSUPPORTED"
        ]

    def must_unjudged(self, agent: AgentView) -> list[str]:
        """IDs of MUST criteria that apply in the agent's dialect and that no scenario judged:
        not assessed at all, or only INFORMATIONAL (n/a), ERROR or TIMEOUT verdicts in every
        scenario. Such a criterion is not certified, whatever the other verdicts say."""
        return [
            c["id"]
            for c in self._must_uncertain(agent)
            if not any(v in JUDGED for v in agent.scenario_verdicts(c["id"]))
        ]

    def must_unsettled(self, agent: AgentView) -> list[str]:
        """IDs of MUST criteria that some scenario judged but whose verdict is ERROR or TIMEOUT
        (a PASS there, a turn that never ended elsewhere): not certified either, and not to be
        called judged by no scenario."""
        return [
            c["id"]
            for c in self._must_uncertain(agent)
            if any(v in JUDGED for v in agent.scenario_verdicts(c["id"]))
        ]

    def _must_uncertain(self, agent: AgentView) -> list[dict[str, Any]]:
        dialect = agent.run.get("dialect") or "openai_chat"
        return [
            c
            for c in self.catalogue
            if c["level"] == "MUST"
            and _applies(c, dialect)
            and agent.verdict(c["id"]) not in JUDGED + ("UNSUPPORTED",)
        ]


def _applies(criterion: dict[str, Any], dialect: str) -> bool:
    only = criterion.get("dialects")
    return not only or dialect in only


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "agent"


def build_report(results: Sequence[dict[str, Any]]) -> Report:
    """Merge validated results documents into one Report (the shards of a run into one run
    first: ``reports.merge``)."""
    results = merge_shards(results)
    catalogue: dict[str, dict[str, Any]] = {}
    agents: list[AgentView] = []
    seen: dict[str, int] = {}
    for doc in results:
        for c in doc["catalogue"]:
            catalogue.setdefault(c["id"], c)
        for a in doc["agents"]:
            name = a["name"]
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name}#{seen[name]}"
            view = AgentView(name=name, data=a, run=doc["run"])
            view.scenarios = {s["id"]: s for s in a["scenarios"]}
            agents.append(view)
    return Report(
        runs=[d["run"] for d in results], catalogue=list(catalogue.values()), agents=agents
    )


def junit_classname(agent: AgentView, area: str) -> str:
    """The JUnit classname ``<agent>.<area>``."""
    return f"{_slug(agent.name)}.{area}"
