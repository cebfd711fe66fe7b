from __future__ import annotations

import pytest

from conformance.catalogue import by_id
from conformance.checks.finding import Finding
from conformance.verdicts import aggregate, verdict_for


@pytest.mark.parametrize(
    ("cid", "outcome", "verdict"),
    [
        ("RTY-01", "pass", "PASS"),
        ("RTY-01", "fail", "FAIL"),
        ("RTY-02", "fail", "NON-STRICT"),
        ("RTY-10", "fail", "NON-STRICT"),
        ("RTY-02", "pass", "PASS"),
        ("RTY-01", "informational", "INFORMATIONAL"),
        ("RTY-01", "not_applicable", "INFORMATIONAL"),
    ],
)
def test_verdict_for(cid: str, outcome: str, verdict: str) -> None:
    assert verdict_for(by_id(cid), Finding(outcome, "e", "o")) == verdict


def test_bad_outcome_rejected() -> None:
    with pytest.raises(ValueError, match="outcome"):
        Finding("maybe", "e", "o")


@pytest.mark.parametrize(
    ("verdicts", "worst"),
    [
        # A failure the wire shows is never hidden behind a run that judged nothing.
        (["PASS", "FAIL", "ERROR"], "FAIL"),
        (["PASS", "TIMEOUT", "FAIL"], "FAIL"),
        (["PASS", "TIMEOUT", "NON-STRICT"], "NON-STRICT"),
        (["PASS", "TIMEOUT"], "TIMEOUT"),
        (["ERROR", "TIMEOUT", "PASS"], "ERROR"),
        (["NON-STRICT", "PASS"], "NON-STRICT"),
        (["PASS", "FAIL", "NON-STRICT"], "FAIL"),
        (["INFORMATIONAL", "PASS"], "PASS"),
        (["UNSUPPORTED", "INFORMATIONAL"], "INFORMATIONAL"),
        (["UNSUPPORTED", "PASS"], "PASS"),
        (["UNSUPPORTED", "UNSUPPORTED"], "UNSUPPORTED"),
        ([], "UNSUPPORTED"),
    ],
)
def test_aggregate(verdicts: list[str], worst: str) -> None:
    assert aggregate(verdicts) == worst


def test_aggregate_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="BOGUS"):
        aggregate(["PASS", "BOGUS"])
