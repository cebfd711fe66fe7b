"""RTY checks: each shown passing on good behaviour and failing on a broken one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.checks import FINAL_ON_PARTIAL, run_check
from conformance.judging.evidence import Evidence, is_failed, nominal_backoff
from tests.checks.synth import Journal, cut, turn_end


def backoff_run(statuses: list[int], factors: list[float], final: int = 200) -> Journal:
    j = Journal()
    j.chat(statuses[0])
    for n, (st, f) in enumerate(zip(statuses[1:] + [final], factors, strict=True), start=1):
        j.chat(st, wait=nominal_backoff(n) * f)
    return j


# RTY-01 -------------------------------------------------------------------------------------
def test_rty01_pass_waits_asked_time() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"})
    j.chat(200, wait=2.1)
    assert run_check("RTY-01", j.evidence()).outcome == "pass"


def test_rty01_fail_uses_backoff_instead() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"})
    j.chat(200, wait=0.5)
    f = run_check("RTY-01", j.evidence())
    assert f.outcome == "fail" and "asked 2.000s" in f.observed


def test_rty01_fail_waits_far_too_long() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"})
    j.chat(200, wait=4.0)
    assert run_check("RTY-01", j.evidence()).outcome == "fail"


def test_rty01_fail_not_retried() -> None:
    j = Journal()
    j.chat(429, headers={"Retry-After": "2"})
    assert run_check("RTY-01", j.evidence([turn_end("error")])).outcome == "fail"
    # Cut short while waiting: the retry may still come.
    assert run_check("RTY-01", j.evidence()).outcome == "not_applicable"


def test_rty01_not_applicable_without_header() -> None:
    j = Journal()
    j.chat(200)
    assert run_check("RTY-01", j.evidence()).outcome == "not_applicable"


# RTY-03 -------------------------------------------------------------------------------------
def test_rty03_pass_exponential_with_jitter() -> None:
    j = backoff_run([429] * 5, [0.8, 1.2, 0.9, 1.1, 1.0])
    assert run_check("RTY-03", j.evidence()).outcome == "pass"


def test_rty03_fail_constant_delay() -> None:
    j = Journal()
    j.chat(429)
    for _ in range(5):
        j.chat(429, wait=0.5)
    j.chat(200, wait=0.5)
    f = run_check("RTY-03", j.evidence())
    assert f.outcome == "fail" and "retry 3" in f.observed


def test_rty03_fail_no_cap() -> None:
    # retry 7 nominal is 32 s (cap); an uncapped agent waits 64 s.
    j = backoff_run([429] * 7, [1.0] * 6 + [2.0])
    f = run_check("RTY-03", j.evidence())
    assert f.outcome == "fail" and "retry 7" in f.observed


def test_rty03_cap_respected_passes() -> None:
    j = backoff_run([429] * 8, [1.0] * 8)
    assert run_check("RTY-03", j.evidence()).outcome == "pass"


def _ten_retries(wait_of: Callable[[int], float], final: int = 200) -> Journal:
    """rty-04-burst-of-10's shape: ten 429s, each retried after ``wait_of(n)`` seconds."""
    j = Journal()
    j.chat(429)
    for n in range(1, 11):
        j.chat(429 if n < 10 else final, wait=wait_of(n))
    return j


# Jitter factors a correct agent may draw (both readings of "25 %": up or down, down only).
JITTER = [0.76, 1.24, 0.8, 1.2, 0.99, 0.75, 1.25, 0.9, 1.1, 1.0]
DOWN_ONLY = [0.76, 0.99, 0.8, 0.93, 0.88, 0.75, 1.0, 0.9, 0.81, 0.97]


def test_rty03_the_cap_holds_for_every_one_of_ten_retries() -> None:
    for factors in (JITTER, DOWN_ONLY):
        j = _ten_retries(lambda n, f=factors: min(32.0, 0.5 * 2 ** (n - 1)) * f[n - 1])
        f = run_check("RTY-03", j.evidence())
        assert f.outcome == "pass", f.observed
        assert f.observed.count("nominal 32.0s") == 4  # retries 7 to 10 sit at the cap


