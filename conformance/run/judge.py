"""The judge: a drive's record and the gate's word to each criterion's verdict. Pure.

Each criterion of a scenario (its own and the invariants judged on every run) goes down
:data:`LADDER`, an ordered table of rules like the reference core's transition table: the first
rule whose condition holds gives the verdict, with what was expected and what was observed. Only
the last rule runs the criterion's check on the evidence; the ones above it say why a check
would judge something the agent was never asked, never given, or never finished.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conformance.catalogue import Criterion, by_id
from conformance.checks import FINAL_ON_PARTIAL, INVARIANTS, run_check
from conformance.judging.evidence import Evidence
from conformance.judging.timing import DEFAULT_TIMING, Timing
from conformance.run.drive import Drive
from conformance.run.gate import MCP_TOOLS, Admission
from conformance.verdicts import Verdict, verdict_for
from fakes import Scenario

__all__ = [
    "CRASH_CRITERION",
    "LADDER",
    "Allowances",
    "Case",
    "Rule",
    "Ruling",
    "criteria_of",
    "evidence_of",
    "judge",
]

# "Never crash": an agent that exits, or dies of a signal, on its own before its turn ended
# fails it (``RunOutcome.crashed``); every other criterion of that run is an ERROR.
CRASH_CRITERION = "ERR-05"


@dataclass(frozen=True)
class Allowances:
    """What timing checks judge with beyond the record: the machine's allowances measured at
    the run's start (``conformance.judging.timing``) and the agent's own time per wait (mean and
    spread, real seconds: ``conformance.calibration``)."""

    timing: Timing = DEFAULT_TIMING
    overhead_s: float = 0.0
    overhead_spread_s: float = 0.0


@dataclass(frozen=True)
class Case:
    """One criterion of one scenario run, as the ladder's rules read it."""

    cid: str
    crit: Criterion
    scenario: Scenario
    admission: Admission
    drive: Drive
    evidence: Evidence

    @property
    def untold(self) -> list[str]:
        """Config keys this criterion reads that the scenario sets and the agent cannot be
        given."""
        return sorted(set(self.crit.config_keys) & self.admission.ignored)

    @property
    def undeclared(self) -> bool:
        """The criterion's own capability is one the agent does not declare."""
        return (
            bool(self.crit.capability) and self.crit.capability not in self.admission.capabilities
        )


@dataclass(frozen=True)
class Ruling:
    verdict: Verdict
    expected: str
    observed: str
    partial: bool = False  # judged on the wire before the turn ended (TIMEOUT/ERROR)
    beyond_load: bool = False  # a timing failure no load explains (checks.finding.Finding)


@dataclass(frozen=True)
class Rule:
    name: str
    applies: Callable[[Case], bool]
    rule: Callable[[Case], Ruling]


def _mcp_note(c: Case, needs: tuple[str | None, ...]) -> str:
    if MCP_TOOLS in needs and c.admission.tool_transport != "mcp":
        return "the run's tools go over http, not MCP (--tool-transport mcp)"
    return "not declared by the agent"


def _dialect(c: Case) -> Ruling:
    a = c.admission
    return Ruling(
        "UNSUPPORTED",
        f"capability {a.speaks}",
        f"not declared by the agent: it is not run in the {a.dialect} dialect",
    )


def _untold(c: Case) -> Ruling:
    keys = ", ".join(c.untold)
    return Ruling(
        "UNSUPPORTED",
        f"an agent that can be given {keys}",
        f"the agent cannot be given config {keys} (its profile says so)",
    )


def _history(c: Case) -> Ruling:
    return Ruling(
        "UNSUPPORTED",
        "an agent that can be given the scenario's history",
        "the agent cannot be given a history: it starts a new conversation",
    )


def _undeclared(c: Case) -> Ruling:
    cap = c.crit.capability
    return Ruling("UNSUPPORTED", f"capability {cap}", _mcp_note(c, (cap,)))


def _scenario_needs(c: Case) -> Ruling:
    """The scenario needs what the agent lacks: name exactly that, not this criterion's own
    capability (which the agent may well declare)."""
    missing = c.admission.missing
    return Ruling("UNSUPPORTED", f"capability {', '.join(missing)}", _mcp_note(c, missing))


def _agent_declined(c: Case) -> Ruling:
    said = f": {c.drive.error}" if c.drive.error else ""
    return Ruling(
        "UNSUPPORTED",
        "an agent that runs the scenario",
        f"the agent reported the scenario unsupported (exit 89){said}",
    )


