"""The results document's declared shape (contracts §4), for the code that writes and reads it:
the runner and the session write it, the expectations, ``rejudge`` and the certificate read it.

These are TypedDicts, so the document stays plain JSON (the report, which imports nothing of
ours, validates the same shape with ``reports/schemas/results.schema.json``). Keys marked
``NotRequired`` are absent in documents written before them, or only present when they apply.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from conformance.verdicts import Verdict

__all__ = [
    "AgentResults",
    "CriterionResult",
    "ResultsDocument",
    "Run",
    "RunInfo",
    "ScenarioEntry",
    "ScenarioVerdict",
]


class RepeatInfo(TypedDict):
    runs: int
    passed: int
    verdicts: list[Verdict]
    passing_run: int | None
    failing_run: int | None
    worst: Verdict


class ScenarioVerdict(TypedDict):
    """One scenario's verdict for one criterion."""

    id: str
    verdict: Verdict
    expected: str | None
    observed: str | None
    partial: NotRequired[bool]  # judged on the wire before the turn ended
    beyond_load: NotRequired[bool]  # a timing failure no load explains: not confirmed
    flaky: NotRequired[bool]  # --verify: its runs differed
    runs: NotRequired[list[dict[str, Any]]]
    confirmed: NotRequired[dict[str, Any]]  # a timing failure re-run on a slower clock
    fast_clock: NotRequired[dict[str, Any]]
    repeat: NotRequired[RepeatInfo]  # UNSTABLE: how the runs of --repeat went


class ScenarioEntry(TypedDict):
    """One scenario run: its evidence (redacted) and what the judge used (conformance.run)."""

    id: str
    file: str
    status: str
    duration_s: float
    rerun: str
    scenario: dict[str, Any]
    error: str | None
    crashed: bool
    journal: dict[str, Any]
    events: list[dict[str, Any]]
    agent_log: str
    debug_files: dict[str, str]
    debug_format: NotRequired[str]  # the agent's own files, read in this format (contracts §4)
    judged_with: dict[str, Any]
    evidence_sha256: str
    waits: NotRequired[list[dict[str, Any]]]
    clock: NotRequired[dict[str, Any]]
    reaction: NotRequired[dict[str, Any]]
    outside_attempts: NotRequired[list[dict[str, Any]]]
    # False: a confirming run that asked for the machine alone and ran beside the run's others.
    alone: NotRequired[bool]
    first_run: NotRequired[ScenarioEntry]
    fast_clock_run: NotRequired[ScenarioEntry]
    # A run alone on the first run's clock that failed too, before the slower clock confirmed.
    alone_run: NotRequired[ScenarioEntry]
    # True: a run made at once beside the run's other runs after the first failed on a wait
    # the load may have made late (conformance.verify.beside).
    beside: NotRequired[bool]
    # That run, when it failed too: kept, the confirmations with the machine alone decided.
    beside_run: NotRequired[ScenarioEntry]
    reruns: NotRequired[list[ScenarioEntry]]
    repeats: NotRequired[list[ScenarioEntry]]


class CriterionResult(TypedDict):
    verdict: Verdict
    scenarios: list[ScenarioVerdict]
    flaky: NotRequired[bool]


class AgentResults(TypedDict):
    name: str
    adapter: str
    version: str | None
    capabilities: list[str]
    traits: dict[str, Any]
    criteria: dict[str, CriterionResult]
    scenarios: list[ScenarioEntry]


class RunInfo(TypedDict):
    started: str
    finished: str | None
    time_scale: float | None
    interrupted: bool
    command: str | None
    harness_version: str | None
    catalogue_version: NotRequired[str | None]
    catalogue_sha256: NotRequired[str | None]
    dialect: str
    tool_transport: str
    repeat: NotRequired[int]
    timing: NotRequired[dict[str, Any]]
    shard: NotRequired[dict[str, Any]]
    shards: NotRequired[dict[str, Any]]
    rejudged: NotRequired[dict[str, Any]]


class ResultsDocument(TypedDict):
    format: str
    version: int
    run: RunInfo
    catalogue: list[dict[str, Any]]
    agents: list[AgentResults]


# One run of one scenario: its entry and each criterion's verdict (``runner.run_scenario``).
Run = tuple[ScenarioEntry, dict[str, ScenarioVerdict]]
