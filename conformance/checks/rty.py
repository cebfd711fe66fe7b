"""Checks for the RTY area (request retry), judged from the gateway journal."""

from __future__ import annotations

from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.jitter import ALPHA, Sample, judge_jitter
from conformance.checks.partial import turn_over
from conformance.checks.wire import answer_of
from conformance.judging.evidence import (
    RETRYABLE_STATUSES,
    Evidence,
    asked_wait,
    is_failed,
    nominal_backoff,
    response_of,
)
from fakes.journal import ChatEntry

__all__ = [
    "JITTER_LOW",
    "JITTER_HIGH",
    "MAX_RETRIES",
    "SERVER_ERRORS",
    "asked_band",
    "asked_core",
    "backoff_band",
    "backoff_core",
    "header",
    "seconds",
    "status_of",
    "widened",
]

# final=True (see registry.py): each FAIL is a retry sent too early, too late, once too often, or
# one that should not have been sent; "never retried" waits for the turn's end. RTY-08 is left
# out: more retries can show the jitter that a few did not. The cases beyond the 429 policy
# (RTY-09, -10, -11, -14, -15) are in rty_cases.py.

# RTY-03's jitter band and backoff, RTY-04's budget: the criteria's own numbers.
_BACKOFF = by_id("RTY-03").numbers
JITTER_LOW = _BACKOFF["jitter_low"]
JITTER_HIGH = _BACKOFF["jitter_high"]
MAX_RETRIES = int(by_id("RTY-04").numbers["retries"])
NON_RETRYABLE = frozenset({400, 401, 403, 404, 422})
SERVER_ERRORS = frozenset({500, 502, 503, 504, 529})


def status_of(entry: ChatEntry) -> int | None:
    return response_of(entry).get("status")


def seconds(x: float) -> str:
    return f"{x:.3f}s"


def off_band(ev: Evidence, wait: float, lo: float, hi: float) -> str:
    """How far a wait (nominal seconds) fell outside [lo, hi], in nominal seconds and in the real
    milliseconds the run measured: "1.283s late (25.7 ms real)"."""
    over = wait - hi if wait > hi else lo - wait
    side = "late" if wait > hi else "early"
    return f"{seconds(over)} {side} ({over * ev.time_scale * 1000:.1f} ms real)"


def backoff_core(n: int) -> tuple[float, float]:
    """RTY-03's band for retry ``n`` without Retry-After: its nominal backoff x the jitter."""
    nom = nominal_backoff(n)
    return nom * JITTER_LOW, nom * JITTER_HIGH


def asked_core(asked_s: float) -> tuple[float, float]:
    """RTY-01/02/13's band after a server-asked wait: the wait, up to a quarter more."""
    return asked_s, asked_s * JITTER_HIGH


def widened(
    ev: Evidence, core: tuple[float, float], after: ChatEntry | None = None
) -> tuple[float, float]:
    """A band as judged: widened by the scheduling slack, early and late (early, by the slack
    after the failed attempt ``after``: ``Evidence.slack_after``)."""
    return core[0] - ev.slack_after(after), core[1] + ev.late_slack


def backoff_band(ev: Evidence, n: int, after: ChatEntry | None = None) -> tuple[float, float]:
    """The nominal seconds retry ``n`` may wait without Retry-After, as RTY-03 judges it."""
    return widened(ev, backoff_core(n), after)


def asked_band(ev: Evidence, asked_s: float, after: ChatEntry | None = None) -> tuple[float, float]:
    """The nominal seconds the attempt after a server-asked wait may wait, as judged."""
    return widened(ev, asked_core(asked_s), after)


def _backoff(ev: Evidence, statuses: frozenset[int | None], label: str) -> Finding:
    """Every retry after a failure with one of ``statuses`` and no Retry-After waited within the
    jitter band of its nominal backoff delay."""
    expected = (
        f"after {label} without Retry-After, retry n waits "
        f"min({_BACKOFF['cap_s']:g}, {_BACKOFF['base_s']:g}*2^(n-1)) s "
        f"x [{JITTER_LOW}, {JITTER_HIGH}] (slack {seconds(ev.slack)} early, "
        f"{seconds(ev.late_slack)} late)"
    )
    judged = []
    for r in ev.retries():
        if status_of(r.failed) not in statuses or asked_wait(r.failed) is not None:
            continue
        nom = nominal_backoff(r.n)
        lo, hi = backoff_band(ev, r.n, r.failed)
        judged.append(f"retry {r.n}: {seconds(r.wait)} (nominal {nom}s)")
        if not lo <= r.wait <= hi:
            return failed(
                expected,
                f"retry {r.n} after {answer_of(r.failed)} waited {seconds(r.wait)}, "
                f"outside [{seconds(lo)}, {seconds(hi)}]: {off_band(ev, r.wait, lo, hi)}",
            )
    if not judged:
        return _unretried(ev, statuses, expected)
    return passed(expected, "; ".join(judged))


