"""Checks for the RTY area (request retry), judged from the gateway journal."""

from __future__ import annotations

import re
from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.evidence import (
    RETRYABLE_STATUSES,
    Evidence,
    asked_wait,
    is_failed,
    nominal_backoff,
    response_of,
)
from fakes.journal import ChatEntry

__all__ = ["JITTER_LOW", "JITTER_HIGH", "MAX_RETRIES"]

# final=True (see registry.py): each FAIL is a retry sent too early, too late, once too often, or
# one that should not have been sent; "never retried" waits for the turn's end. RTY-08 is left
# out: more retries can show the jitter that a few did not.

# RTY-03's jitter band and backoff, RTY-04's budget: the criteria's own numbers.
_BACKOFF = by_id("RTY-03").numbers
JITTER_LOW = _BACKOFF["jitter_low"]
JITTER_HIGH = _BACKOFF["jitter_high"]
MAX_RETRIES = int(by_id("RTY-04").numbers["retries"])
NON_RETRYABLE = frozenset({400, 401, 403, 404, 422})
SERVER_ERRORS = frozenset({500, 502, 503, 504, 529})


def _status(entry: ChatEntry) -> int | None:
    return response_of(entry).get("status")


def _fmt(x: float) -> str:
    return f"{x:.3f}s"


def _backoff(ev: Evidence, statuses: frozenset[int | None], label: str) -> Finding:
    """Every retry after a failure with one of ``statuses`` and no Retry-After waited within the
    jitter band of its nominal backoff delay."""
    expected = (
        f"after {label} without Retry-After, retry n waits "
        f"min({_BACKOFF['cap_s']:g}, {_BACKOFF['base_s']:g}*2^(n-1)) s "
        f"x [{JITTER_LOW}, {JITTER_HIGH}] (slack {_fmt(ev.slack)} early, "
        f"{_fmt(ev.late_slack)} late)"
    )
    judged = []
    for r in ev.retries():
        if _status(r.failed) not in statuses or asked_wait(r.failed) is not None:
            continue
        nom = nominal_backoff(r.n)
        lo, hi = nom * JITTER_LOW - ev.slack, nom * JITTER_HIGH + ev.late_slack
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
    if seen and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the retry may still come")
    if seen:
        return failed(
            expected,
            f"status {_status(seen[0])} (seq {seen[0].get('seq')}) was not retried in the same mode",
        )
    return not_applicable(expected, f"no {label_of(statuses)} failure without Retry-After in run")


def _honoured(ev: Evidence, kind: str, label: str) -> Finding:
    """After a response asking a wait through ``kind``, the next attempt honours it."""
    expected = f"after {label} asking S s, the next attempt arrives within [S - slack, 1.25*S + late slack]"
    judged = []
    for r in ev.retries():
        asked = asked_wait(r.failed)
        if asked is None or asked[1] != kind:
            continue
        s = asked[0]
        lo, hi = s - ev.slack, s * JITTER_HIGH + ev.late_slack
        judged.append(f"asked {s:.3f}s, waited {_fmt(r.wait)}")
        if not lo <= r.wait <= hi:
            return failed(
                expected,
                f"asked {s:.3f}s, waited {_fmt(r.wait)}, outside [{_fmt(lo)}, {_fmt(hi)}]",
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
            retried = [e for e in run[:-1] if _status(e) in statuses]
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
                and _status(last) in statuses
                and asked_wait(last) is None
                and _hdr(last, "x-should-retry") is None
                and len(run) < MAX_RETRIES + 1
            ):
                return (
                    f"{mode}: gave up after {len(run)} attempts (last status {_status(last)}, "
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
            retryable = _status(last) in RETRYABLE_STATUSES or not last.get("response")
            # Giving up shows only once the turn ended; more attempts show at once.
            gave_up = is_failed(last) and retryable and len(run) < MAX_RETRIES + 1
            if gave_up and turn_over(ev):
                return failed(
                    expected,
                    f"{mode}: gave up after {len(run)} attempts "
                    f"(last status {_status(last)}, seq {last.get('seq')})",
                )
            notes.append(f"{mode}: {len(run)} attempts, {failures} failed")
    if not notes:
        return not_applicable(expected, "no failed attempt in this run")
    return passed(expected, "; ".join(notes))


@check("RTY-07", final=True)
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


@check("RTY-08")
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
                f"in {_diff_keys(a, b)}",
            )
    return passed(expected, f"{len(retries)} retries, all identical")


# --- RTY-09, -10, -11, -14, -15 ---------------------------------------------------------------
def _messages(entry: ChatEntry) -> list[Any]:
    return (entry.get("body") or {}).get("messages") or []


