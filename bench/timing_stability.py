"""Do timing verdicts hold under load? Whole-suite runs back to back (not a test; an hour at N=20).

``python bench/timing_stability.py [--runs N] [--verify V] [--agents A,B,...] [--no-broken]
[--delays MS,MS] [-n N] [--no-load] [--out DIR] [--summary-only]``

Each round runs, one after the other, every agent over the whole suite with ``conformance run
-n 2 --verify V``, then every timing broken copy of the reference agent (an outside process:
``cmd:python -m conformance.reference adapter --off SWITCH``) over the scenarios that judge the
criterion it breaks, while a
second ``conformance run -n 2`` of the reference agent runs without pause beside them to load
the machine. Every run's verdicts go to ``DIR/runs.jsonl`` as it ends, so a long measurement
can be stopped and summarized (``--summary-only``) at any point.

The summary: per agent, the criteria whose verdict differed from that agent's majority in some
run, and how often (flips; 0 is the goal), with the flaky verdicts ``--verify`` settled; per
broken copy, in how many runs its criterion failed (every run is the goal); the measured timing
allowances, lowest and highest.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "scenarios" / "criteria"
# The reference agent as an outside program speaking the adapter protocol (with its jitter).
OUTSIDE = f"cmd:env PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m conformance.reference adapter"
# The reference agent with a fixed real delay before every request (bench/delayed_agent.py): a
# correct agent on a slower runtime, whose verdicts must be the undelayed agent's.
DELAYED = f"cmd:env PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'bench' / 'delayed_agent.py'))} --delay-ms"
NODE = f"cmd:node {shlex.quote(str(ROOT / 'examples' / 'node-agent' / 'agent.mjs'))}"
AGENTS = {"reference": "reference", "openai-sdk": "openai-sdk", "outside": OUTSIDE, "node": NODE}
# Broken copies that violate timing, and the criterion each must fail in every run.
BROKEN = {
    "jitter": "RTY-08",  # no jitter
    "backoff_base": "RTY-03",  # base 0.25 s
    "backoff_cap": "RTY-03",  # no 32 s cap
    "honour_retry_after": "RTY-01",  # Retry-After ignored
}
FAILING = {"FAIL", "NON-STRICT"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _conformance(*words: str) -> list[str]:
    return [sys.executable, "-m", "conformance", "run", "-q", *words]


class Load:
    """A second whole-suite run of the reference agent, restarted as soon as it ends."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.stop = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        cmd = _conformance("-n", "2", "--report-dir", str(self.workdir / "load-report"))
        while not self.stop.is_set():
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.workdir,
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.proc.wait()
            self.runs += 1

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the load run and its workers
        self.thread.join(60)


def judging(criterion: str) -> list[Path]:
    """The bundled scenario files that judge ``criterion``."""
    sys.path.insert(0, str(ROOT))
    from fakes import load_scenarios

    return [Path(s.source) for s in load_scenarios(SUITE) if criterion in s.criteria]


def run_once(
    label: str, spec: str, scenarios: list[Path], verify: int, workdir: Path, processes: int = 2
) -> dict:
    """One ``conformance run -n N`` of ``spec``; its verdicts, flaky criteria and timing."""
    results = workdir / f"{label.replace(':', '-').replace('@', '-')}.json"
    cmd = _conformance(
        "-n", str(processes), "--verify", str(verify), "--agent", spec,
        "--results", str(results), "--report-dir", str(workdir / f"{label.replace(':', '-')}-report"),
    )  # fmt: skip
    for path in scenarios:
        cmd += ["--scenario", str(path)]
    began = time.monotonic()
    proc = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True)
    wall = time.monotonic() - began
    if not results.exists():
        return {"label": label, "error": proc.stderr[-2000:], "wall_s": wall}
    doc = json.loads(results.read_text(encoding="utf-8"))
    agent = doc["agents"][0]
    crit = agent["criteria"]
    return {
        "label": label,
        "verdicts": {cid: c["verdict"] for cid, c in crit.items()},
        "flaky": sorted(cid for cid, c in crit.items() if c.get("flaky")),
        # What a failing verdict saw, kept: the run's own results are not (a flip is then
        # explained by its evidence, not guessed at).
        "failing": {
            cid: [
                f"{s.get('id')}: {s.get('verdict')}: {str(s.get('observed') or '')[:300]}"
                for s in c.get("scenarios", [])
                if s.get("verdict") in FAILING
            ]
            for cid, c in crit.items()
            if c["verdict"] in FAILING
        },
        "timing": {
            k: v for k, v in (doc["run"].get("timing") or {}).items() if k != "calibrations"
        },
        # Timing verdicts whose first run failed and a slower clock overturned or confirmed.
        "confirmed": sorted(
            {cid for cid, c in crit.items() for v in c["scenarios"] if v.get("confirmed")}
        ),
        "reaction": next((s["reaction"] for s in agent["scenarios"] if s.get("reaction")), None),
        "wall_s": round(wall, 1),
        "exit": proc.returncode,
    }