def label_of(statuses: frozenset[int | None]) -> str:
    return ", ".join("no status" if x is None else str(x) for x in sorted(statuses, key=str))


def _unretried(ev: Evidence, statuses: frozenset[int | None], expected: str) -> Finding:
    """No retry followed a matching failure: a fail if such a failure was seen, else n/a."""
    seen = [e for e in ev.chat() if status_of(e) in statuses and asked_wait(e) is None]
    if seen and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the retry may still come")
    if seen:
        s = status_of(seen[0])
        what = "a failure with no status" if s is None else f"status {s}"
        return failed(
            expected, f"{what} (seq {seen[0].get('seq')}) was not retried in the same mode"
        )
    return not_applicable(
        expected, f"no failure ({label_of(statuses)}) without Retry-After in this run"
    )


def _honoured(ev: Evidence, kind: str, label: str) -> Finding:
    """After a response asking a wait through ``kind``, the next attempt honours it."""
    expected = f"after {label} asking S s, the next attempt arrives within [S - slack, 1.25*S + late slack]"
    judged = []
    for r in ev.retries():
        asked = asked_wait(r.failed)
        if asked is None or asked[1] != kind:
            continue
        s = asked[0]
        lo, hi = asked_band(ev, s, r.failed)
        judged.append(f"asked {s:.3f}s, waited {seconds(r.wait)}")
        if not lo <= r.wait <= hi:
            return failed(
                expected,
                f"asked {s:.3f}s, waited {seconds(r.wait)}, outside [{seconds(lo)}, {seconds(hi)}]"
                f": {off_band(ev, r.wait, lo, hi)}",
            )
    if judged:
        return passed(expected, "; ".join(judged))
    asked_seen = [e for e in ev.chat() if (a := asked_wait(e)) and a[1] == kind]
    if asked_seen and turn_over(ev):
        return failed(expected, f"seq {asked_seen[0].get('seq')} asked a wait; no retry followed")
    return not_applicable(expected, f"no response with {label} in this run")


@check("RTY-01", final=True)
def check_rty_01(ev: Evidence) -> Finding:
    """429 with Retry-After seconds: the next attempt waits the asked time, not the backoff."""
    return _honoured(ev, "retry-after", "Retry-After in seconds")


@check("RTY-02", final=True)
def check_rty_02(ev: Evidence) -> Finding:
    """Retry-After as an HTTP-date is honoured."""
    return _honoured(ev, "retry-after-date", "Retry-After as an HTTP-date")


@check("RTY-13", final=True)
def check_rty_13(ev: Evidence) -> Finding:
    """retry-after-ms is honoured (and, when both are sent, preferred)."""
    return _honoured(ev, "retry-after-ms", "retry-after-ms")


def _policy(ev: Evidence, statuses: frozenset[int | None], label: str) -> Finding:
    """The 429 policy applied to other failures: the backoff waits of RTY-03 and the retry
    budget of RTY-04 (up to 10 retries of one request per mode, never more)."""
    found = _backoff(ev, statuses, label)
    expected = f"{found.expected}; {BUDGET_RULE}"
    breach = _budget(ev, statuses, label)
    if found.outcome == "fail" or breach is None:
        return Finding(found.outcome, expected, found.observed)
    return failed(expected, breach)


BUDGET_RULE = f"up to {MAX_RETRIES} retries of one request per mode, never more"