def _all_text(entry: ChatEntry) -> str:
    out: list[str] = []
    for m in _messages(entry):
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            out.extend(str(p.get("text", "")) for p in c if isinstance(p, dict))
        elif c:
            out.append(str(c))
    return "\n".join(out)


def _sent(entry: ChatEntry) -> str:
    return response_of(entry).get("sent") or ""


def _hdr(entry: ChatEntry, name: str) -> str | None:
    for k, v in (response_of(entry).get("headers") or {}).items():
        if k.lower() == name:
            return str(v)
    return None


def background(entry: ChatEntry) -> bool:
    """An auxiliary title request, as the contract shapes it: non-streaming, no tools, and
    messages that mention a title."""
    body = entry.get("body") or {}
    return (
        body.get("stream") is False
        and not body.get("tools")
        and "title" in _all_text(entry).lower()
    )


@check("RTY-09", final=True)
def check_rty_09(ev: Evidence) -> Finding:
    """A background (title) request that gets 429 or 529 is not retried."""
    expected = "a background request answered 429 or 529 is never sent again"
    chat = ev.chat()
    judged = []
    for i, e in enumerate(chat):
        if not background(e) or _status(e) not in (429, 529):
            continue
        again = [x for x in chat[i + 1 :] if x.get("body") == e.get("body")]
        if again:
            return failed(
                expected,
                f"background request seq {e.get('seq')} ({_status(e)}) resent at seq "
                f"{again[0].get('seq')} after {_fmt(ev.gap(e, again[0]))}",
            )
        judged.append(f"{_status(e)} at seq {e.get('seq')} not retried")
    if not judged:
        seen = sum(1 for e in chat if background(e))
        return not_applicable(
            expected, f"{seen} background request(s), none answered 429/529 in this run"
        )
    return passed(expected, "; ".join(judged))


def expired_401(entry: ChatEntry) -> bool:
    """A 401 whose error says the credentials expired (not merely invalid)."""
    return _status(entry) == 401 and "expired" in _sent(entry).lower()


@check("RTY-10", final=True)
def check_rty_10(ev: Evidence) -> Finding:
    """A 401 for expired credentials is retried exactly once (after a refresh): one identical
    resend, and none after a second expired 401. The refreshed credential itself is not
    visible: the journal redacts authorization headers."""
    expected = "after a 401 for expired credentials, exactly one retry of the same request"
    chat = ev.chat()
    i = next((k for k, e in enumerate(chat) if expired_401(e)), None)
    if i is None:
        return not_applicable(expected, "no 401 for expired credentials in this run")
    same = [chat[i]]
    for e in chat[i + 1 :]:
        if e.get("body") != chat[i].get("body"):
            break
        same.append(e)
    after_401 = [b for a, b in zip(same, same[1:], strict=False) if expired_401(a)]
    if not after_401 and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the retry may still come")
    if not after_401:
        return failed(expected, f"the 401 at seq {chat[i].get('seq')} was never retried")
    if len(after_401) > 1:
        return failed(
            expected,
            f"{len(after_401)} retries after expired-credential 401s "
            f"(seqs {[e.get('seq') for e in after_401]}): refresh-and-retry must happen once",
        )
    r = after_401[0]
    return passed(expected, f"one retry at seq {r.get('seq')}, answered {_status(r)}")


_OAI_WINDOW = re.compile(r"maximum context length is (\d+)", re.I)
_OAI_INPUT = re.compile(r"(\d+) in the messages", re.I)
_ANT_SUM = re.compile(r"(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")


def overflow(entry: ChatEntry) -> tuple[int, int] | None:
    """(window, input tokens) from a 400 saying input plus maximum output exceed the window,
    in OpenAI's wording or in Anthropic's ("input length and max_tokens exceed context limit:
    a + b > c"); None when the input alone does not fit or the reply says neither."""
    if _status(entry) != 400:
        return None
    text = _sent(entry)
    w, n = _OAI_WINDOW.search(text), _OAI_INPUT.search(text)
    if w and n:
        window, used = int(w.group(1)), int(n.group(1))
    elif (m := _ANT_SUM.search(text)) and "max_tokens" in text:
        window, used = int(m.group(3)), int(m.group(1))
    else:
        return None
    return (window, used) if used < window else None


def _out_limit(entry: ChatEntry) -> int | None:
    body = entry.get("body") or {}
    v = body.get("max_tokens", body.get("max_completion_tokens"))
    return v if isinstance(v, int) else None


