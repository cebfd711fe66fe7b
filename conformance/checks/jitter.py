"""RTY-08 as a statistical test: is a run of backoff waits jittered, given the timing noise?

Theory of operation: retry i waited ``w_i`` (nominal seconds) where the policy says ``n_i``;
its ratio ``r_i = w_i / n_i`` is the agent's jitter factor plus the timing noise divided by the
wait's real length. Noise is measured on the machine (``conformance.judging.timing``: ``noise_s`` late,
``early_slack_s`` early), so each ratio stands for an interval of factors,
``[r_i - noise / real_i, r_i + early / real_i]``: short waits give wide intervals, long ones
narrow intervals.

- Without jitter (the null hypothesis), every interval holds the one factor the agent uses, but
  for the rare attempt whose noise exceeds the measured one.
- With jitter, factors are spread over the band RTY-03 allows: a 25 % jitter draws them from
  ``[0.75, 1.25]``. Then the intervals of m retries meet in a point only by chance; for
  intervals of half-widths ``w_1..w_m`` around independent uniform factors that chance is
  :func:`meet_probability` (exact up to the numerical integration), and the chance that any m
  of the informative retries meet is at most the sum over the m-subsets (:func:`cluster_bound`).

The verdict: let ``m*`` be the smallest cluster size whose chance under a 25 % jitter is at most
``ALPHA``; a cluster of ``m*`` or more informative retries that agree within the noise is a
FAIL (a false alarm for a jittering agent has probability at most ``ALPHA``, given noise within
the measured one). Intervals that do not all meet are a PASS: the ratios differ beyond the
noise. Anything else cannot tell: too few long waits for the noise measured (not applicable).
Informative retries are those whose interval is narrow (``INFORMATIVE_WIDTH`` of the band at
most): a wide one meets every other and tells nothing.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "ALPHA",
    "INFORMATIVE_WIDTH",
    "JitterTest",
    "Sample",
    "cluster_bound",
    "judge_jitter",
    "largest_cluster",
    "meet_probability",
]

# The largest false-alarm probability a FAIL may carry, per scenario, for a 25 % jitter.
ALPHA = 1e-3
# An interval wider than this share of the jitter band tells nothing (it meets nearly any other).
INFORMATIVE_WIDTH = 0.2
_STEPS = 400  # midpoint-rule steps over the jitter band in meet_probability


@dataclass(frozen=True)
class Sample:
    """One backoff retry: its ratio and how far noise may move it, in ratio units."""

    ratio: float
    late: float  # the noise allowed late, divided by the wait's real length
    early: float  # the slack allowed early, likewise

    @property
    def low(self) -> float:
        return self.ratio - self.late

    @property
    def high(self) -> float:
        return self.ratio + self.early


@dataclass(frozen=True)
class JitterTest:
    """The outcome: ``pass`` / ``fail`` / ``not_applicable``, with the figures behind it."""

    outcome: str
    informative: int  # how many retries have narrow intervals
    cluster: int  # the largest number of informative retries that agree within the noise
    needed: int | None  # m*: the cluster size that FAILs (None: no size is rare enough)
    bound: float | None  # the chance of a cluster of ``needed`` under a 25 % jitter


def meet_probability(widths: Sequence[float], lo: float, hi: float) -> float:
    """P(some point lies within ``widths[i]`` of every J_i), J_i independent uniform on
    [lo, hi]: the chance that intervals of these half-widths around jittered factors meet.

    With t = max_i (J_i - w_i), reached at k, they meet when every other J_j lies in
    [t - w_j, t + w_j]; summing over k and integrating over t gives the probability.
    """
    return _meet(_grouped(widths), float(lo), float(hi))


def _grouped(widths: Iterable[float]) -> tuple[tuple[float, int], ...]:
    """Equal widths counted together: (width, how many), in order (waits at the cap repeat)."""
    return tuple(sorted(Counter(round(float(w), 9) for w in widths).items()))


@functools.lru_cache(maxsize=8192)
def _meet(groups: tuple[tuple[float, int], ...], lo: float, hi: float) -> float:
    if sum(n for _, n in groups) <= 1:
        return 1.0
    span = hi - lo
    step = span / _STEPS
    widest = max(w for w, _ in groups)
    # One grid of t (midpoints) for every k: t runs over [lo - widest, hi].
    ts = [lo - widest + (s + 0.5) * step for s in range(int((span + widest) / step) + 1)]
    inside = {w: [max(0.0, min(hi, t + w) - max(lo, t - w)) / span for t in ts] for w, _ in groups}
    every = [1.0] * len(ts)  # the product over all intervals of P(J_j within w_j of t)
    for w, n in groups:
        every = [e * x**n for e, x in zip(every, inside[w], strict=True)]
    total = 0.0
    for wk, nk in groups:
        acc = 0.0
        for t, e, x in zip(ts, every, inside[wk], strict=True):
            if lo <= t + wk <= hi and x > 0.0:  # J_k = t + wk, drawn in [lo, hi]
                acc += e / x  # every other interval: the product without k's own factor
        total += nk * acc * step / span  # any of the group's nk intervals may be the k
    return min(1.0, total)


def cluster_bound(widths: Sequence[float], m: int, lo: float, hi: float) -> float:
    """An upper bound on P(some m of the intervals meet) for uniform factors on [lo, hi]: the
    sum of :func:`meet_probability` over the m-subsets (at most 1), equal widths counted
    together."""
    groups = _grouped(widths)
    total = 0.0
    for counts in _choices([n for _, n in groups], m):
        ways = math.prod(math.comb(n, c) for (_, n), c in zip(groups, counts, strict=True))
        chosen = tuple((w, c) for (w, _), c in zip(groups, counts, strict=True) if c)
        total += ways * _meet(chosen, float(lo), float(hi))
        if total >= 1.0:
            return 1.0
    return total


def _choices(sizes: list[int], m: int) -> Iterator[tuple[int, ...]]:
    """Every way to take m items from groups of these sizes: how many from each."""
    if not sizes:
        if m == 0:
            yield ()
        return
    for c in range(min(m, sizes[0]) + 1):
        for rest in _choices(sizes[1:], m - c):
            yield (c, *rest)


def largest_cluster(samples: Sequence[Sample]) -> int:
    """The largest number of the samples' intervals that share a point (a sweep over ends)."""
    ends = sorted(
        [(s.low, 0) for s in samples] + [(s.high, 1) for s in samples]
    )  # at a tie an opening comes first: touching intervals meet
    best = cur = 0
    for _, kind in ends:
        cur += 1 if kind == 0 else -1
        best = max(best, cur)
    return best