def _budget(ev: Evidence, statuses: frozenset[int | None], label: str) -> str | None:
    """What breaks the retry budget after failures with one of ``statuses``, or None.

    One attempt too many shows at once; giving up early only once the turn ended (not by a
    user abort), on a failure that asked for no wait and did not forbid the retry.
    """
    ended = turn_over(ev) and ev.turn_ends()[-1].get("reason") != "aborted"
    for stream in (True, False):
        mode = "stream" if stream else "non-stream"
        for run in ev.runs(stream):
            # Attempts that were retried; the last one may still be in flight.
            retried = [e for e in run[:-1] if status_of(e) in statuses]
            if retried and len(run) > MAX_RETRIES + 1:
                return (
                    f"{mode}: {len(run)} consecutive attempts of one request after {label} "
                    f"(first at seq {retried[0].get('seq')}): {MAX_RETRIES + 1} is the limit"
                )
            last = run[-1]
            if (
                ended
                and last.get("response")
                and is_failed(last)
                and status_of(last) in statuses
                and asked_wait(last) is None
                and header(last, "x-should-retry") is None
                and len(run) < MAX_RETRIES + 1
            ):
                return (
                    f"{mode}: gave up after {len(run)} attempts (last: {answer_of(last)}, "
                    f"seq {last.get('seq')}): the policy retries {MAX_RETRIES} times"
                )
    return None


# A correct agent is still retrying this long after its first attempt (the earliest its 10
# retries can end), and never waits longer than this between two attempts (the capped top).
_BUDGET_LOW = JITTER_LOW * sum(nominal_backoff(n) for n in range(1, MAX_RETRIES + 1))
_LONGEST_WAIT = JITTER_HIGH * nominal_backoff(MAX_RETRIES)


def _refused(ev: Evidence) -> Finding | None:
    """Connection refused for a window (the journal's ``refused`` record), or None.

    Refused attempts never reach the gateway, so the wire shows only the first attempt after
    the port started listening. A correct agent, whose budget outlasts a short window, reaches
    the gateway within one backoff wait of the port opening; one that never reaches it gave up
    on a retryable failure (or never retried it); one that comes much later waited longer than
    any backoff allows.
    """
    rec = ev.journal.get("refused")
    if not isinstance(rec, dict) or rec.get("t_start_ns") is None:
        return None
    window = float(rec.get("seconds") or 0)
    expected = (
        f"connections refused for {window:g} s are retried with the 429 policy: the agent "
        f"reaches the gateway within {_LONGEST_WAIT:g} s (the longest backoff wait, late slack "
        f"{ev.late_slack:.3f} s) of the port opening"
    )
    chat = ev.chat()
    if not chat:
        if not turn_over(ev):
            return not_applicable(expected, "the turn has not ended: the retry may still come")
        if window >= _BUDGET_LOW:
            return not_applicable(
                expected, f"a {window:g} s window outlasts the retry budget: giving up is right"
            )
        return failed(
            expected,
            f"the turn ended without reaching the gateway: connections were refused for "
            f"{window:g} s, less than the {_BUDGET_LOW:g} s a budget of {MAX_RETRIES} retries "
            "lasts at the least",
        )
    listen = rec.get("t_listen_ns")
    first = chat[0]
    if listen is None:  # the gateway journaled it, so the port was listening; keep it safe
        return not_applicable(expected, "the journal does not say when the port opened")
    after = (int(first["t_arrival_ns"]) - int(listen)) / 1e9 / ev.time_scale
    since = (int(first["t_arrival_ns"]) - int(rec["t_start_ns"])) / 1e9 / ev.time_scale
    if after > _LONGEST_WAIT + ev.late_slack:
        return failed(
            expected,
            f"the first request (seq {first.get('seq')}) came {after:.3f} s after the port "
            f"opened: longer than any backoff wait",
        )
    return passed(
        expected,
        f"refused for {window:g} s; the first request (seq {first.get('seq')}) came "
        f"{since:.3f} s after the window opened, {after:.3f} s after the port did",
    )


@check("RTY-06", final=True)
def check_rty_06(ev: Evidence) -> Finding:
    """Connection failures before headers (a reset: no status recorded; or connections
    refused for a while): the 429 policy."""
    found = _policy(ev, frozenset({None}), "a connection failure before headers")
    refused = _refused(ev)
    if refused is None or found.outcome == "fail":
        return found
    if refused.outcome == "fail" or found.outcome == "not_applicable":
        return refused
    return Finding(
        found.outcome,
        f"{found.expected}; {refused.expected}",
        f"{found.observed}; {refused.observed}",
    )


@check("RTY-16", final=True)
def check_rty_16(ev: Evidence) -> Finding:
    """408 and 409: the 429 policy."""
    return _policy(ev, frozenset({408, 409}), "408/409")


@check("RTY-03", final=True)
def check_rty_03(ev: Evidence) -> Finding:
    """429 without Retry-After: every retry's wait, the 32 s cap included (the budget is
    RTY-04's)."""
    return _backoff(ev, frozenset({429}), "429")


