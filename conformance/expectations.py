"""Expectations: a vendor's file of known verdicts, so that a CI gate fails only on regressions.

The file is YAML, a list of entries::

    - criterion: RTY-03
      verdict: FAIL
      reason: "backoff lands in 2.4 (ticket 123)"
    - criterion: DBG-01
      verdict: UNSUPPORTED
      agent: cmd:./my-agent      # optional: only for this agent (default: every agent)
    - criterion: RTY-05
      verdict: PASS
      flaky: true                # optional: a verdict --verify found flaky gates on its best run
    - criterion: STR-07
      verdict: UNSTABLE          # the runs of --repeat N disagreed...
      rate: 0.67                 # ...and at least this share of them must still pass

Theory of operation: a criterion the file does not name is expected to be fine, so any failing
verdict for it (FAIL, ERROR, TIMEOUT; NON-STRICT too with ``strict``) is a regression. A named
criterion's observed verdict is a regression only when it is failing and worse than the expected
one in the severity order ERROR > TIMEOUT > FAIL > NON-STRICT > PASS > INFORMATIONAL >
UNSUPPORTED; a better verdict than expected is reported as fixed and does not fail the gate.
A criterion marked ``flaky: true`` whose verdict differed between the runs of ``--verify``
(``conformance.verify``) is judged by the best of its runs instead. An UNSTABLE verdict
(``--repeat``: conformance.repeat) is failing like FAIL unless the file expects UNSTABLE; with
a ``rate``, it is a regression when fewer of its runs passed than that share.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.catalogue import CATALOGUE
from conformance.errors import ConformanceError
from conformance.release import CATALOGUE_VERSION
from conformance.repeat import rate_of
from conformance.verdicts import VERDICTS, aggregate

# What got worse for a CI gate: a run that broke or hung is worse than a known failure. (A
# criterion's aggregate over scenarios uses another order, conformance.verdicts.SEVERITY, in
# which a failure the wire shows is never hidden behind a TIMEOUT.)
GATE_ORDER = (
    "ERROR", "TIMEOUT", "FAIL", "UNSTABLE", "NON-STRICT", "PASS", "INFORMATIONAL", "UNSUPPORTED"
)  # fmt: skip

__all__ = [
    "Comparison",
    "Expectation",
    "ExpectationsError",
    "Expectations",
    "Finding",
    "best_run",
    "failing_verdicts",
    "flaky_best",
    "load_expectations",
    "compare_results",
    "updated_expectations",
    "write_expectations",
]

_KEYS = ("criterion", "verdict", "reason", "agent", "flaky", "rate")


class ExpectationsError(ConformanceError, ValueError):
    """A bad expectations file; the message names the file and line."""


@dataclass(frozen=True)
class Expectation:
    criterion: str
    verdict: str
    reason: str = ""
    agent: str | None = None  # None: every agent
    line: int = 0  # where the entry starts in its file (1-based), 0 when built in code
    flaky: bool = False  # a flaky verdict (--verify) gates on its best run
    # For an UNSTABLE verdict (--repeat): the share of runs that must still pass (0..1).
    rate: float | None = None


@dataclass(frozen=True)
class Finding:
    """One criterion whose observed verdict differs from what the gate expected."""

    agent: str
    criterion: str
    verdict: str  # observed
    expected: str | None  # the expected verdict, None when the file does not name it
    reason: str = ""
    scenario: str | None = None  # set when the comparison is per scenario
    file: str = ""  # the expectations file judged against; "" when there is none

    def describe(self) -> str:
        where = f" in {self.scenario}" if self.scenario else ""
        said = f"{self.criterion}{where} [{self.agent}]: {self.verdict}"
        if self.expected is None:
            # Nothing expected it: with no file at all, a first run, there is nothing to add.
            return said + (f"; not expected by {self.file}" if self.file else "")
        why = f" ({self.reason})" if self.reason else ""
        return f"{said}, expected {self.expected}{why}"


@dataclass
class Comparison:
    regressions: list[Finding]  # these fail the gate
    fixed: list[Finding]  # better than expected: reported, never failing
    expected_failures: list[Finding]  # failing verdicts the file expects


def failing_verdicts(strict: bool = False) -> frozenset[str]:
    """The verdicts that fail a run when nothing expects them."""
    return frozenset(
        {"FAIL", "ERROR", "TIMEOUT", "UNSTABLE"} | ({"NON-STRICT"} if strict else set())
    )


class Expectations:
    """A loaded expectations file (possibly empty); look up by (agent, criterion)."""

    def __init__(
        self,
        entries: Iterable[Expectation] = (),
        source: str = "",
        catalogue_version: str | None = None,
    ) -> None:
        self.entries = list(entries)
        self.source = source
        # The catalogue release whose verdicts the file records (its header comment says so;
        # None for a file written before releases, or by hand without it).
        self.catalogue_version = catalogue_version

    def release_warning(self, installed: str) -> str | None:
        """A warning when the file records another release's verdicts than ``installed``."""
        if not self.source or self.catalogue_version == installed:
            return None
        was = self.catalogue_version or "no release (written before releases)"
        return (
            f"{self.source}: its verdicts were recorded under catalogue {was}; this run is "
            f"judged by {installed}: a verdict may differ by the rules alone (CHANGELOG.md; "
            "--update-expectations records this release)"
        )

    def lookup(self, agent: str, criterion: str) -> Expectation | None:
        """The entry for this agent, else the entry for every agent, else None."""
        general = None
        for e in self.entries:
            if e.criterion != criterion:
                continue
            if e.agent == agent:
                return e
            if e.agent is None:
                general = e
        return general

    def judge(
        self,
        agent: str,
        criterion: str,
        verdict: str,
        *,
        strict: bool = False,
        flaky_best: str | None = None,
        rate: float | None = None,
    ) -> tuple[str, Finding]:
        """Classify one observed verdict: ``regression``, ``fixed``, ``expected`` or ``ok``.
        ``flaky_best``: for a verdict that differed between runs, the best of them, which an
        entry marked flaky judges instead. ``rate``: for an UNSTABLE verdict, the share of runs
        that passed; below the entry's ``rate`` it is a regression."""
        exp = self.lookup(agent, criterion)
        if exp is not None and verdict == exp.verdict == "UNSTABLE" and exp.rate is not None:
            finding = Finding(agent, criterion, verdict, exp.verdict, exp.reason)
            if rate is not None and rate + 1e-9 < exp.rate:
                return "regression", dataclasses.replace(
                    finding,
                    reason=f"{rate:.0%} of runs passed, the expectations allow no less than "
                    f"{exp.rate:.0%}" + (f" ({exp.reason})" if exp.reason else ""),
                )
            return "expected", finding
        if exp is not None and exp.flaky and flaky_best is not None:
            verdict = flaky_best
        finding = Finding(
            agent,
            criterion,
            verdict,
            exp.verdict if exp else None,
            exp.reason if exp else "",
            file=self.source,
        )
        failing = failing_verdicts(strict)
        if exp is None:
            return ("regression" if verdict in failing else "ok"), finding
        worse = GATE_ORDER.index(verdict) < GATE_ORDER.index(exp.verdict)
        if verdict in failing and worse:
            return "regression", finding
        if verdict == exp.verdict:
            return ("expected" if verdict in failing else "ok"), finding
        if not worse and exp.verdict in failing | {"NON-STRICT"}:
            return "fixed", finding
        return ("expected" if verdict in failing else "ok"), finding