def test_rty03_fail_a_copy_without_the_cap() -> None:
    # Uncapped, retry 8 waits 64 s x jitter: at least 48 s, past 1.25 x 32 s plus the slack.
    for factors in (JITTER, DOWN_ONLY):
        j = _ten_retries(lambda n, f=factors: 0.5 * 2 ** (n - 1) * f[n - 1])
        f = run_check("RTY-03", j.evidence())
        assert f.outcome == "fail" and "retry 8" in f.observed, f.observed


def test_rty03_fail_a_cap_too_low_or_too_high() -> None:
    for cap in (16.0, 45.0):
        j = _ten_retries(lambda n, c=cap: min(c, 0.5 * 2 ** (n - 1)))
        assert run_check("RTY-03", j.evidence()).outcome == "fail", cap


def test_rty03_judges_the_eleven_failures_run_before_the_fallback() -> None:
    # rty-04-eleven-failures: 11 streaming 429s, then the one non-streaming request.
    j = _ten_retries(lambda n: min(32.0, 0.5 * 2 ** (n - 1)), final=429)
    j.chat(200, wait=0.01, stream=False)
    f = run_check("RTY-03", j.evidence())
    assert f.outcome == "pass" and "retry 10" in f.observed
    bad = _ten_retries(lambda n: 0.5 * 2 ** (n - 1), final=429)
    bad.chat(200, wait=0.01, stream=False)
    assert run_check("RTY-03", bad.evidence()).outcome == "fail"


# RTY-04 -------------------------------------------------------------------------------------
def test_rty04_pass_survives_ten_failures() -> None:
    j = backoff_run([429] * 10, [1.0] * 10)
    f = run_check("RTY-04", j.evidence())
    assert f.outcome == "pass" and "11 attempts" in f.observed


def test_rty04_pass_stops_after_eleventh_failure() -> None:
    j = backoff_run([429] * 10, [1.0] * 10, final=429)
    assert len(j.entries) == 11
    assert run_check("RTY-04", j.evidence()).outcome == "pass"


