"""RTY-08's statistical test (conformance.checks.jitter): its chances against simulation, its
false-alarm rate for an agent with 25 % jitter, and its power against one without jitter.

Simulations use a fixed seed: the same draws every run, so the counts below are exact for them.
"""

from __future__ import annotations

import math
import random

import pytest

from conformance.checks import run_check
from conformance.checks.jitter import (
    ALPHA,
    Sample,
    cluster_bound,
    judge_jitter,
    largest_cluster,
    meet_probability,
)
from conformance.checks.rty import JITTER_EARLY_S
from conformance.judging.evidence import nominal_backoff
from conformance.judging.timing import Timing
from tests.checks.synth import Journal

LO, HI = 0.75, 1.25  # RTY-03's jitter band: the 25 % jitter RTY-08 is tested against

# The nominal waits of the bundled scenarios that judge RTY-08.
SIX = [nominal_backoff(n) for n in range(1, 7)]  # rty-03-backoff-429
BURST = [nominal_backoff(n) for n in range(1, 11)]  # rty-04-burst-of-10
TWO_BURSTS = BURST * 2  # rty-08-two-bursts


def _meets(js: list[float], ws: list[float]) -> bool:
    return max(j - w for j, w in zip(js, ws, strict=True)) <= min(
        j + w for j, w in zip(js, ws, strict=True)
    )


def _within(p: float, hits: int, n: int) -> bool:
    """``hits`` of ``n`` draws agree with chance ``p`` (five standard errors, plus a hair)."""
    return abs(hits / n - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-4


def test_two_intervals_meet_with_the_closed_form_chance():
    for a, b in [(0.05, 0.02), (0.1, 0.1), (0.2, 0.05)]:
        exact = 1 - (1 - (a + b) / (HI - LO)) ** 2
        assert meet_probability([a, b], LO, HI) == pytest.approx(exact, rel=1e-3)
    assert meet_probability([0.3], LO, HI) == 1.0
    assert meet_probability([0.3, 0.3], LO, HI) == 1.0  # wider than the band: always


@pytest.mark.parametrize("widths", [[0.1, 0.05, 0.02], [0.06] * 4, [0.03] * 3 + [0.07] * 2])
def test_more_intervals_meet_as_often_as_simulated(widths):
    rng = random.Random(7)
    n = 40_000
    hits = sum(_meets([rng.uniform(LO, HI) for _ in widths], widths) for _ in range(n))
    assert _within(meet_probability(widths, LO, HI), hits, n)


def test_largest_cluster_is_the_deepest_overlap():
    def s(lo: float, hi: float) -> Sample:
        return Sample((lo + hi) / 2, (hi - lo) / 2, (hi - lo) / 2)

    assert largest_cluster([s(0, 1), s(0.5, 2), s(1.5, 3), s(2.5, 4)]) == 2
    assert largest_cluster([s(0, 1), s(1, 2)]) == 2  # touching intervals share a point
    assert largest_cluster([s(0, 1), s(2, 3)]) == 1
    assert largest_cluster([s(0, 10), s(1, 2), s(1.5, 3), s(1.8, 1.9)]) == 4


def test_the_cluster_bound_holds_over_the_simulated_chance():
    # The two-bursts scenario at time scale 0.02 and 20 ms of noise: 8 waits at the cap, 2 at 16 s.
    widths = [0.0328] * 8 + [0.0656] * 2
    rng = random.Random(11)
    n = 30_000
    for m in (6, 7):
        hits = 0
        for _ in range(n):
            js = [rng.uniform(LO, HI) for _ in widths]
            hits += largest_cluster([Sample(j, w, w) for j, w in zip(js, widths, strict=True)]) >= m
        assert hits / n <= cluster_bound(widths, m, LO, HI) + 5 * math.sqrt(hits + 1) / n


def _samples(
    noms: list[float], factors: list[float], late_s: list[float], scale: float, noise_s: float
) -> list[Sample]:
    out = []
    for n, f, late in zip(noms, factors, late_s, strict=True):
        real = n * scale
        out.append(Sample((f * real + late) / real, noise_s / real, JITTER_EARLY_S / real))
    return out


# (design, time scale, measured noise): the ones a run at the default scale can resolve, and the
# six-retry scenario in real time.
RESOLVED = [
    (TWO_BURSTS, 0.02, 0.005),
    (TWO_BURSTS, 0.02, 0.02),
    (BURST, 0.02, 0.005),
    (SIX, 1.0, 0.005),
]


@pytest.mark.parametrize("noms,scale,noise", RESOLVED)
def test_an_agent_with_25_percent_jitter_is_failed_less_than_once_in_a_thousand(noms, scale, noise):
    rng = random.Random(2024)
    trials, fails = 3000, 0
    for _ in range(trials):
        factors = [rng.uniform(LO, HI) for _ in noms]
        late = [rng.uniform(-JITTER_EARLY_S, noise) for _ in noms]
        fails += judge_jitter(_samples(noms, factors, late, scale, noise), LO, HI).outcome == "fail"
    # The test promises at most ALPHA; these draws give far fewer.
    assert fails <= ALPHA * trials


@pytest.mark.parametrize("noms,scale,noise", RESOLVED)
def test_an_agent_without_jitter_fails_when_the_noise_is_as_measured(noms, scale, noise):
    rng = random.Random(99)
    for _ in range(300):
        late = [rng.uniform(-JITTER_EARLY_S, noise) for _ in noms]
        found = judge_jitter(_samples(noms, [1.0] * len(noms), late, scale, noise), LO, HI)
        assert found.outcome == "fail", found


def test_a_few_waits_beyond_the_measured_noise_do_not_hide_a_missing_jitter():
    rng = random.Random(5)
    noise = 0.02
    for _ in range(200):
        late = [rng.uniform(0, noise) for _ in TWO_BURSTS]
        for i in rng.sample(range(len(TWO_BURSTS)), 2):  # two spikes, 3x the measured noise
            late[i] = 3 * noise
        found = judge_jitter(_samples(TWO_BURSTS, [1.0] * 20, late, 0.02, noise), LO, HI)
        assert found.outcome == "fail", found


def test_waits_too_short_for_the_noise_cannot_tell():
    # The six-retry scenario at time scale 0.02: its longest wait is 320 ms, not enough.
    found = judge_jitter(_samples(SIX, [1.0] * 6, [0.001] * 6, 0.02, 0.02), LO, HI)
    assert (found.outcome, found.needed) == ("not_applicable", None)


def test_the_check_judges_with_the_runs_measured_noise():
    def journal(factors: list[float]) -> Journal:
        j = Journal(scale=0.02)
        j.chat(429)
        for n, f in enumerate(factors, start=1):
            j.chat(429 if n < len(factors) else 200, wait=nominal_backoff(n) * f)
        return j

    exact = journal([1.0] * 10)
    jittered = journal([1.0, 0.8, 1.2, 0.9, 1.1, 0.95, 1.05, 0.85, 1.15, 0.78])
    quiet, loud = Timing(noise_s=0.005), Timing(noise_s=0.02)
    found = run_check("RTY-08", exact.evidence(timing=quiet))
    assert found.outcome == "fail" and "probability <= " in found.observed
    assert "5.0 ms measured" in found.expected
    assert run_check("RTY-08", jittered.evidence(timing=quiet)).outcome == "pass"
    # The same waits, judged with the noise of a busy machine: too short to tell.
    assert run_check("RTY-08", exact.evidence(timing=loud)).outcome == "not_applicable"
