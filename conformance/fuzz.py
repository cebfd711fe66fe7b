"""Fault fuzzing: search fault schedules for one that breaks an agent, shrink it, save it.

Theory of operation: a *schedule* is an ordinary scenario (``docs/contracts.md`` §1) drawn by
Hypothesis from the fault vocabulary: which faults, in which order, how many times each, at
which event or byte, with which ``Retry-After``, optionally a user abort. It ends with a healthy
tail so that a correct agent can always finish. Each schedule runs through
:func:`conformance.runner.run_scenario`, exactly as ``conformance run`` would run it, and is
judged by :data:`FUZZ_CRITERIA`: the criteria whose checks hold for every correct agent under any
schedule (the turn ends; retry and continuation caps; tool-call pairing; nothing from a failed
attempt executed; no empty assistant message; nothing after an abort; no key leaked; a
healthy stream never resent, a re-chunked or paced one shown as it came). A FAIL,
ERROR or TIMEOUT on any of them is a finding. Hypothesis then shrinks the schedule; the minimal
one is written as a scenario file listing the broken criteria, so that
``conformance run --scenario FILE`` fails the same way. The file is run once more to confirm.

Runs are reproducible from ``--seed``; the Hypothesis example database is off unless
``--database DIR`` is given (a database replays earlier findings first, which is what a user
hunting one bug wants, and what a reproducible run does not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import FlakyFailure, FlakyReplay

from conformance.adapters.base import Adapter, make_adapter
from conformance.results import ScenarioVerdict
from conformance.runner import run_scenario
from fakes import Gateway, Scenario, SyncGateway, load_scenario
from fakes.faults import FAULTS

__all__ = ["FUZZ_CRITERIA", "FuzzReport", "schedules", "run_fuzz", "main"]

# Criteria whose checks must hold under any fault schedule (LOP-04 says so outright).
FUZZ_CRITERIA = (
    "LOP-04",
    "ERR-05",
    "RTY-04",
    "TRN-04",
    "STR-03",
    "TOL-06",
    "RSN-04",
    "CTL-01",
    "DBG-02",
    "STR-09",
)
BAD = {"FAIL", "ERROR", "TIMEOUT"}
DEFAULT_TIME_SCALE = 0.01
# Nominal seconds: ten 32 s backoffs and a few stalls fit; a hung agent is a TIMEOUT.
DEADLINE_S = 900

_TOOL = {
    "name": "write_file",
    "description": "Write a file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
}
_TEXT = "The answer, in a few words, is here."
_REASONING = "First think about the file, then write it."
_FINAL = {"times": 500, "reply": {"text": "Done.", "finish_reason": "stop"}}


@st.composite
def _reply(draw: st.DrawFn, step: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "tool", "reasoning"]))
    reply: dict[str, Any] = {"chunk_chars": draw(st.sampled_from([4, 8, 16]))}
    if kind == "reasoning":
        reply["reasoning"] = _REASONING
    if kind == "tool":
        args = json.dumps({"path": f"f{step}.txt", "content": "hi"})
        # Ids unique per step: a tool call seen on the wire belongs to exactly one reply.
        reply["tool_calls"] = [{"id": f"call_s{step}", "name": "write_file", "arguments": args}]
        reply["finish_reason"] = "tool_calls"
    else:
        reply["text"] = _TEXT
        reply["finish_reason"] = "stop"
    return reply


@st.composite
def _fault(
    draw: st.DrawFn, reply: dict[str, Any], faults: Sequence[str] | None = None
) -> dict[str, Any] | None:
    """No fault or one of ``faults`` (default: every registered one), its parameters drawn by
    its class."""
    name = draw(st.sampled_from(["none", *(FAULTS if faults is None else faults)]))
    if name == "none":
        return None
    return {name: FAULTS[name].draw_params(draw, reply)}


@st.composite
def schedules(
    draw: st.DrawFn, max_steps: int = 5, faults: Sequence[str] | None = None
) -> dict[str, Any]:
    """A scenario mapping: up to ``max_steps`` scripted steps, faults among them (drawn from
    ``faults``, default every registered one), healthy tail. A fixed ``faults`` keeps a seed's
    schedules the same when a primitive is added to the registry."""
    n = draw(st.integers(1, max_steps))
    script: list[dict[str, Any]] = []
    for i in range(n):
        reply = draw(_reply(i))
        fault = draw(_fault(reply, faults))
        step: dict[str, Any] = {"reply": reply}
        if fault is not None:
            step["fault"] = fault
            # A healthy tool reply served twice would run the same call id twice, legitimately.
            # A length fault up to 6 times: 5 truncations in a row reach the continuation cap
            # (TRN-04: one limit raise, 3 continuations, then an error).
            step["times"] = draw(st.integers(1, 6 if "length" in fault else 3))
        script.append(step)
    scenario: dict[str, Any] = {
        "id": "fuzz",
        "title": "A fault schedule drawn by conformance fuzz",
        "criteria": list(FUZZ_CRITERIA),
        "capabilities": ["tools"],
        "prompt": "Write the files you are asked for, then say Done.",
        "deadline": DEADLINE_S,
        "tools": [_TOOL],
        "tool_host": {"write_file": [{"output": "wrote 2 bytes"}]},
        "script": script,
    }
    if draw(st.booleans()) and draw(st.booleans()):
        # The abort strikes while the stream is held open, so it always lands mid-request.
        at = draw(st.integers(0, n))
        held = {
            "reply": {"text": _TEXT, "chunk_chars": 8},
            "fault": {"stall": {"after_events": 1, "seconds": 600}},
        }
        script.insert(at, held)
        scenario["abort"] = {"when_step": at}
        scenario["capabilities"].append("abort")
    script.append(dict(_FINAL))
    return scenario


@dataclass
class Finding:
    """A schedule that broke criteria, as shrunk by Hypothesis."""

    scenario: dict[str, Any]
    broken: dict[str, ScenarioVerdict]  # criterion id -> scenario verdict entry
    path: Path | None = None
    reproduced: bool | None = None


@dataclass
class FuzzReport:
    schedules: int = 0
    elapsed_s: float = 0.0
    finding: Finding | None = None
    notes: list[str] = field(default_factory=list)
    found_after: int | None = None  # schedules run up to and including the first finding

    @property
    def rate(self) -> float:
        return self.schedules / self.elapsed_s if self.elapsed_s else 0.0


def _broken(verdicts: dict[str, ScenarioVerdict]) -> dict[str, ScenarioVerdict]:
    return {c: v for c, v in verdicts.items() if c in FUZZ_CRITERIA and v["verdict"] in BAD}


def _save(finding: Finding, out_dir: Path, seed_value: int) -> Path:
    sc = dict(finding.scenario)
    digest = hashlib.sha256(json.dumps(sc, sort_keys=True).encode()).hexdigest()[:8]
    first = sorted(finding.broken)[0].lower()
    sc["id"] = f"fuzz-{first}-{digest}"
    sc["title"] = f"Found by conformance fuzz (seed {seed_value}): breaks " + ", ".join(
        sorted(finding.broken)
    )
    # The broken criteria first, so the file says what it reproduces.
    sc["criteria"] = [
        *sorted(finding.broken),
        *(c for c in FUZZ_CRITERIA if c not in finding.broken),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{sc['id']}.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(sc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    tmp.replace(path)
    return path


def run_fuzz(
    gateway: SyncGateway,
    adapter: Adapter,
    *,
    budget: int = 200,
    seed_value: int = 0,
    out_dir: Path | None = None,
    database: Path | None = None,
    time_scale: float = DEFAULT_TIME_SCALE,
    shrink_time_s: float = 120.0,
    progress: Callable[[str], None] | None = None,
    faults: Sequence[str] | None = None,
) -> FuzzReport:
    """Fuzz ``adapter`` with up to ``budget`` schedules; shrink and save the first finding.
    ``faults``: the primitives drawn from (default: every registered one)."""
    unknown = sorted(set(faults or ()) - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown fault primitive(s) {unknown}; known: {', '.join(FAULTS)}")
    report = FuzzReport()
    best: list[Finding] = []
    first_failure_at: list[float] = []
    began = time.monotonic()

    def run_one(sc: dict[str, Any]) -> dict[str, ScenarioVerdict]:
        scenario = Scenario.from_dict(sc, source="<fuzz schedule>")
        _, verdicts = run_scenario(gateway, adapter, scenario, time_scale=time_scale)
        return verdicts

    @settings(
        max_examples=budget,
        database=DirectoryBasedExampleDatabase(str(database)) if database else None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        report_multiple_bugs=False,
        print_blob=False,
    )
    @seed(seed_value)
    @given(schedules(faults=faults))
    def probe(sc: dict[str, Any]) -> None:
        shrinking = bool(first_failure_at)
        out_of_time = shrinking and time.monotonic() - first_failure_at[0] > shrink_time_s
        if out_of_time and sc != best[-1].scenario:
            return  # out of shrinking time: keep the smallest finding; only its replay runs
        report.schedules += 1
        broken = _broken(run_one(sc))
        if progress and report.schedules % 25 == 0:
            rate = report.schedules / (time.monotonic() - began)
            state = "shrinking" if shrinking else "searching"
            progress(f"[fuzz] {report.schedules} schedules run, {state}, {rate:.1f}/s")
        if broken:
            if not first_failure_at:
                first_failure_at.append(time.monotonic())
                report.found_after = report.schedules
                if progress:
                    progress(f"[fuzz] found: {', '.join(sorted(broken))}; shrinking")
            best.append(Finding(sc, broken))
            raise AssertionError(f"broken: {sorted(broken)}")

    try:
        probe()
    except (AssertionError, FlakyFailure, FlakyReplay) as exc:
        if not best:
            raise
        if not isinstance(exc, AssertionError):
            report.notes.append(
                f"the agent failed this schedule only sometimes ({type(exc).__name__})"
            )
    report.elapsed_s = time.monotonic() - began
    if best:
        # Hypothesis replays the minimal example last; the last finding is the shrunk one.
        finding = best[-1]
        report.finding = finding
        if out_dir is not None:
            finding.path = _save(finding, out_dir, seed_value)
            again = load_scenario(finding.path)
            _, verdicts = run_scenario(gateway, adapter, again, time_scale=time_scale)
            finding.reproduced = bool(set(_broken(verdicts)) & set(finding.broken))
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="conformance fuzz",
        description=(
            "Generate fault schedules with Hypothesis, run the agent against each, and check the "
            "criteria that hold under any schedule: "
            + ", ".join(FUZZ_CRITERIA)
            + ". The first schedule that breaks one is shrunk to a minimal one and saved as a "
            "scenario file that `conformance run --scenario FILE` fails the same way."
        ),
    )
    from conformance.adapters.registry import agents_help

    p.add_argument("--agent", default="reference", help=agents_help() + "; default: reference")
    p.add_argument("--budget", type=int, default=200, help="schedules to try (default 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed, same schedules")
    p.add_argument("--out", type=Path, default=Path("fuzz-findings"), help="where findings go")
    p.add_argument(
        "--database", type=Path, default=None, help="Hypothesis example database (default: none)"
    )
    p.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    p.add_argument("--shrink-time", type=float, default=120.0, help="seconds allowed for shrinking")
    p.add_argument(
        "--fault",
        dest="faults",
        action="append",
        choices=list(FAULTS),
        metavar="NAME",
        help="draw only this fault primitive (repeatable; default: all of "
        + ", ".join(FAULTS)
        + ")",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit 0: nothing found; 1: a finding was saved; 2: bad usage; 130: interrupted."""
    args = build_parser().parse_args(argv)
    if args.budget < 1:
        print("conformance fuzz: --budget must be at least 1", file=sys.stderr)
        return 2
    if args.time_scale <= 0:
        print("conformance fuzz: --time-scale must be > 0", file=sys.stderr)
        return 2
    try:
        adapter = make_adapter(args.agent)
    except ValueError as exc:
        print(f"conformance fuzz: {exc}", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        with Gateway.running() as gw:
            report = run_fuzz(
                gw,
                adapter,
                budget=args.budget,
                seed_value=args.seed,
                out_dir=args.out,
                database=args.database,
                time_scale=args.time_scale,
                shrink_time_s=args.shrink_time,
                progress=say,
                faults=args.faults,
            )
    except KeyboardInterrupt:
        print("conformance fuzz: interrupted", file=sys.stderr)
        return 130
    print(
        f"{report.schedules} schedules in {report.elapsed_s:.1f} s "
        f"({report.rate:.1f} schedules/s) against {args.agent}, seed {args.seed}"
    )
    for note in report.notes:
        print(f"note: {note}")
    f = report.finding
    if f is None:
        print("no schedule broke " + ", ".join(FUZZ_CRITERIA))
        return 0
    print(f"first found after {report.found_after} schedule(s), then shrunk")
    for cid, v in sorted(f.broken.items()):
        print(f"{cid}: {v['verdict']}: expected {v['expected']}; observed {v['observed']}")
    if f.path is not None:
        state = "reproduces" if f.reproduced else "did NOT reproduce on a second run"
        print(f"saved {f.path} ({state}); rerun: conformance run --scenario {f.path}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
