"""RTY-08's false-alarm rate and power, per scenario design (not a test; a minute).

``python bench/jitter_false_alarm.py [--trials N] [--seed S]``

For the bundled scenarios that judge RTY-08, at the time scales and noise levels a run meets,
prints a Markdown table: how many retries are narrow enough to tell, m* (the cluster that
fails), the bound on the false-alarm rate for an agent with 25 % jitter, the false-alarm rate
in N simulated runs of such an agent whose attempts are late by up to the measured noise (and
early by up to the 2 ms RTY-08 allows) but for a share of outliers (``--outliers``, default
10 %) late by up to three times the noise, and the power: the share of N/10 simulated runs of an
agent without jitter, late likewise, that fail.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.checks.jitter import Sample, judge_jitter  # noqa: E402
from conformance.checks.rty import JITTER_EARLY_S, JITTER_HIGH, JITTER_LOW  # noqa: E402
from conformance.judging.evidence import nominal_backoff  # noqa: E402

BURST = [nominal_backoff(n) for n in range(1, 11)]
DESIGNS = {
    "rty-03-backoff-429 (6)": BURST[:6],
    "rty-04-burst-of-10 (10)": BURST,
    "rty-08-two-bursts (20)": BURST * 2,
}
CASES = [(0.02, 0.005), (0.02, 0.01), (0.02, 0.02), (1.0, 0.005)]


OUTLIERS = 0.1


def samples(noms: list[float], factors: list[float], rng: random.Random, scale: float, noise: float) -> list[Sample]:  # fmt: skip
    out = []
    for n, f in zip(noms, factors, strict=True):
        real = n * scale
        if rng.random() < OUTLIERS:
            late = rng.uniform(noise, 3 * noise)
        else:
            late = rng.uniform(-JITTER_EARLY_S, noise)
        out.append(Sample((f * real + late) / real, noise / real, JITTER_EARLY_S / real))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--outliers", type=float, default=0.1)
    args = p.parse_args()
    global OUTLIERS
    OUTLIERS = args.outliers
    rng = random.Random(args.seed)
    print("| scenario (retries) | time scale | noise | narrow / m* | bound | simulated false alarms | power |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, noms in DESIGNS.items():
        for scale, noise in CASES:
            first = judge_jitter(samples(noms, [1.0] * len(noms), rng, scale, noise), JITTER_LOW, JITTER_HIGH)  # fmt: skip
            if first.needed is None:
                print(f"| {name} | {scale:g} | {noise * 1000:g} ms | {first.informative} / - | cannot fail | 0 | 0 |")  # fmt: skip
                continue
            alarms = 0
            for _ in range(args.trials):
                factors = [rng.uniform(JITTER_LOW, JITTER_HIGH) for _ in noms]
                found = judge_jitter(samples(noms, factors, rng, scale, noise), JITTER_LOW, JITTER_HIGH)  # fmt: skip
                alarms += found.outcome == "fail"
            caught = sum(
                judge_jitter(
                    samples(noms, [1.0] * len(noms), rng, scale, noise), JITTER_LOW, JITTER_HIGH
                ).outcome
                == "fail"  # fmt: skip
                for _ in range(args.trials // 10)
            )
            print(
                f"| {name} | {scale:g} | {noise * 1000:g} ms | {first.informative} / {first.needed} "
                f"| {first.bound:.1e} | {alarms} in {args.trials} ({alarms / args.trials:.1e}) "
                f"| {caught / (args.trials // 10):.3f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