@functools.lru_cache(maxsize=1024)
def _threshold(
    groups: tuple[tuple[float, int], ...], lo: float, hi: float, alpha: float
) -> tuple[int | None, float | None]:
    """m* and its bound for these widths: the smallest cluster size rare enough under a jitter
    (the same widths recur scenario after scenario: computed once)."""
    widths = [w for w, n in groups for _ in range(n)]
    for m in range(2, len(widths) + 1):
        b = cluster_bound(widths, m, lo, hi)
        if b <= alpha:
            return m, b
    return None, None


def judge_jitter(
    samples: Sequence[Sample], lo: float, hi: float, alpha: float = ALPHA
) -> JitterTest:
    """The RTY-08 test over one run's backoff retries (module docstring)."""
    span = hi - lo
    narrow = [s for s in samples if s.late + s.early <= INFORMATIVE_WIDTH * span]
    needed, bound = _threshold(_grouped(s.late + s.early for s in narrow), lo, hi, alpha)
    cluster = largest_cluster(narrow)
    if needed is not None and cluster >= needed:
        return JitterTest("fail", len(narrow), cluster, needed, bound)
    if largest_cluster(samples) < len(samples):
        return JitterTest("pass", len(narrow), cluster, needed, bound)
    return JitterTest("not_applicable", len(narrow), cluster, needed, bound)
