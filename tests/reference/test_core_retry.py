"""Retry policy (RTY-*) unit tests: pure functions, injected clock and jitter, no I/O."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.reference.retry import (
    MAX_RETRIES,
    RetryDecision,
    classify,
    decide,
    jittered_backoff,
    nominal_backoff,
    parse_retry_after,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def mid() -> float:
    return 0.5


def _decide(**kw) -> RetryDecision:
    kw.setdefault("retries_done", 0)
    kw.setdefault("now", NOW)
    kw.setdefault("rand", mid)
    return decide(**kw)


def test_RTY_01_retry_after_seconds_replaces_backoff() -> None:
    d = _decide(status=429, headers={"Retry-After": "7"}, retries_done=5)
    assert d.retry and d.delay_s == 7.0 and d.kind == "rate_limit"
    assert d.nominal_s is None


def test_RTY_02_retry_after_http_date() -> None:
    when = format_datetime(NOW + timedelta(seconds=12), usegmt=True)
    d = _decide(status=429, headers={"retry-after": when})
    assert d.retry and d.delay_s == pytest.approx(12.0)
    past = format_datetime(NOW - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"Retry-After": past}, NOW) == 0.0


def test_RTY_02_garbage_retry_after_falls_back_to_backoff() -> None:
    d = _decide(status=429, headers={"Retry-After": "soon-ish"})
    assert d.retry and d.delay_s == 0.5 and d.nominal_s == 0.5


def test_RTY_03_backoff_doubles_with_jitter() -> None:
    assert [nominal_backoff(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 32, 32]
    assert jittered_backoff(3, lambda: 0.0) == pytest.approx(1.5)
    assert jittered_backoff(3, lambda: 1.0) == pytest.approx(2.5)
    d = _decide(status=429, retries_done=2, rand=lambda: 0.0)
    assert d.delay_s == pytest.approx(1.5) and d.nominal_s == 2.0


def test_RTY_03_bad_jitter_source_rejected() -> None:
    with pytest.raises(ValueError, match="jitter source"):
        jittered_backoff(1, lambda: 2.0)


def test_RTY_04_ten_retries_then_surface() -> None:
    delays = []
    for done in range(MAX_RETRIES):
        d = _decide(status=503, retries_done=done)
        assert d.retry, done
        delays.append(d.delay_s)
    assert len(delays) == 10
    last = _decide(status=503, retries_done=MAX_RETRIES)
    assert not last.retry and last.kind == "server" and "10 retries" in last.reason


@pytest.mark.parametrize(
    ("status", "kind"),
    [(500, "server"), (502, "server"), (503, "server"), (504, "server"), (529, "overloaded")],
)
def test_RTY_05_5xx_retried_like_429(status: int, kind: str) -> None:
    d = _decide(status=status, retries_done=1)
    assert d.retry and d.kind == kind and d.delay_s == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("err", "kind"), [("refused", "connection"), ("reset", "connection"), ("timeout", "timeout")]
)
def test_RTY_06_connection_errors_retried(err: str, kind: str) -> None:
    d = _decide(connection_error=err, retries_done=3)
    assert d.retry and d.kind == kind and d.delay_s == pytest.approx(4.0)


def test_RTY_06_unknown_connection_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown connection_error 'bogus'"):
        _decide(connection_error="bogus")


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "bad_request"),
        (401, "auth"),
        (403, "permission"),
        (404, "not_found"),
        (422, "bad_request"),
    ],
)
def test_RTY_07_non_retryable_4xx_surface(status: int, kind: str) -> None:
    d = _decide(status=status, headers={"Retry-After": "1"})
    assert not d.retry and d.delay_s is None and d.kind == kind


def test_RTY_08_jitter_varies_with_the_source() -> None:
    rng = random.Random(1)
    delays = {_decide(status=429, retries_done=4, rand=rng.random).delay_s for _ in range(5)}
    assert len(delays) > 1


def test_RTY_13_retry_after_ms_preferred() -> None:
    d = _decide(status=429, headers={"Retry-After": "9", "retry-after-ms": "1500"})
    assert d.retry and d.delay_s == pytest.approx(1.5)


def test_RTY_14_excessive_retry_after_surfaces() -> None:
    d = _decide(status=429, headers={"Retry-After": "3600"})
    assert not d.retry and d.kind == "rate_limit" and "3600" in d.reason
    assert _decide(status=429, headers={"Retry-After": "60"}).delay_s == 60.0


def test_RTY_15_x_should_retry_honoured() -> None:
    assert not _decide(status=503, headers={"X-Should-Retry": "false"}).retry
    forced = _decide(status=400, headers={"x-should-retry": "true"})
    assert forced.retry and forced.delay_s == 0.5
    # Forcing still respects the retry budget.
    assert not _decide(status=400, headers={"x-should-retry": "true"}, retries_done=10).retry
    ignored = _decide(status=503, headers={"x-should-retry": "false"}, honour_should_retry=False)
    assert ignored.retry


@pytest.mark.parametrize(("status", "kind"), [(408, "timeout"), (409, "server")])
def test_RTY_16_408_409_retried(status: int, kind: str) -> None:
    d = _decide(status=status)
    assert d.retry and d.kind == kind


def test_switches_break_only_their_behaviour() -> None:
    off = _decide(status=429, headers={"Retry-After": "7"}, honour_retry_after=False)
    assert off.retry and off.delay_s == 0.5
    assert _decide(status=429, backoff=False, retries_done=5).delay_s == 0.0


def test_classify_requires_input() -> None:
    with pytest.raises(ValueError, match="status or a connection_error"):
        classify()


@given(
    n=st.integers(min_value=0, max_value=MAX_RETRIES - 1),
    r=st.floats(min_value=0.0, max_value=1.0),
    status=st.sampled_from([408, 409, 429, 500, 502, 503, 504, 529]),
)
def test_RTY_03_property_delay_within_jitter_band_and_capped(n: int, r: float, status: int) -> None:
    d = _decide(status=status, retries_done=n, rand=lambda: r)
    nominal = min(32.0, 0.5 * 2**n)
    assert d.retry and d.nominal_s == nominal
    assert 0.75 * nominal - 1e-9 <= d.delay_s <= 1.25 * nominal + 1e-9
    assert d.delay_s <= 40.0


def test_RTY_03_cap_off_is_the_uncapped_broken_copy() -> None:
    assert nominal_backoff(10, cap=False) == 256.0 and nominal_backoff(10) == 32.0
    d = _decide(status=429, retries_done=9, cap=False)
    assert d.delay_s == 256.0 and d.nominal_s == 256.0


def test_RTY_04_no_budget_never_gives_up_on_a_retryable_error() -> None:
    d = _decide(status=503, retries_done=500, max_retries=None)
    assert d.retry and d.delay_s == 32.0
    assert not _decide(status=400, retries_done=500, max_retries=None).retry
