"""Harness overhead per scenario, scaled waits taken out (not a test).

``python bench/overhead.py [--agent reference] [--scales 0.02 0.01]``

A scenario's wall time is ``overhead + waits x scale``: the agent's backoffs, Retry-After waits,
stalls and the like shrink with the time scale, while session set-up, the agent's own work,
judging and the gateway's bookkeeping do not. Running every scenario at two scales s1 > s2 gives
``overhead = (s1 * d2 - s2 * d1) / (s1 - s2)`` per scenario; the median over the suite is the
figure. Sequential on purpose: parallel workers would share the cores being measured. The
gateway runs as in ``conformance run`` (a process of its own), or with ``--in-thread`` on a
thread of this process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.adapters.base import make_adapter  # noqa: E402
from conformance.runner import run_suite  # noqa: E402
from fakes import Gateway, load_scenarios  # noqa: E402
from fakes.remote import GatewayProcess  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "scenarios" / "criteria"


def durations(gw, adapter, scenarios, scale: float) -> dict[str, float]:
    agent = run_suite(gw, adapter, scenarios, time_scale=scale)
    return {s["id"]: s["duration_s"] for s in agent["scenarios"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", default="reference")
    p.add_argument("--scales", type=float, nargs=2, default=[0.02, 0.01])
    p.add_argument(
        "--in-thread", action="store_true", help="the gateway on a thread of this process"
    )
    args = p.parse_args()
    s1, s2 = sorted(args.scales, reverse=True)
    scenarios = load_scenarios(ROOT)
    adapter = make_adapter(args.agent)
    # By default the gateway in a process of its own, sessions over its control API, as a run.
    with Gateway.running() if args.in_thread else GatewayProcess.running() as gw:
        d1 = durations(gw, adapter, scenarios, s1)
        d2 = durations(gw, adapter, scenarios, s2)
    over = sorted(max(0.0, (s1 * d2[k] - s2 * d1[k]) / (s1 - s2)) for k in d1)
    p90 = over[int(len(over) * 0.9)]
    print(f"{len(over)} scenarios, agent {args.agent}, scales {s1} and {s2}")
    print(f"wall at {s1}: {sum(d1.values()):.1f} s; at {s2}: {sum(d2.values()):.1f} s")
    print(
        f"overhead per scenario (scaled waits removed): median {statistics.median(over) * 1000:.0f}"
        f" ms, p90 {p90 * 1000:.0f} ms, max {over[-1] * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