@check("RTY-11", final=True)
def check_rty_11(ev: Evidence) -> Finding:
    """Input + max output over the window: the same messages are resent with a maximum output
    lowered to fit (at most window - input)."""
    expected = (
        "after a 400 saying input + max output exceed the window, the same messages are resent "
        "with a max output of at most window - input"
    )
    chat = ev.chat()
    judged = []
    for i, e in enumerate(chat):
        o = overflow(e)
        if o is None:
            continue
        window, used = o
        nxt = next((x for x in chat[i + 1 :] if _messages(x) == _messages(e)), None)
        if nxt is None and not turn_over(ev):
            continue  # the corrected request may still come
        if nxt is None:
            return failed(expected, f"the overflow at seq {e.get('seq')} was never corrected")
        before, after = _out_limit(e), _out_limit(nxt)
        if after is None or after > window - used or (before is not None and after >= before):
            return failed(
                expected,
                f"seq {nxt.get('seq')} resent with max output {after} (was {before}; window "
                f"{window}, input {used}, room {window - used})",
            )
        judged.append(f"{before} -> {after} (room {window - used}) at seq {nxt.get('seq')}")
    if not judged:
        return not_applicable(expected, "no input + max-output overflow 400 in this run")
    return passed(expected, "; ".join(judged))


# Asked waits above this are excessive; a capped retry may wait at most this long.
EXCESSIVE_WAIT_S = 300.0


@check("RTY-14", final=True)
def check_rty_14(ev: Evidence) -> Finding:
    """An excessive server-asked wait is not slept: the error surfaces, or the retry comes
    after a bounded wait (at most EXCESSIVE_WAIT_S and less than half the asked wait)."""
    expected = (
        f"after a wait of more than {EXCESSIVE_WAIT_S:g} s was asked, either no retry and an "
        f"error shown, or a retry within min({EXCESSIVE_WAIT_S:g} s, asked/2)"
    )
    chat = ev.chat()
    judged = []
    for i, e in enumerate(chat):
        asked = asked_wait(e)
        if asked is None or asked[0] <= EXCESSIVE_WAIT_S:
            continue
        s = asked[0]
        nxt = next((x for x in chat[i + 1 :] if _messages(x) == _messages(e)), None)
        if nxt is not None:
            wait = ev.gap(e, nxt)
            bound = min(EXCESSIVE_WAIT_S, s / 2) + ev.slack
            if wait > bound:
                return failed(expected, f"asked {s:g}s via {asked[1]}, waited {_fmt(wait)}")
            judged.append(f"asked {s:g}s, retried after {_fmt(wait)}")
            continue
        if not ev.errors() and not turn_over(ev):
            continue  # neither the retry nor the error has come yet
        if not ev.errors():
            ends = [t.get("reason") for t in ev.turn_ends()]
            return failed(
                expected,
                f"asked {s:g}s at seq {e.get('seq')}: no retry and no error shown "
                f"(turn_end: {ends or 'none'})",
            )
        judged.append(f"asked {s:g}s, surfaced: {ev.errors()[0].get('message', '')[:100]!r}")
    if not judged:
        return not_applicable(expected, f"no wait above {EXCESSIVE_WAIT_S:g} s asked in this run")
    return passed(expected, "; ".join(judged))


@check("RTY-15", final=True)
def check_rty_15(ev: Evidence) -> Finding:
    """x-should-retry: false suppresses a retry; true forces one whatever the status."""
    expected = (
        "after x-should-retry: false the same messages are not sent again; after "
        "x-should-retry: true they are"
    )
    chat = ev.chat()
    judged = []
    for i, e in enumerate(chat):
        flag = (_hdr(e, "x-should-retry") or "").strip().lower()
        if flag not in ("true", "false") or not is_failed(e):
            continue
        again = next((x for x in chat[i + 1 :] if _messages(x) == _messages(e)), None)
        if flag == "false" and again is not None:
            return failed(
                expected,
                f"status {_status(e)} with x-should-retry: false (seq {e.get('seq')}) resent "
                f"at seq {again.get('seq')}",
            )
        if flag == "true" and again is None and not turn_over(ev):
            continue  # the forced retry may still come
        if flag == "true" and again is None:
            return failed(
                expected,
                f"status {_status(e)} with x-should-retry: true (seq {e.get('seq')}) not retried",
            )
        judged.append(f"{_status(e)} x-should-retry {flag}: {'retried' if again else 'not'}")
    if not judged:
        return not_applicable(expected, "no failed response with x-should-retry in this run")
    return passed(expected, "; ".join(judged))
