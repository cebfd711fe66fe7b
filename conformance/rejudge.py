"""``conformance rejudge``: the verdicts of a results file derived again from its saved evidence.

Theory of operation: every scenario entry of a results file (``conformance.run.record``) keeps
the scenario as it was loaded, the journal, the agent's events, log and debug files (the API key
redacted), how the turn ended and what the timing checks judged with, with the sha256 of all of
that. Re-judging an entry checks the digest first (an entry whose evidence was changed after the
run is reported, not judged), then runs the gate and the judge of the installed catalogue on it,
exactly as the run did, with the entry's key marker (``[REDACTED:<digest>]``, what the run's key
became in the saved record) as the secret DBG-02 looks for. A scenario rerun by
``--verify`` is settled again from its re-judged runs.

Under the release that judged the file, every verdict comes out as it was: a verdict that does
not is one that does not follow from its evidence. Under another release, the verdicts that
moved are listed with the rule changes released in between that name their criterion
(``conformance.release``).

What cannot be re-derived: an entry written before evidence was kept (no ``scenario``), and
the wording of a DBG-02 finding that locates a leaked key (its character offsets are those of
the marker, not of the key); the verdict itself is re-derived.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.adapters.interface import AgentTraits
from conformance.bundle import MANIFEST as BUNDLE_MANIFEST
from conformance.bundle import RESULTS as BUNDLE_RESULTS
from conformance.errors import ConformanceError
from conformance.release import CATALOGUE_VERSION, Change, changes_between, rules_sha256
from conformance.repeat import combine
from conformance.results import Run, ScenarioEntry, ScenarioVerdict
from conformance.run.gate import admit
from conformance.run.judge import evidence_of, judge
from conformance.run.record import drive_of, evidence_digest
from conformance.runner import agent_results, scenario_verdicts
from conformance.verify import confirmed, verified
from fakes import FakesError, Scenario

__all__ = ["Moved", "Rejudged", "RejudgeError", "load_results", "rejudge"]


class RejudgeError(ConformanceError):
    """A results file or bundle that cannot be read: names the file and what is wrong."""


@dataclass(frozen=True)
class Moved:
    """A verdict that came out differently when re-judged."""

    agent: str
    scenario: str
    criterion: str
    before: str
    after: str
    changes: tuple[tuple[str, Change], ...] = ()  # the released rule changes naming it


@dataclass
class Rejudged:
    document: dict[str, Any]  # the results, every verdict re-derived
    judged_by: str | None  # the release that judged the file (None: before releases)
    moved: list[Moved] = field(default_factory=list)
    tampered: list[tuple[str, str, str]] = field(default_factory=list)  # agent, scenario, why
    unjudged: list[tuple[str, str, str]] = field(default_factory=list)  # agent, scenario, why
    entries: int = 0

    @property
    def same_rules(self) -> bool:
        return self.judged_by == CATALOGUE_VERSION


def load_results(path: Path) -> dict[str, Any]:
    """A results document from a JSON file or a certificate bundle (``--bundle``)."""
    try:
        if zipfile.is_zipfile(path):
            return _from_bundle(path)
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RejudgeError(f"{path}: cannot read results: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != "conformance-results":
        raise RejudgeError(
            f"{path}: not a conformance results file (no format: conformance-results)"
        )
    return data


def _from_bundle(path: Path) -> dict[str, Any]:
    import hashlib

    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        if BUNDLE_RESULTS not in names or BUNDLE_MANIFEST not in names:
            raise RejudgeError(f"{path}: a bundle holds {BUNDLE_RESULTS} and {BUNDLE_MANIFEST}")
        raw = z.read(BUNDLE_RESULTS)
        manifest = json.loads(z.read(BUNDLE_MANIFEST))
    if hashlib.sha256(raw).hexdigest() != manifest.get("results_sha256"):
        raise RejudgeError(f"{path}: {BUNDLE_RESULTS} does not match the sha256 its manifest gives")
    data = json.load(io.BytesIO(raw))
    if not isinstance(data, dict):
        raise RejudgeError(f"{path}: {BUNDLE_RESULTS} is not a results document")
    return data


def _traits(agent: Mapping[str, Any]) -> AgentTraits:
    """What the gate knew of the agent, as its results entry saved it (``runner.agent_results``)."""
    saved = agent.get("traits") or {}
    return AgentTraits(
        takes_history=bool(saved.get("takes_history", True)),
        config_ignored=frozenset(saved.get("config_ignored") or ()),
    )


def _verdicts_of(
    entry: ScenarioEntry, agent: Mapping[str, Any], run: Mapping[str, Any]
) -> dict[str, ScenarioVerdict]:
    """One saved run of a scenario, judged again (module doc)."""
    scenario = Scenario.from_dict(entry["scenario"], source=str(entry.get("file") or entry["id"]))
    admission = admit(
        scenario,
        set(agent.get("capabilities") or ()),
        _traits(agent),
        dialect=str(run.get("dialect") or "openai_chat"),
        tool_transport=str(run.get("tool_transport") or "http"),
    )
    drive, allowances = drive_of(entry)
    secrets = (drive.api_key,) if drive.api_key else ()
    ev = evidence_of(scenario, admission, drive, allowances, secrets)
    return scenario_verdicts(judge(scenario, admission, drive, ev), scenario.id, drive.api_key)


def _settled(
    entry: ScenarioEntry, agent: Mapping[str, Any], run: Mapping[str, Any]
) -> dict[str, ScenarioVerdict]:
    """The verdicts of a saved scenario entry, settled as the run settled them: each run of
    ``--repeat`` settled on its own, then joined (``conformance.repeat``)."""
    repeats = entry.get("repeats")
    if not repeats:
        return _settled_run(entry, agent, run)
    alone = entry.copy()
    del alone["repeats"]
    runs = [alone, *repeats]
    return combine([(r, _settled_run(r, agent, run)) for r in runs])[1]


def _settled_run(
    entry: ScenarioEntry, agent: Mapping[str, Any], run: Mapping[str, Any]
) -> dict[str, ScenarioVerdict]:
    """The verdicts of one saved run, settled as the run settled them: a failed timing verdict
    confirmed on a slower clock (the entry is the confirming run, ``first_run`` or
    ``fast_clock_run`` the first), then the reruns of ``--verify``."""
    current: Run = (entry, _verdicts_of(entry, agent, run))
    first = entry.get("first_run") or entry.get("fast_clock_run")
    if first is not None:
        tried = entry.get("alone_run")
        alone = None if tried is None else (tried, _verdicts_of(tried, agent, run))
        current = confirmed((first, _verdicts_of(first, agent, run)), current, alone)
    reruns = list(entry.get("reruns") or [])
    if not reruns:
        return current[1]
    again: Iterator[Run] = ((r, _verdicts_of(r, agent, run)) for r in reruns)
    return verified(current, lambda: next(again), len(reruns))[1]


def _check(entry: Mapping[str, Any]) -> str | None:
    """Why an entry cannot be re-judged (None: it can); the runs kept inside it (the first run
    of a confirmed verdict, the reruns of ``--verify``) are checked too."""
    if "scenario" not in entry or "evidence_sha256" not in entry:
        return "written before evidence was kept for re-judging (no saved scenario)"
    first = entry.get("first_run") or entry.get("fast_clock_run") or {}
    inner = [
        entry.get("first_run"),
        entry.get("fast_clock_run"),
        entry.get("alone_run"),
        entry.get("beside_run"),
        first.get("beside_run"),  # a run beside the others that failed too, kept in the first
        *(entry.get("reruns") or []),
        *(entry.get("repeats") or []),
    ]
    for i, run in enumerate([entry, *(r for r in inner if r)]):
        if evidence_digest(run) != run.get("evidence_sha256"):
            which = "its evidence" if i == 0 else "the evidence of a run kept in it"
            return f"{which} does not match its evidence_sha256 (changed after the run)"
    return None


def rejudge(doc: dict[str, Any]) -> Rejudged:
    """Every verdict of ``doc`` derived again from its evidence (module doc)."""
    run = doc.get("run") or {}
    judged_by = run.get("catalogue_version")
    out = Rejudged(document={}, judged_by=judged_by)
    agents = []
    for agent in doc.get("agents") or []:
        name = str(agent.get("name"))
        old = _old_verdicts(agent)
        runs: list[Run] = []
        # Read as the shape the run wrote (conformance.results); _check and the judge say
        # where a saved entry falls short of it.
        saved: list[ScenarioEntry] = agent.get("scenarios") or []
        for entry in saved:
            out.entries += 1
            why = _check(entry)
            try:
                verdicts = _settled(entry, agent, run) if why is None else None
            except (FakesError, KeyError, TypeError, ValueError) as exc:
                why, verdicts = f"cannot be re-judged: {exc}", None
            if verdicts is None:
                tampered = "does not match" in (why or "")
                (out.tampered if tampered else out.unjudged).append((name, entry["id"], why or ""))
                verdicts = old.get(entry["id"], {})
            else:
                out.moved += _moved(
                    name, entry["id"], old.get(entry["id"], {}), verdicts, judged_by
                )
            runs.append((entry, verdicts))
        rebuilt = agent_results(
            name,
            str(agent.get("adapter") or name),
            agent.get("capabilities") or (),
            runs,
            traits=_traits(agent),
        )
        agents.append(rebuilt)
    out.document = {
        **doc,
        "run": {
            **run,
            "catalogue_version": CATALOGUE_VERSION,
            "catalogue_sha256": rules_sha256(),
            "rejudged": {
                "from_catalogue_version": judged_by,
                "moved": len(out.moved),
                # The release the agent ran under, kept through a re-judging of re-judged results.
                "ran_with_catalogue_version": (run.get("rejudged") or {}).get(
                    "ran_with_catalogue_version", judged_by
                ),
            },
        },
        "agents": agents,
    }
    return out


def _old_verdicts(agent: Mapping[str, Any]) -> dict[str, dict[str, ScenarioVerdict]]:
    """{scenario id: {criterion: verdict entry}} as the file has them."""
    old: dict[str, dict[str, ScenarioVerdict]] = {}
    for cid, res in (agent.get("criteria") or {}).items():
        for v in res.get("scenarios") or []:
            old.setdefault(str(v.get("id")), {})[cid] = v
    return old


def _moved(
    agent: str,
    sid: str,
    before: Mapping[str, Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    judged_by: str | None,
) -> list[Moved]:
    out = []
    for cid in sorted(set(before) | set(after)):
        b = (before.get(cid) or {}).get("verdict", "-")
        a = (after.get(cid) or {}).get("verdict", "-")
        if a != b:
            changes: tuple[tuple[str, Change], ...] = ()
            try:
                released = changes_between(judged_by) if judged_by else []
            except ValueError:  # not a release version: no changes to name
                released = []
            changes = tuple((v, c) for v, c in released if not c.criteria or cid in c.criteria)
            out.append(Moved(agent, sid, cid, b, a, changes))
    return out


def _describe(r: Rejudged, path: Path) -> list[str]:
    by = r.judged_by or "no release (written before releases)"
    lines = [
        f"{path}: {r.entries} scenario entries re-judged; judged by catalogue {by}, "
        f"re-judged by {CATALOGUE_VERSION} (rules sha256 {rules_sha256()[:12]})"
    ]
    if r.judged_by and r.judged_by != CATALOGUE_VERSION:
        lines.append(
            f"  the rules differ ({r.judged_by} -> {CATALOGUE_VERSION}): moved verdicts are "
            "those rule changes' doing"
        )
    if not r.moved:
        lines.append("  every verdict re-derived equal to the file's")
    for m in r.moved:
        line = f"  moved: {m.agent} {m.scenario} {m.criterion}: {m.before} -> {m.after}"
        for version, change in m.changes:
            line += f"\n    {version}: {change.what}"
        lines.append(line)
    for agent, sid, why in r.tampered:
        lines.append(f"  evidence changed: {agent} {sid}: {why}")
    for agent, sid, why in r.unjudged:
        lines.append(f"  not re-judged: {agent} {sid}: {why}")
    return lines


def main(words: list[str]) -> int:
    """``conformance rejudge RESULTS... [--out FILE]``: exit 0 when every entry's evidence
    matched its digest and, under the release that judged it, every verdict came out equal; 1
    otherwise; 2 for a file that cannot be read."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="conformance rejudge",
        description="Derive every verdict of saved results (a results JSON file or a "
        "certificate bundle from `conformance run --bundle`) again from their evidence, with "
        "the installed catalogue, running no agent. Reports evidence that does not match its "
        "sha256, and the verdicts that moved (with the rule change that moved them when the "
        "catalogue release differs).",
        epilog="exit status: 0 every verdict follows from its evidence (or moved only by a "
        "newer release's rules); 1 changed evidence, or a verdict that does not follow from its "
        "evidence under the rules that judged it; 2 a file that cannot be read.",
    )
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULTS")
    parser.add_argument(
        "--out", type=Path, help="write the re-judged results here (one input file only)"
    )
    args = parser.parse_args(words)
    if args.out is not None and len(args.results) != 1:
        parser.error("--out takes one RESULTS file")
    failed = False
    for path in args.results:
        try:
            doc = load_results(path)
        except RejudgeError as exc:
            print(f"conformance rejudge: {exc}", file=sys.stderr)
            return 2
        r = rejudge(doc)
        print("\n".join(_describe(r, path)))
        failed |= bool(r.tampered) or (r.same_rules and bool(r.moved))
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(r.document, ensure_ascii=False, indent=1), "utf-8")
            print(f"wrote {args.out}")
    return 1 if failed else 0
