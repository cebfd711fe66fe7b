"""``--repeat N``: every scenario run N times, and a verdict that says when the runs disagree.

Theory of operation: a real agent is a stochastic program; one run of a scenario shows one of
its behaviours. With ``--repeat N`` each scenario is run N times (spread over ``-n`` workers
like any other item) and :func:`combine` joins the runs of one scenario: a criterion whose runs
all gave one verdict keeps it; one that passed in a run and failed in another is **UNSTABLE**,
with how many runs passed (``passed`` of ``runs``), every run's verdict and what it observed,
and which run passed and which failed (indexes into the entry's runs: 0 is the entry itself,
then ``repeats``). Runs that differ otherwise (one judged PASS, another found nothing to judge:
INFORMATIONAL; or FAIL in one, NON-STRICT in another) do not disagree on whether the agent
does what the criterion asks: the criterion keeps the worst of them, its ``observed`` saying
what each run gave. A
criterion's aggregate ranks UNSTABLE next to FAIL (``conformance.verdicts.SEVERITY``), and a
CI gate fails on it unless the expectations file records it with the pass rate it may not fall
below (``conformance.expectations``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from conformance.results import Run, ScenarioVerdict
from conformance.verdicts import aggregate

__all__ = ["PASSING", "UNSTABLE", "combine", "rate_of"]

UNSTABLE: Final = "UNSTABLE"
PASSING = frozenset({"PASS", "INFORMATIONAL", "UNSUPPORTED"})  # a run that did not fail
_NO_VERDICT = "this run gave no verdict for it"


def rate_of(verdict: Mapping[str, Any]) -> float | None:
    """The pass rate of an UNSTABLE scenario verdict (None for any other verdict)."""
    rep = verdict.get("repeat") if verdict.get("verdict") == UNSTABLE else None
    if not rep:
        return None
    return float(rep["passed"]) / float(rep["runs"])


def combine(runs: list[Run]) -> Run:
    """The runs of one scenario joined (module doc); one run is returned as it is."""
    if len(runs) == 1:
        return runs[0]
    entry = runs[0][0].copy()
    entry["repeats"] = [r[0] for r in runs[1:]]
    cids = list(dict.fromkeys(cid for _, verdicts in runs for cid in verdicts))
    combined: dict[str, ScenarioVerdict] = {}
    for cid in cids:
        seen = [verdicts.get(cid) for _, verdicts in runs]
        said = [v["verdict"] if v else "ERROR" for v in seen]
        first = next(v for v in seen if v)
        if len(set(said)) == 1:
            combined[cid] = first
            continue
        passed = [i for i, v in enumerate(said) if v == "PASS"]
        failed = [i for i, v in enumerate(said) if v not in PASSING]
        worst = aggregate(said)
        # The worst run's verdict; a run that gave none for the criterion is an ERROR of it.
        shown = next((v for v in seen if v and v["verdict"] == worst), None)
        if shown is None:
            shown = {
                "id": first["id"],
                "verdict": worst,
                "expected": first.get("expected"),
                "observed": _NO_VERDICT,
            }
        observed = "; ".join(
            f"run {i + 1}: {v}"
            + ("" if v in PASSING else f" ({s.get('observed') if s else _NO_VERDICT})")
            for i, (v, s) in enumerate(zip(said, seen, strict=True))
        )
        if not (passed and failed):
            # No run passed while another failed: the worst stands, each run's verdict shown.
            combined[cid] = {**shown, "observed": f"{shown.get('observed')} [runs: {observed}]"}
            continue
        combined[cid] = {
            "id": first["id"],
            "verdict": UNSTABLE,
            "expected": shown.get("expected"),
            "observed": f"{len(passed)} of {len(runs)} runs passed: {observed}",
            "repeat": {
                "runs": len(runs),
                "passed": len(passed),
                "verdicts": said,
                "passing_run": passed[0],
                "failing_run": failed[0],
                "worst": worst,
            },
        }
    return entry, combined
