"""Measure how long each bundled scenario takes the reference agent: the order of its first run.

A run orders its scenarios longest first by the agent's earlier run (``conformance.durations``);
for the reference agent's first run on a machine, by this table, shipped beside its adapter.
Run it after adding or changing a scenario (``tests/test_durations.py`` checks that the table
names every bundled scenario)::

    python scripts/reference_durations.py

It runs the suite once in one process and keeps each scenario's own time (its confirmations
left out). Nothing in the table changes a verdict.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from conformance.adapters import reference

TABLE = Path(reference.__file__).with_name(reference.DURATIONS_FILE)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=TABLE, help=f"where to write (default: {TABLE})")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.json"
        cmd = [sys.executable, "-m", "conformance", "run", "--results", str(results)]
        subprocess.run([*cmd, "--report-dir", str(Path(tmp) / "report")], check=True)
        doc = json.loads(results.read_text(encoding="utf-8"))
    seconds = {s["id"]: round(s["duration_s"], 3) for a in doc["agents"] for s in a["scenarios"]}
    table = {"time_scale": doc["run"]["time_scale"], "seconds": dict(sorted(seconds.items()))}
    args.out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{len(seconds)} scenarios, {sum(seconds.values()):.1f} s: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
