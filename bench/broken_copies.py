"""Broken copies of the reference agent against the whole suite (not a test; minutes).

``python bench/broken_copies.py [--switch NAME ...] [--time-scale S] [--tool-transport mcp]``

For every behaviour switch of the reference agent (``Behaviours``), runs every scenario under
``scenarios/criteria`` with that one behaviour off and compares each criterion's aggregate verdict
with the healthy agent's. Prints a Markdown table: the criteria each switch breaks (verdict
worse than healthy) and, separately, any criterion that was not PASS for the healthy agent.
Each switch should break the criteria it serves and nothing else. The ``mcp_*`` switches break
the MCP client, used only with ``--tool-transport mcp`` (over http their criteria are
UNSUPPORTED, healthy or broken).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.adapters.reference import ReferenceAdapter  # noqa: E402
from conformance.judging.timing import measure  # noqa: E402
from conformance.reference.agent import Behaviours  # noqa: E402
from conformance.runner import DEFAULT_TIME_SCALE, run_suite  # noqa: E402
from conformance.verdicts import SEVERITY  # noqa: E402
from fakes import load_scenarios  # noqa: E402
from fakes.remote import GatewayProcess  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "scenarios" / "criteria"
RANK = {v: i for i, v in enumerate(SEVERITY)}  # lower is worse


def verdicts(gw, adapter, scenarios, scale, timing, transport="http") -> dict[str, str]:
    agent = run_suite(
        gw, adapter, scenarios, time_scale=scale, timing=timing, tool_transport=transport
    )
    return {cid: c["verdict"] for cid, c in agent["criteria"].items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--switch", action="append", default=None, help="only these switches")
    p.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    p.add_argument("--tool-transport", choices=("http", "mcp"), default="http")
    args = p.parse_args()
    switches = args.switch or [f.name for f in dataclasses.fields(Behaviours)]
    scenarios = load_scenarios(ROOT)
    with GatewayProcess.running() as gw:  # as `conformance run` does, timing measured
        timing = measure(gw)
        t0 = time.monotonic()
        mode = args.tool_transport
        healthy = verdicts(gw, ReferenceAdapter(), scenarios, args.time_scale, timing, mode)
        took = time.monotonic() - t0
        print(f"healthy run: {len(scenarios)} scenarios in {took:.1f} s", file=sys.stderr)
        rows = []
        for sw in switches:
            copy = ReferenceAdapter(Behaviours(**{sw: False}))
            broken = verdicts(gw, copy, scenarios, args.time_scale, timing, mode)
            worse = sorted(
                f"{cid} {broken[cid]}"
                for cid in broken
                if RANK.get(broken[cid], 99) < RANK.get(healthy.get(cid, "PASS"), 99)
            )
            print(f"{sw}: {', '.join(worse) or '(nothing)'}", file=sys.stderr)
            rows.append((sw, worse))
    print("| switch off | criteria now worse than the healthy agent's |")
    print("|---|---|")
    for sw, worse in rows:
        print(f"| `{sw}` | {', '.join(worse) or '**nothing** (no scenario shows it)'} |")
    not_pass = sorted(f"{c} {v}" for c, v in healthy.items() if v != "PASS")
    print(f"\nHealthy agent, criteria not PASS: {', '.join(not_pass) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
