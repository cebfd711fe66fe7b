"""Checks for the RTY area (request retry), judged from the gateway journal."""

from __future__ import annotations

from collections.abc import Callable

from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.evidence import (
    RETRYABLE_STATUSES,
    Evidence,
    asked_wait,
    is_failed,
    nominal_backoff,
)

__all__ = ["CHECKS", "JITTER_LOW", "JITTER_HIGH", "MAX_RETRIES"]

JITTER_LOW = 0.75
JITTER_HIGH = 1.25
MAX_RETRIES = 10
NON_RETRYABLE = frozenset({400, 401, 403, 404, 422})
SERVER_ERRORS = frozenset({500, 502, 503, 504, 529})


def _status(entry: dict) -> int | None:
    return (entry.get("response") or {}).get("status")


def _fmt(x: float) -> str:
    return f"{x:.3f}s"


def _backoff(ev: Evidence, statuses: frozenset[int | None], label: str) -> Finding:
    """Every retry after a failure with one of ``statuses`` and no Retry-After waited within the
    jitter band of its nominal backoff delay."""
    expected = (
        f"after {label} without Retry-After, retry n waits min(32, 0.5*2^(n-1)) s "
        f"x [{JITTER_LOW}, {JITTER_HIGH}] (+/- {_fmt(ev.slack)} slack)"
    )
    judged = []
    for r in ev.retries():
        if _status(r.failed) not in statuses or asked_wait(r.failed) is not None:
            continue
        nom = nominal_backoff(r.n)
        lo, hi = nom * JITTER_LOW - ev.slack, nom * JITTER_HIGH + ev.slack
        judged.append(f"retry {r.n}: {_fmt(r.wait)} (nominal {nom}s)")
        if not lo <= r.wait <= hi:
            return failed(
                expected,
                f"retry {r.n} after status {_status(r.failed)} waited {_fmt(r.wait)}, "
                f"outside [{_fmt(lo)}, {_fmt(hi)}]",
            )
    if not judged:
        return _unretried(ev, statuses, expected)
    return passed(expected, "; ".join(judged))


def label_of(statuses: frozenset[int | None]) -> str:
    return ", ".join("no status" if x is None else str(x) for x in sorted(statuses, key=str))


def _unretried(ev: Evidence, statuses: frozenset[int | None], expected: str) -> Finding:
    """No retry followed a matching failure: a fail if such a failure was seen, else n/a."""
    seen = [e for e in ev.chat() if _status(e) in statuses and asked_wait(e) is None]
    if seen:
        return failed(
            expected,
            f"status {_status(seen[0])} (seq {seen[0].get('seq')}) was not retried in the same mode",
        )
    return not_applicable(expected, f"no {label_of(statuses)} failure without Retry-After in run")


def _honoured(ev: Evidence, kind: str, label: str) -> Finding:
    """After a response asking a wait through ``kind``, the next attempt honours it."""
    expected = (
        f"after {label} asking S s, the next attempt arrives within [S - slack, 1.25*S + slack]"
    )
    judged = []
    for r in ev.retries():
        asked = asked_wait(r.failed)
        if asked is None or asked[1] != kind:
            continue
        s = asked[0]
        lo, hi = s - ev.slack, s * JITTER_HIGH + ev.slack
        judged.append(f"asked {s:.3f}s, waited {_fmt(r.wait)}")
        if not lo <= r.wait <= hi:
            return failed(
                expected,
                f"asked {s:.3f}s, waited {_fmt(r.wait)}, outside [{_fmt(lo)}, {_fmt(hi)}]",
            )
    if judged:
        return passed(expected, "; ".join(judged))
    asked_seen = [e for e in ev.chat() if (a := asked_wait(e)) and a[1] == kind]
    if asked_seen:
        return failed(expected, f"seq {asked_seen[0].get('seq')} asked a wait; no retry followed")
    return not_applicable(expected, f"no response with {label} in this run")


def check_rty_01(ev: Evidence) -> Finding:
    """429 with Retry-After seconds: the next attempt waits the asked time, not the backoff."""
    return _honoured(ev, "retry-after", "Retry-After in seconds")


def check_rty_02(ev: Evidence) -> Finding:
    """Retry-After as an HTTP-date is honoured."""
    return _honoured(ev, "retry-after-date", "Retry-After as an HTTP-date")


def check_rty_13(ev: Evidence) -> Finding:
    """retry-after-ms is honoured (and, when both are sent, preferred)."""
    return _honoured(ev, "retry-after-ms", "retry-after-ms")


def check_rty_06(ev: Evidence) -> Finding:
    """Connection failures before headers (no status recorded) back off like 429."""
    return _backoff(ev, frozenset({None}), "a connection failure before headers")