def _elsewhere(c: Case) -> Ruling:
    return Ruling(
        "INFORMATIONAL",
        f"applies only in {', '.join(c.crit.dialects)}",
        f"not applicable in this dialect ({c.admission.dialect})",
    )


def _crashed(c: Case) -> Ruling:
    # The agent ended itself mid-turn: the crash ERR-05 forbids, not a broken run.
    return Ruling("FAIL", "the turn ends with turn_end, whatever fails", c.drive.error or "")


def _unfinished(c: Case) -> Ruling:
    """The turn never ended (TIMEOUT) or the run broke (ERROR). A check whose failure is final
    on partial evidence (``FINAL_ON_PARTIAL``: "never more than N", "never X") is run: a
    violation the wire already shows is a FAIL whatever came after. Anything else, a partial
    pass included, stays TIMEOUT/ERROR: the end was never seen."""
    status, error = c.drive.status, c.drive.error or ""
    unfinished = "the turn never ended" if status == "timeout" else "the run broke"
    if c.cid in FINAL_ON_PARTIAL:
        finding = run_check(c.cid, c.evidence)
        if finding.outcome == "fail":
            return Ruling(
                verdict_for(c.crit, finding),
                finding.expected,
                f"{finding.observed} [judged on the wire before {status.upper()}: {unfinished}"
                f"; {error}]",
                partial=True,
            )
    return Ruling("TIMEOUT" if status == "timeout" else "ERROR", "the agent ends its turn", error)


def _checked(c: Case) -> Ruling:
    finding = run_check(c.cid, c.evidence)
    return Ruling(
        verdict_for(c.crit, finding),
        finding.expected,
        finding.observed,
        beyond_load=finding.beyond_load and finding.outcome == "fail",
    )


LADDER: tuple[Rule, ...] = (
    Rule("dialect not spoken", lambda c: c.admission.speaks in c.admission.missing, _dialect),
    Rule("config the agent cannot be given", lambda c: bool(c.untold), _untold),
    Rule("history the agent cannot be given", lambda c: c.admission.no_history, _history),
    Rule("criterion's capability not declared", lambda c: c.undeclared, _undeclared),
    Rule(
        "scenario's capabilities not declared", lambda c: bool(c.admission.missing), _scenario_needs
    ),
    Rule(
        "the agent declined (exit 89)", lambda c: c.drive.status == "unsupported", _agent_declined
    ),
    Rule(
        "not applicable in the run's dialect",
        lambda c: bool(c.crit.dialects) and c.admission.dialect not in c.crit.dialects,
        _elsewhere,
    ),
    Rule(
        "the agent crashed",
        lambda c: c.drive.status == "error" and c.drive.crashed and c.cid == CRASH_CRITERION,
        _crashed,
    ),
    Rule("the turn did not end", lambda c: c.drive.status in ("error", "timeout"), _unfinished),
    Rule("judged on the evidence", lambda c: True, _checked),
)


def evidence_of(
    scenario: Scenario,
    admission: Admission,
    drive: Drive,
    allowances: Allowances,
    secrets: tuple[str, ...],
) -> Evidence:
    """The read model the checks judge. ``secrets``: what the agent was handed and must leak
    nowhere (the run's API key; ``[REDACTED]`` when re-judging a saved, redacted record)."""
    return Evidence(
        scenario=scenario.raw,
        raw_journal=drive.journal,
        events=drive.judged_events,
        time_scale=drive.time_scale,
        capabilities=set(admission.capabilities),
        debug_files=drive.debug_files,
        debug_format=drive.debug_format,
        secrets=secrets,
        agent_log=drive.agent_log,
        timing=allowances.timing,
        overhead_s=allowances.overhead_s,
        overhead_spread_s=allowances.overhead_spread_s,
        stopped_ns=drive.stopped_ns,
    )


def criteria_of(scenario: Scenario) -> list[str]:
    """The criteria a run of ``scenario`` is judged on: its own, then the invariants."""
    return list(dict.fromkeys([*scenario.criteria, *INVARIANTS]))


def judge(
    scenario: Scenario, admission: Admission, drive: Drive, evidence: Evidence
) -> dict[str, Ruling]:
    """Each criterion's ruling for one run (module doc), on ``evidence`` (``evidence_of``)."""
    rulings = {}
    for cid in criteria_of(scenario):
        case = Case(cid, by_id(cid), scenario, admission, drive, evidence)
        rule = next(r for r in LADDER if r.applies(case))
        rulings[cid] = rule.rule(case)
    return rulings