def _where(path: str, line: int) -> str:
    return f"{path}:{line}" if line else path


# The header line naming the catalogue release whose verdicts a written file records.
_RELEASE_MARK = "# catalogue: "


def _release_of(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(_RELEASE_MARK):
            return line[len(_RELEASE_MARK) :].strip() or None
        if line and not line.startswith("#"):
            break
    return None


def _compose(p: Path) -> tuple[str, yaml.Node | None]:
    """The file's text and its YAML node tree; ExpectationsError naming file:line."""
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExpectationsError(f"{p}: cannot read the expectations file: {exc}") from exc
    try:
        return text, yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ExpectationsError(
            f"{_where(str(p), mark.line + 1 if mark else 0)}: not valid YAML: {exc}"
        ) from exc


def _entry(data: dict[str, Any], where: str, line: int) -> Expectation:
    """One entry's mapping, checked key by key (``where``: file:line, for the messages)."""
    for name in data:
        if name not in _KEYS:
            raise ExpectationsError(f"{where}: unknown key {name!r}; allowed: {', '.join(_KEYS)}")
    cid, verdict = data.get("criterion"), data.get("verdict")
    if not isinstance(cid, str) or not cid:
        raise ExpectationsError(f"{where}: 'criterion' is required (a criterion ID)")
    if cid not in {c.id for c in CATALOGUE}:
        raise ExpectationsError(
            f"{where}: unknown criterion ID {cid!r}; `conformance list` shows them"
        )
    if verdict not in VERDICTS:
        raise ExpectationsError(
            f"{where}: {cid}: unknown verdict {verdict!r}; expected one of " + ", ".join(VERDICTS)
        )
    reason, agent = data.get("reason") or "", data.get("agent")
    flaky, rate = data.get("flaky", False), data.get("rate")
    if rate is not None and (
        verdict != "UNSTABLE" or not isinstance(rate, (int, float)) or not 0 <= rate <= 1
    ):
        raise ExpectationsError(
            f"{where}: {cid}: 'rate' is for an UNSTABLE verdict: the share of runs (0 to 1) "
            "that must still pass"
        )
    if not isinstance(reason, str):
        raise ExpectationsError(f"{where}: {cid}: 'reason' must be text")
    if not isinstance(flaky, bool):
        raise ExpectationsError(f"{where}: {cid}: 'flaky' must be true or false")
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise ExpectationsError(f"{where}: {cid}: 'agent' must be an agent name")
    return Expectation(
        cid, verdict, reason, agent, line, flaky, None if rate is None else float(rate)
    )


def load_expectations(path: str | os.PathLike[str]) -> Expectations:
    """Load and validate an expectations file; raise ExpectationsError naming file:line."""
    p = Path(path)
    text, node = _compose(p)
    release = _release_of(text)
    if node is None:
        return Expectations([], str(p), release)  # an empty file expects nothing
    if not isinstance(node, yaml.SequenceNode):
        raise ExpectationsError(
            f"{_where(str(p), node.start_mark.line + 1)}: an expectations file is a YAML list "
            "of entries like '- {criterion: RTY-03, verdict: FAIL, reason: ...}'"
        )
    entries: list[Expectation] = []
    seen: dict[tuple[str, str | None], int] = {}
    for item in node.value:
        line = item.start_mark.line + 1
        where = _where(str(p), line)
        if not isinstance(item, yaml.MappingNode):
            raise ExpectationsError(
                f"{where}: each entry is a mapping with criterion, verdict and reason"
            )
        e = _entry(yaml.safe_load(yaml.serialize(item)), where, line)
        key = (e.criterion, e.agent)
        if key in seen:
            raise ExpectationsError(
                f"{where}: {e.criterion} is already expected at line {seen[key]}"
                + (f" for agent {e.agent!r}" if e.agent else "")
            )
        seen[key] = line
        entries.append(e)
    return Expectations(entries, str(p), release)


def compare_results(
    doc: Mapping[str, Any], expectations: Expectations | None = None, *, strict: bool = False
) -> Comparison:
    """Compare each agent's aggregate verdict per criterion with the expectations."""
    expectations = expectations or Expectations()
    out = Comparison([], [], [])
    for agent in doc.get("agents", []):
        for cid, res in sorted(agent["criteria"].items()):
            kind, finding = expectations.judge(
                agent["name"],
                cid,
                res["verdict"],
                strict=strict,
                flaky_best=flaky_best(res),
                rate=unstable_rate(res),
            )
            if kind == "regression":
                out.regressions.append(finding)
            elif kind == "fixed":
                out.fixed.append(finding)
            elif kind == "expected":
                out.expected_failures.append(finding)
    return out


def best_run(verdict: Mapping[str, Any]) -> str | None:
    """The best verdict among the runs of one scenario's flaky verdict entry, else None."""
    runs = verdict.get("runs") if verdict.get("flaky") else None
    if not runs:
        return None
    best: str = max((r["verdict"] for r in runs), key=GATE_ORDER.index)
    return best


def unstable_rate(result: Mapping[str, Any]) -> float | None:
    """For an UNSTABLE criterion result (``--repeat``): the lowest pass rate of its UNSTABLE
    scenario verdicts; else None."""
    rates = [r for v in result.get("scenarios") or [] if (r := rate_of(v)) is not None]
    return min(rates) if rates and result.get("verdict") == "UNSTABLE" else None


def flaky_best(result: Mapping[str, Any]) -> str | None:
    """For a criterion result (contracts §4) with a flaky scenario verdict: its aggregate with
    each flaky scenario taken at its best run; else None."""
    if not result.get("flaky"):
        return None
    return aggregate([best_run(v) or v["verdict"] for v in result.get("scenarios") or []])


def updated_expectations(
    doc: Mapping[str, Any], old: Expectations | None = None, *, strict: bool = False
) -> Expectations:
    """The expectations that make ``doc`` pass, keeping existing reasons.

    Criteria this run judged get an entry when their verdict is failing (or NON-STRICT) or
    flaky, or was marked flaky, and lose it otherwise; entries for criteria or agents the run did
    not cover are kept as they were.
    """
    old = old or Expectations()
    agents = list(doc.get("agents", []))
    names = {a["name"] for a in agents}
    judged = {(a["name"], cid) for a in agents for cid in a["criteria"]}

    def covered(e: Expectation) -> bool:
        if e.agent is None:
            return any((n, e.criterion) in judged for n in names)
        return (e.agent, e.criterion) in judged

    kept = [e for e in old.entries if not covered(e)]
    recorded = failing_verdicts(strict) | {"NON-STRICT"}
    new: list[Expectation] = []
    for agent in agents:
        for cid, res in sorted(agent["criteria"].items()):
            verdict = res["verdict"]
            prev = old.lookup(agent["name"], cid)
            # A flaky mark, found now or before, is kept whatever the verdict.
            flaky = bool(res.get("flaky")) or bool(prev and prev.flaky)
            if verdict not in recorded and not flaky:
                continue
            reason = prev.reason if prev and prev.reason else "recorded by --update-expectations"
            # An entry for every agent stays one when the run had a single agent.
            target = prev.agent if prev else (agent["name"] if len(agents) > 1 else None)
            if any(e.criterion == cid and e.agent == target for e in new):
                continue  # one general entry already covers it (several agents, same verdict)
            rate = unstable_rate(res)
            new.append(
                Expectation(
                    cid,
                    verdict,
                    reason,
                    target,
                    flaky=flaky,
                    rate=None if rate is None else round(rate, 3),
                )
            )
    order = {c.id: i for i, c in enumerate(CATALOGUE)}
    merged = sorted(kept + new, key=lambda e: (order.get(e.criterion, 1 << 30), e.agent or ""))
    return Expectations(merged, old.source, CATALOGUE_VERSION)


def write_expectations(path: str | os.PathLike[str], expectations: Expectations) -> None:
    """Write the file atomically: a header comment, then one entry per expected verdict."""
    lines = [
        "# Conformance expectations: verdicts this agent is known to get, and why.",
        "# A CI gate fails only on verdicts worse than these (`conformance run --expectations`).",
        "# Regenerate with `conformance run --update-expectations`; reasons are kept.",
    ]
    if expectations.catalogue_version:
        lines.append(f"{_RELEASE_MARK}{expectations.catalogue_version}")
    if not expectations.entries:
        lines.append("[]")
    for e in expectations.entries:
        entry: dict[str, Any] = {"criterion": e.criterion, "verdict": e.verdict}
        entry["reason"] = e.reason
        if e.agent is not None:
            entry["agent"] = e.agent
        if e.flaky:
            entry["flaky"] = True
        if e.rate is not None:
            entry["rate"] = e.rate
        dumped = yaml.safe_dump(
            [entry], allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
        )
        lines.append(dumped.rstrip("\n"))
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(p)