def check_rty_16(ev: Evidence) -> Finding:
    return _backoff(ev, frozenset({408, 409}), "408/409")


def check_rty_03(ev: Evidence) -> Finding:
    return _backoff(ev, frozenset({429}), "429")


def check_rty_05(ev: Evidence) -> Finding:
    return _backoff(ev, SERVER_ERRORS, "5xx (500/502/503/504/529)")


def check_rty_04(ev: Evidence) -> Finding:
    """Up to 10 retries per request and mode: never more, and never giving up earlier."""
    expected = (
        f"per request mode, a retryable failure is retried until {MAX_RETRIES} retries "
        f"({MAX_RETRIES + 1} attempts) and never beyond"
    )
    notes = []
    for stream in (True, False):
        mode = "stream" if stream else "non-stream"
        for run in ev.runs(stream):
            failures = sum(1 for e in run if is_failed(e))
            if failures == 0:
                continue
            if len(run) > MAX_RETRIES + 1:
                return failed(expected, f"{mode}: {len(run)} consecutive attempts of one request")
            last = run[-1]
            retryable = _status(last) in RETRYABLE_STATUSES or not last.get("response")
            if is_failed(last) and retryable and len(run) < MAX_RETRIES + 1:
                return failed(
                    expected,
                    f"{mode}: gave up after {len(run)} attempts "
                    f"(last status {_status(last)}, seq {last.get('seq')})",
                )
            notes.append(f"{mode}: {len(run)} attempts, {failures} failed")
    if not notes:
        return not_applicable(expected, "no failed attempt in this run")
    return passed(expected, "; ".join(notes))


def check_rty_07(ev: Evidence) -> Finding:
    """Non-retryable 4xx never followed by the identical request."""
    expected = f"statuses {sorted(NON_RETRYABLE)} are never resent with an identical body"
    chat = ev.chat()
    seen = []
    for i, e in enumerate(chat):
        if _status(e) not in NON_RETRYABLE:
            continue
        seen.append(f"{_status(e)} at seq {e.get('seq')}")
        for later in chat[i + 1 :]:
            if later.get("body") == e.get("body"):
                return failed(
                    expected,
                    f"status {_status(e)} (seq {e.get('seq')}) resent verbatim "
                    f"at seq {later.get('seq')}",
                )
    if not seen:
        return not_applicable(expected, "no non-retryable 4xx in this run")
    return passed(expected, "not resent verbatim: " + ", ".join(seen))


def check_rty_08(ev: Evidence) -> Finding:
    """Jitter is real: observed/nominal backoff ratios are not all equal beyond timing noise."""
    expected = "backoff delays differ from their nominal values by differing ratios"
    samples = []
    for r in ev.retries():
        if asked_wait(r.failed) is not None or _status(r.failed) not in RETRYABLE_STATUSES:
            continue
        nom = nominal_backoff(r.n)
        samples.append((r.wait / nom, ev.slack / nom))
    if len(samples) < 2:
        return not_applicable(expected, f"{len(samples)} backoff delay(s) observed; need 2")
    resolvable = False
    for i in range(len(samples)):
        for j in range(i + 1, len(samples)):
            (a, sa), (b, sb) = samples[i], samples[j]
            noise = sa + sb
            if abs(a - b) > noise:
                return passed(expected, f"ratios {a:.3f} and {b:.3f} differ beyond noise")
            if noise < 0.25:
                resolvable = True
    ratios = ", ".join(f"{a:.3f}" for a, _ in samples)
    if resolvable:
        return failed(expected, f"ratios all equal within timing noise: {ratios}")
    return not_applicable(expected, f"timing too coarse to tell jitter from noise: {ratios}")


def _diff_keys(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def check_rty_12(ev: Evidence) -> Finding:
    """Every retry carries exactly the body of the failed attempt."""
    expected = "each retry's body equals the failed attempt's body"
    retries = ev.retries()
    if not retries:
        return not_applicable(expected, "no retry in this run")
    for r in retries:
        a, b = r.failed.get("body") or {}, r.attempt.get("body") or {}
        if a != b:
            return failed(
                expected,
                f"retry at seq {r.attempt.get('seq')} differs from seq {r.failed.get('seq')} "
                f"in {_diff_keys(a, b)}",
            )
    return passed(expected, f"{len(retries)} retries, all identical")


CHECKS: dict[str, Callable[[Evidence], Finding]] = {
    "RTY-01": check_rty_01,
    "RTY-03": check_rty_03,
    "RTY-04": check_rty_04,
    "RTY-05": check_rty_05,
    "RTY-07": check_rty_07,
    "RTY-08": check_rty_08,
    "RTY-12": check_rty_12,
    "RTY-02": check_rty_02,
    "RTY-13": check_rty_13,
    "RTY-16": check_rty_16,
    "RTY-06": check_rty_06,
}
