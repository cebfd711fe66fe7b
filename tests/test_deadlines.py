"""Deadlines from the script: never shorter than what a correct agent must spend there."""

from __future__ import annotations

import dataclasses

import pytest

from conformance.judging.deadlines import DEADLINE_GRACE_S, deadline_s, floor_s
from fakes import Scenario, load_scenario, load_scenarios
from scenarios import SCENARIO_DIR

CRITERIA = SCENARIO_DIR / "criteria"
ALL = load_scenarios(SCENARIO_DIR)


def _backoff_sum(retries: int) -> float:
    """Nominal seconds of ``retries`` backoff waits at the upper edge of the 25 % band."""
    return sum(min(32.0, 0.5 * 2 ** (n - 1)) for n in range(1, retries + 1)) * 1.25


@pytest.mark.parametrize(
    ("path", "floor"),
    [
        # Ten retries of one request: 0.5+1+2+4+8+16+32x4 = 159.5 s nominal, x1.25.
        ("rty/rty-04-eleven-failures.yaml", _backoff_sum(10)),
        ("rty/rty-04-burst-of-10.yaml", _backoff_sum(10)),
        # Six retries: 31.5 s nominal, 39.4 s at the band's upper edge (the deadline was 30).
        ("rty/rty-03-backoff-429.yaml", _backoff_sum(6)),
        # An excessive Retry-After: a capped wait may take up to 300 s (RTY-14).
        ("rty/rty-14-retry-after-one-hour.yaml", 300.0),
        ("rty/rty-14-retry-after-ms-one-hour.yaml", 300.0),
        # A 300 s stall after headers, served whole.
        ("str/str-10-idle-stall.yaml", 390.0),
        # A hang of 40 s, given up at the scenario's tool limit of 10 s.
        ("tol/tol-04-tool-timeout.yaml", 10.0),
    ],
)
def test_the_floor_of_a_bundled_scenario(path, floor):
    got, _ = floor_s(load_scenario(CRITERIA / path))
    assert got == pytest.approx(floor, rel=1e-6)


def test_a_server_asked_wait_counts_with_its_band():
    sc = load_scenario(CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml")
    asked = float(sc.script[0].fault_params["headers"]["Retry-After"])
    assert floor_s(sc)[0] == pytest.approx(asked * 1.25)


@pytest.mark.parametrize("scenario", ALL, ids=lambda s: s.id)
@pytest.mark.parametrize("scale", [1.0, 0.02])
def test_no_bundled_scenario_gets_a_deadline_below_its_floor(scenario: Scenario, scale):
    floor, attempts = floor_s(scenario)
    assert attempts >= 1
    assert deadline_s(scenario, scale) >= floor * scale + DEADLINE_GRACE_S


def test_a_deadline_written_too_short_is_raised_to_the_floor():
    sc = load_scenario(CRITERIA / "rty" / "rty-04-eleven-failures.yaml")
    sc = dataclasses.replace(sc, deadline=60)  # what it was written with once
    # Unscaled (an agent without time_scale): the real deadline covers ten capped backoffs.
    assert deadline_s(sc, 1.0) > _backoff_sum(10) + DEADLINE_GRACE_S


def test_a_fallback_starts_its_own_retry_count():
    raw = {
        "id": "two-runs",
        "criteria": ["STR-05"],
        "prompt": "hi",
        "script": [
            {"match": {"stream": True}, "times": 3, "fault": {"http_error": {"status": 503}}},
            {"match": {"stream": False}, "times": 2, "fault": {"http_error": {"status": 503}}},
            {"match": {"stream": False}, "reply": {"text": "ok", "finish_reason": "stop"}},
        ],
    }
    floor, attempts = floor_s(Scenario.from_dict(raw))
    assert attempts == 6
    assert floor == pytest.approx(_backoff_sum(3) + _backoff_sum(2))


def test_non_retryable_errors_add_no_wait():
    raw = {
        "id": "auth",
        "criteria": ["RTY-07"],
        "prompt": "hi",
        "script": [{"fault": {"http_error": {"status": 401}}}],
    }
    assert floor_s(Scenario.from_dict(raw)) == (0.0, 1)


def test_a_refusal_window_counts_with_the_retry_that_ends_it():
    raw = {
        "id": "refused",
        "criteria": ["RTY-06"],
        "prompt": "hi",
        "refuse_connections": {"seconds": 2},
        "script": [{"reply": {"text": "ok", "finish_reason": "stop"}}],
    }
    # The first retry sure to land after 2 s is the third (0.75 x 3.5 s >= 2 s); at the upper
    # edge of the band it comes 1.25 x 3.5 s after the first attempt.
    assert floor_s(Scenario.from_dict(raw))[0] == pytest.approx(1.25 * 3.5)