@check("RTY-05", final=True)
def check_rty_05(ev: Evidence) -> Finding:
    """5xx: the 429 policy."""
    return _policy(ev, SERVER_ERRORS, "5xx (500/502/503/504/529)")


@check("RTY-04", final=True)
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
            retryable = status_of(last) in RETRYABLE_STATUSES or not last.get("response")
            # Giving up shows only once the turn ended; more attempts show at once.
            gave_up = is_failed(last) and retryable and len(run) < MAX_RETRIES + 1
            if gave_up and turn_over(ev):
                return failed(
                    expected,
                    f"{mode}: gave up after {len(run)} attempts "
                    f"(last: {answer_of(last)}, seq {last.get('seq')})",
                )
            notes.append(f"{mode}: {len(run)} attempts, {failures} failed")
    if not notes:
        return not_applicable(expected, "no failed attempt in this run")
    return passed(expected, "; ".join(notes))


@check("RTY-07", final=True)
def check_rty_07(ev: Evidence) -> Finding:
    """Non-retryable 4xx never followed by the identical request."""
    expected = f"statuses {listed(sorted(NON_RETRYABLE))} are never resent with an identical body"
    chat = ev.chat()
    seen = []
    for i, e in enumerate(chat):
        if status_of(e) not in NON_RETRYABLE:
            continue
        seen.append(f"{answer_of(e)} at seq {e.get('seq')}")
        for later in chat[i + 1 :]:
            if later.get("body") == e.get("body"):
                return failed(
                    expected,
                    f"{answer_of(e)} (seq {e.get('seq')}) resent verbatim "
                    f"at seq {later.get('seq')}",
                )
    if not seen:
        return not_applicable(expected, "no non-retryable 4xx in this run")
    return passed(expected, "not resent verbatim: " + ", ".join(seen))


# RTY-08 compares ratios with the measured noise on the late side and this much on the early
# side: a measured wait comes out shorter than the agent's only when the gateway is kept from
# stamping a response's end right after its last byte went out (up to 0.6 ms seen on a 2-core
# machine at load 12); the wider early slack of the other checks is kept for their bands.
JITTER_EARLY_S = 0.002


@check("RTY-08")
def check_rty_08(ev: Evidence) -> Finding:
    """Jitter is real: a statistical test of the observed/nominal backoff ratios against the
    measured timing noise (conformance.checks.jitter)."""
    noise = ev.timing.noise_s
    expected = (
        f"backoff delays differ from their nominal values by differing ratios (told from the "
        f"timing noise, {noise * 1000:.1f} ms measured; a FAIL errs for a "
        f"{(JITTER_HIGH - JITTER_LOW) / 2:.0%} jitter with probability <= {ALPHA:g})"
    )
    samples = []
    for r in ev.retries():
        if asked_wait(r.failed) is not None or status_of(r.failed) not in RETRYABLE_STATUSES:
            continue
        real = nominal_backoff(r.n) * ev.time_scale
        samples.append(Sample(r.wait / nominal_backoff(r.n), noise / real, JITTER_EARLY_S / real))
    if len(samples) < 2:
        return not_applicable(expected, f"{len(samples)} backoff delay(s) observed; need 2")
    found = judge_jitter(samples, JITTER_LOW, JITTER_HIGH)
    ratios = ", ".join(f"{s.ratio:.3f}" for s in samples)
    if found.outcome == "fail":
        return failed(
            expected,
            f"ratios {ratios}: {found.cluster} of the {found.informative} long enough to tell "
            f"agree within the noise; {found.needed} or more agree for a jittering agent with "
            f"probability <= {found.bound:.1g}",
        )
    if found.outcome == "pass":
        return passed(expected, f"ratios {ratios} differ beyond the noise")
    return not_applicable(
        expected,
        f"timing too coarse to tell jitter from noise: ratios {ratios} ({found.informative} "
        f"waits long enough to tell, at time scale {ev.time_scale:g})",
    )


def _diff_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


@check("RTY-12", final=True)
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
                f"in {listed(_diff_keys(a, b), quoted=True)}",
            )
    return passed(expected, f"{len(retries)} retries, all identical")


def header(entry: ChatEntry, name: str) -> str | None:
    for k, v in (response_of(entry).get("headers") or {}).items():
        if k.lower() == name:
            return str(v)
    return None