def test_rty04_fail_gives_up_early() -> None:
    j = backoff_run([429] * 4, [1.0] * 4, final=429)
    f = run_check("RTY-04", j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "gave up after 5" in f.observed
    assert run_check("RTY-04", j.evidence()).outcome != "fail"  # the 6th may still come


def test_rty04_fail_retries_beyond_budget() -> None:
    j = backoff_run([429] * 12, [1.0] * 12)
    f = run_check("RTY-04", j.evidence())
    assert f.outcome == "fail" and "13 consecutive" in f.observed


def test_rty04_one_attempt_too_many_fails_on_a_run_cut_short() -> None:
    # The 12th attempt is on the wire, still unanswered, and the turn never ended.
    j = backoff_run([429] * 11, [1.0] * 11, final=429)
    ev = j.evidence()
    part = cut(ev, ev.raw_journal["entries"][-1]["t_arrival_ns"] + 1)
    assert part.journal["entries"][-1]["response"] is None
    assert "RTY-04" in FINAL_ON_PARTIAL
    f = run_check("RTY-04", part)
    assert f.outcome == "fail" and "12 consecutive" in f.observed


def test_rty04_counts_per_mode() -> None:
    # 11 streaming failures, then a non-streaming fallback that succeeds: within budget.
    j = backoff_run([503] * 10, [1.0] * 10, final=503)
    j.chat(200, wait=0.1, stream=False)
    assert run_check("RTY-04", j.evidence()).outcome == "pass"


# RTY-05 -------------------------------------------------------------------------------------
def test_rty05_pass_each_server_error() -> None:
    for st in (500, 502, 503, 504, 529):
        j = backoff_run([st, st], [1.0, 1.1])
        assert run_check("RTY-05", j.evidence()).outcome == "pass", st


def test_rty05_fail_not_retried() -> None:
    j = Journal()
    j.chat(529)
    f = run_check("RTY-05", j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "529" in f.observed
    assert run_check("RTY-05", j.evidence()).outcome == "not_applicable"


def test_rty05_fail_immediate_retry() -> None:
    j = Journal()
    j.chat(503)
    j.chat(200, wait=0.0)
    assert run_check("RTY-05", j.evidence()).outcome == "fail"


# RTY-07 -------------------------------------------------------------------------------------
def test_rty07_pass_not_resent() -> None:
    j = Journal()
    j.chat(400)
    assert run_check("RTY-07", j.evidence()).outcome == "pass"


def test_rty07_fail_resent_verbatim() -> None:
    for st in (400, 401, 403, 404, 422):
        j = Journal()
        j.chat(st)
        j.chat(200, wait=0.5)
        f = run_check("RTY-07", j.evidence())
        assert f.outcome == "fail" and str(st) in f.observed


def test_rty07_pass_resent_changed() -> None:
    j = Journal()
    j.chat(400)
    j.chat(200, wait=0.5, body={"model": "m", "stream": True, "messages": [], "max_tokens": 5})
    assert run_check("RTY-07", j.evidence()).outcome == "pass"


# RTY-08 -------------------------------------------------------------------------------------
def test_rty08_pass_ratios_vary() -> None:
    j = backoff_run([429] * 8, [1.0, 1.0, 1.0, 0.8, 1.2, 0.9, 1.1, 1.0])
    assert run_check("RTY-08", j.evidence()).outcome == "pass"


def test_rty08_fail_no_jitter() -> None:
    j = backoff_run([429] * 8, [1.0] * 8)
    assert run_check("RTY-08", j.evidence()).outcome == "fail"


def test_rty08_not_applicable_single_delay() -> None:
    j = backoff_run([429], [1.0])
    assert run_check("RTY-08", j.evidence()).outcome == "not_applicable"


# RTY-12 -------------------------------------------------------------------------------------
def test_rty12_pass_identical() -> None:
    j = backoff_run([429] * 3, [1.0] * 3)
    assert run_check("RTY-12", j.evidence()).outcome == "pass"


def test_rty12_fail_changed_body() -> None:
    j = Journal()
    j.chat(429)
    j.chat(
        200,
        wait=0.5,
        body={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi!"}]},
    )
    f = run_check("RTY-12", j.evidence())
    assert f.outcome == "fail" and "messages" in f.observed


def test_unimplemented_check_is_never_a_pass() -> None:
    j = Journal()
    j.chat(200)
    assert run_check("DBG-03", j.evidence()).outcome == "not_applicable"


# RTY-02 / RTY-13 / RTY-16 -------------------------------------------------------------------
def _dated(j: Journal, seconds_ahead: int) -> None:
    from email.utils import formatdate

    wall = 1_800_000_000.0
    e = j.chat(429, headers={"Retry-After": formatdate(wall + seconds_ahead, usegmt=True)})
    e["response"]["t_wall_headers"] = wall


def test_rty02_pass_http_date() -> None:
    j = Journal()
    _dated(j, 3)
    j.chat(200, wait=3.05)
    assert run_check("RTY-02", j.evidence()).outcome == "pass"


def test_rty02_fail_http_date_ignored() -> None:
    j = Journal()
    _dated(j, 3)
    j.chat(200, wait=0.5)
    f = run_check("RTY-02", j.evidence())
    assert f.outcome == "fail" and "asked 3.000s" in f.observed


def test_rty13_pass_ms_preferred() -> None:
    j = Journal()
    j.chat(429, headers={"retry-after-ms": "1500", "Retry-After": "5"})
    j.chat(200, wait=1.6)
    assert run_check("RTY-13", j.evidence()).outcome == "pass"


def test_rty13_fail_seconds_header_used() -> None:
    j = Journal()
    j.chat(429, headers={"retry-after-ms": "1500", "Retry-After": "5"})
    j.chat(200, wait=5.0)
    assert run_check("RTY-13", j.evidence()).outcome == "fail"


def test_rty16_pass_and_fail() -> None:
    for st in (408, 409):
        good = backoff_run([st, st], [1.0, 0.9])
        assert run_check("RTY-16", good.evidence()).outcome == "pass"
        bad = Journal()
        bad.chat(st)
        assert run_check("RTY-16", bad.evidence([turn_end("error")])).outcome == "fail"


def test_rty06_pass_and_fail() -> None:
    good = Journal()
    good.chat(None, fault="reset_before_headers")
    good.chat(None, fault="reset_before_headers", wait=0.5)
    good.chat(200, wait=1.0)
    assert run_check("RTY-06", good.evidence()).outcome == "pass"
    bad = Journal()
    bad.chat(None, fault="reset_before_headers")
    f = run_check("RTY-06", bad.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "not retried" in f.observed


# RTY-05 / RTY-06 / RTY-16: the budget is part of "the same policy as 429" -----------------------
def _streaming_failures(statuses: list[int | None], fallback: bool = True) -> Journal:
    """Streaming attempts failing with ``statuses`` (correct waits), then the fallback."""
    j = Journal()
    for n, st in enumerate(statuses):
        fault = "reset_before_headers" if st is None else None
        wait = nominal_backoff(n) if n else 0.0
        e = j.chat(st, wait=wait, fault=fault)
        if st is None:  # as the gateway records a reset before headers: no status, ended
            e["response"] = {"status": None, "headers": {}, "end": "reset", "t_end_ns": j._ns(j.t)}
    if fallback:
        j.chat(200, wait=0.01, stream=False)
    return j


POLICY = {
    "RTY-05": [503] * 11,
    "RTY-16": [408] * 6 + [409] * 5,
    "RTY-06": [None] * 11,
}


@pytest.mark.parametrize("cid", sorted(POLICY))
def test_policy_pass_budget_reached_then_fallback(cid: str) -> None:
    f = run_check(cid, _streaming_failures(POLICY[cid]).evidence([turn_end()]))
    assert f.outcome == "pass", f.observed
    assert "retry 10" in f.observed and "up to 10 retries" in f.expected


@pytest.mark.parametrize("cid", sorted(POLICY))
def test_policy_fail_one_attempt_too_many(cid: str) -> None:
    # The 12th streaming attempt meets the last fault step again (the gateway's otherwise).
    statuses = POLICY[cid] + POLICY[cid][-1:]
    f = run_check(cid, _streaming_failures(statuses).evidence([turn_end()]))
    assert f.outcome == "fail" and "12 consecutive attempts" in f.observed, f.observed


@pytest.mark.parametrize("cid", sorted(POLICY))
def test_policy_one_attempt_too_many_fails_on_a_run_cut_short(cid: str) -> None:
    j = _streaming_failures(POLICY[cid] + POLICY[cid][-1:], fallback=False)
    ev = j.evidence()
    part = cut(ev, ev.raw_journal["entries"][-1]["t_arrival_ns"] + 1)  # the 12th in flight
    assert cid in FINAL_ON_PARTIAL
    f = run_check(cid, part)
    assert f.outcome == "fail" and "12 consecutive attempts" in f.observed


@pytest.mark.parametrize("cid", sorted(POLICY))
def test_policy_fail_gives_up_early(cid: str) -> None:
    j = _streaming_failures(POLICY[cid][:5], fallback=False)
    f = run_check(cid, j.evidence([turn_end("error")]))
    assert f.outcome == "fail" and "gave up after 5 attempts" in f.observed
    assert run_check(cid, j.evidence()).outcome != "fail"  # cut short: the 6th may still come
    # Falling back to non-streaming after 5 is giving up on the streaming request too.
    j = _streaming_failures(POLICY[cid][:5])
    assert run_check(cid, j.evidence([turn_end()])).outcome == "fail"


def test_policy_budget_of_another_status_is_not_blamed() -> None:
    # Twelve 429s break RTY-04's budget, not RTY-05's.
    j = _streaming_failures([429] * 12)
    assert run_check("RTY-05", j.evidence([turn_end()])).outcome == "not_applicable"
    assert run_check("RTY-04", j.evidence([turn_end()])).outcome == "fail"


def test_policy_a_user_abort_is_no_giving_up() -> None:
    j = _streaming_failures([503] * 3, fallback=False)
    assert run_check("RTY-05", j.evidence([turn_end("aborted")])).outcome == "pass"


# RTY-06: connections refused for a window (the journal's `refused` record) ----------------------
def _refused_run(window: float, first_after: float | None) -> tuple[Journal, dict]:
    """The port refuses for ``window`` s from t=1; the first request ``first_after`` s after it
    opens (None: never). Returns the journal and its ``refused`` record."""
    j = Journal()
    start = j.t
    j.t = start + window
    listen = j._ns(j.t)
    if first_after is not None:
        j.chat(200, wait=first_after)
    return j, {"port": 1, "seconds": window, "t_start_ns": j._ns(start), "t_listen_ns": listen}


def _refused_evidence(run: tuple[Journal, dict], events: list | None = None) -> Evidence:
    j, refused = run
    journal = {"session": "s", "time_scale": j.scale, "entries": j.entries, "refused": refused}
    return Evidence({"id": "refused"}, journal, events or [], time_scale=j.scale)


def test_rty06_refused_pass_reached_within_one_backoff_of_the_port_opening() -> None:
    f = run_check("RTY-06", _refused_evidence(_refused_run(30, 3.4), [turn_end()]))
    assert f.outcome == "pass" and "3.400 s after the port did" in f.observed


def test_rty06_refused_fail_never_retried_or_gave_up_in_the_window() -> None:
    run = _refused_run(30, None)
    f = run_check("RTY-06", _refused_evidence(run, [turn_end("error")]))
    assert f.outcome == "fail" and "without reaching the gateway" in f.observed
    # Cut short inside the window: the retry may still come.
    assert run_check("RTY-06", _refused_evidence(run)).outcome == "not_applicable"


def test_rty06_refused_fail_waited_longer_than_any_backoff() -> None:
    f = run_check("RTY-06", _refused_evidence(_refused_run(30, 45.0), [turn_end()]))
    assert f.outcome == "fail" and "longer than any backoff wait" in f.observed


def test_rty06_refused_a_window_past_the_budget_allows_giving_up() -> None:
    f = run_check("RTY-06", _refused_evidence(_refused_run(200, None), [turn_end("error")]))
    assert f.outcome == "not_applicable" and "outlasts the retry budget" in f.observed


# RTY-06: request timeouts (the client left while the gateway held the headers back) ----------
TIMEOUT_S = 5.0  # the scenario's config.request_timeout_s


def _timed_out(j: Journal, wait: float) -> dict:
    """An attempt the client gave up after ``TIMEOUT_S`` with no headers, as the gateway
    journals it: no status, ended (``t_end_ns``) when the client left."""
    e = j.chat(200, wait=wait, fault="delay_headers", duration=TIMEOUT_S)
    e["response"].update(status=None, t_headers_ns=None, end="client_gone")
    return e


def _timeout_run(waits: list[float], *, final: bool = True) -> Journal:
    """Timed-out attempts, each after the given wait from the previous one's end; then a
    reply after one more nominal backoff."""
    j = Journal()
    for n, w in enumerate(waits):
        _timed_out(j, w if n else 0.0)
    if final:
        j.chat(200, wait=nominal_backoff(len(waits)))
    return j


def test_rty06_timeout_is_a_failure_ended_when_the_client_left() -> None:
    j = _timeout_run([0.0, 0.5])
    ev = j.evidence([turn_end()])
    first = ev.chat()[0]
    assert is_failed(first) and Evidence.end_ns(first) == first["response"]["t_end_ns"]
    (r1, r2) = ev.retries()
    # Measured from when the client left, not from the attempt's arrival (5 s earlier).
    assert r1.wait == pytest.approx(0.5) and r2.wait == pytest.approx(1.0)


def test_rty06_timeout_pass_retried_with_backoff() -> None:
    f = run_check("RTY-06", _timeout_run([0.0, 0.5 * 1.1]).evidence([turn_end()]))
    assert f.outcome == "pass" and "retry 2: 1.000s" in f.observed


def test_rty06_timeout_fail_retried_at_once() -> None:
    f = run_check("RTY-06", _timeout_run([0.0, 0.01]).evidence([turn_end()]))
    assert f.outcome == "fail" and "retry 1" in f.observed


def test_rty06_timeout_fail_given_up_after_the_first() -> None:
    j = _timeout_run([0.0], final=False)
    assert run_check("RTY-06", j.evidence([turn_end("error")])).outcome == "fail"
    # Cut short while waiting: the retry may still come.
    assert run_check("RTY-06", j.evidence()).outcome == "not_applicable"
