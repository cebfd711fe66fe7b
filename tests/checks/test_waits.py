"""The waits the report draws: each retry's band, the same band its check judges with."""

from __future__ import annotations

import pytest

from conformance.checks import run_check
from conformance.checks.waits import retry_waits
from conformance.judging.evidence import nominal_backoff
from tests.checks.synth import Journal


def _inside(w: dict) -> bool:
    lo, hi = w["band_s"]
    return lo <= w["wait_s"] <= hi


@pytest.mark.parametrize(
    ("status", "rule"), [(429, "RTY-03"), (503, "RTY-05"), (408, "RTY-16"), (None, "RTY-06")]
)
@pytest.mark.parametrize(("factor", "ok"), [(0.3, False), (1.0, True), (1.8, True), (3.0, False)])
def test_backoff_band_is_the_one_its_check_judges(status, rule, factor, ok) -> None:
    j = Journal()
    j.chat(status)
    j.chat(status, wait=nominal_backoff(1) * 1.0)
    j.chat(200, wait=nominal_backoff(2) * factor)
    ev = j.evidence()
    waits = retry_waits(ev)
    assert [(w["after_seq"], w["seq"], w["retry"], w["rule"]) for w in waits] == [
        (0, 1, 1, rule),
        (1, 2, 2, rule),
    ]
    second = waits[1]
    # Measured from the end of the failed response (its arrival when it had none).
    assert second["wait_s"] == pytest.approx(nominal_backoff(2) * factor, abs=0.011)
    assert second["core_s"] == pytest.approx([0.75, 1.25])
    # The band widened by the slack: 5 ms early and 25 ms late, real, at time scale 0.02.
    assert second["band_s"] == pytest.approx([0.75 - 0.25, 1.25 + 1.25])
    # The picture marks the wait outside its band exactly when the check fails.
    assert run_check(rule, ev).outcome == ("pass" if ok else "fail")
    assert all(_inside(w) for w in waits) is ok


@pytest.mark.parametrize(("wait", "inside"), [(2.1, True), (0.5, False), (4.0, False)])
def test_asked_wait_band(wait, inside) -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"})
    j.chat(200, wait=wait)
    ev = j.evidence()
    (w,) = retry_waits(ev)
    assert w["rule"] == "RTY-01" and w["core_s"] == pytest.approx([2.0, 2.5])
    assert "Retry-After 2 s" in w["basis"]
    assert _inside(w) is inside
    assert (run_check("RTY-01", ev).outcome == "pass") is inside


def test_retry_after_ms_and_excessive_wait() -> None:
    j = Journal()
    j.chat(429, headers={"retry-after-ms": "1500"})
    j.chat(503, wait=1.6, headers={"Retry-After": "3600"})
    j.chat(200, wait=10.0)
    first, second = retry_waits(j.evidence())
    assert first["rule"] == "RTY-13" and first["core_s"] == pytest.approx([1.5, 1.875])
    assert second["rule"] == "RTY-14"
    assert second["core_s"] == pytest.approx([0.0, 300.0])
    assert _inside(second)


def test_no_band_after_a_broken_stream_or_a_400() -> None:
    j = Journal()
    j.chat(200, end="reset", fault="cut")
    j.chat(400, wait=0.2)
    j.chat(200, wait=0.2)
    waits = retry_waits(j.evidence())
    assert [w["band_s"] for w in waits] == [None, None]
    assert [w["rule"] for w in waits] == [None, None]
    assert "broken response" in waits[0]["basis"] and "status 400" in waits[1]["basis"]


def test_no_retry_no_waits() -> None:
    j = Journal()
    j.chat(200)
    assert retry_waits(j.evidence()) == []