def summarize(rows: list[dict]) -> str:
    by_label: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_label[r["label"]].append(r)
    out = ["| agent | runs | criteria that flipped (runs off the majority / runs) | flaky, settled by --verify |", "|---|---|---|---|"]  # fmt: skip
    broken_lines = []
    for label, runs in by_label.items():
        good = [r for r in runs if "verdicts" in r]
        if label.startswith("broken:"):
            switch = label.split(":", 1)[1].split("@", 1)[0]
            cid = BROKEN[switch]
            failed = sum(r["verdicts"].get(cid) in FAILING for r in good)
            seen = collections.Counter(r["verdicts"].get(cid) for r in good)
            delay = label.split("@", 1)[1] if "@" in label else ""
            shown = f"`{switch}`" + (f" delayed {delay}" if delay else "")
            broken_lines.append(f"| {shown} | {cid} | {failed} of {len(good)} | {dict(seen)} |")
            continue
        flips = []
        cids = sorted({c for r in good for c in r["verdicts"]})
        for cid in cids:
            seen = collections.Counter(r["verdicts"].get(cid) for r in good)
            majority, count = seen.most_common(1)[0]
            off = len(good) - count
            if off:
                flips.append(f"{cid} {off}/{len(good)} ({dict(seen)})")
        flaky = collections.Counter(c for r in good for c in r.get("flaky", []))
        errors = len(runs) - len(good)
        out.append(
            f"| {label} | {len(good)}{f' (+{errors} broken)' if errors else ''} | "
            f"{'; '.join(flips) or '**0 flips**'} | "
            f"{', '.join(f'{c} x{n}' for c, n in sorted(flaky.items())) or 'none'} |"
        )
    if broken_lines:
        out += ["", "| broken copy | criterion | runs it failed | verdicts seen |", "|---|---|---|---|"]  # fmt: skip
        out += broken_lines
    timings = [r["timing"] for r in rows if r.get("timing")]
    if timings:
        late = sorted(t["late_slack_s"] * 1000 for t in timings)
        noise = sorted(t["noise_s"] * 1000 for t in timings)
        out += [
            "",
            f"Measured timing: late slack {late[0]:.1f}-{late[-1]:.1f} ms (median "
            f"{late[len(late) // 2]:.1f}), RTY-08 noise {noise[0]:.1f}-{noise[-1]:.1f} ms (median "
            f"{noise[len(noise) // 2]:.1f}) over {len(timings)} runs.",
        ]
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20, help="rounds (default 20)")
    p.add_argument("--verify", type=int, default=2, help="--verify of every run (default 2)")
    p.add_argument("--agents", default=",".join(AGENTS), help=f"of {', '.join(AGENTS)}")
    p.add_argument("--no-broken", action="store_true", help="leave the broken copies out")
    p.add_argument(
        "--delays",
        default="",
        help="comma-separated real delays in ms (e.g. 30,100): the reference agent delayed by "
        "each before every request, and the broken copies delayed by the first, join the plan",
    )
    p.add_argument("-n", "--processes", type=int, default=2, help="-n of every run (default 2)")
    p.add_argument("--no-load", action="store_true", help="no second run beside (idle machine)")
    p.add_argument("--out", type=Path, default=Path("timing-stability"))
    p.add_argument("--summary-only", action="store_true", help="summarize DIR/runs.jsonl")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "runs.jsonl"
    if not args.summary_only:
        agents = [a for a in args.agents.split(",") if a]
        plan = [(a, AGENTS[a], [SUITE]) for a in agents]
        delays = [int(d) for d in args.delays.split(",") if d]
        plan += [(f"delayed-{d}ms", f"{DELAYED} {d}", [SUITE]) for d in delays]
        if not args.no_broken:
            plan += [(f"broken:{s}", f"{OUTSIDE} --off {s}", judging(c)) for s, c in BROKEN.items()]
            if delays:
                plan += [
                    (f"broken:{s}@{delays[0]}ms", f"{DELAYED} {delays[0]} --off {s}", judging(c))
                    for s, c in BROKEN.items()
                ]
        with tempfile.TemporaryDirectory(prefix="timing-stability-") as tmp:
            work = Path(tmp)
            load = Load(work) if not args.no_load else None
            if load is not None:
                load.__enter__()
            try:
                for n in range(1, args.runs + 1):
                    for label, spec, scenarios in plan:
                        row = run_once(label, spec, scenarios, args.verify, work, args.processes)
                        row["round"] = n
                        with log.open("a", encoding="utf-8") as f:
                            f.write(json.dumps(row) + "\n")
                        what = row.get("error") or f"{row['wall_s']} s, flaky {row['flaky']}"
                        print(f"round {n} {label}: {what}", file=sys.stderr, flush=True)
            finally:
                if load is not None:
                    load.__exit__()
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    print(summarize(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
