"""Checks for the RTY criteria beyond the 429 policy, judged from the gateway journal.

Background requests that fail fast (RTY-09), expired credentials refreshed once (RTY-10), a
context overflow corrected before the retry (RTY-11), an excessive asked wait bounded (RTY-14),
and the server's ``x-should-retry`` obeyed (RTY-15). The policy itself (backoff, budget, what is
retried) is in rty.py.
"""

from __future__ import annotations

import re
from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.rty import header, seconds, status_of
from conformance.checks.wire import answer_of
from conformance.judging.evidence import Evidence, asked_wait, is_failed, response_of
from fakes.compaction import message_text
from fakes.journal import ChatEntry

__all__ = [
    "EXCESSIVE_WAIT_S",
    "background",
    "excessive_bound",
    "excessive_core",
    "expired_401",
    "overflow",
]

# final=True (see registry.py), all of them: a background request resent, a second refresh, an
# uncorrected resend, a wait past the bound, a retry the server forbade.


def _messages(entry: ChatEntry) -> list[Any]:
    return (entry.get("body") or {}).get("messages") or []


def _sent(entry: ChatEntry) -> str:
    return response_of(entry).get("sent") or ""


def background(entry: ChatEntry) -> bool:
    """An auxiliary title request, as the contract shapes it: non-streaming, no tools, and
    messages that mention a title."""
    body = entry.get("body") or {}
    return (
        body.get("stream") is False
        and not body.get("tools")
        and "title" in message_text(_messages(entry)).lower()
    )


@check("RTY-09", final=True)
def check_rty_09(ev: Evidence) -> Finding:
    """A background (title) request that gets 429 or 529 is not retried."""
    expected = "a background request answered 429 or 529 is never sent again"
    chat = ev.chat()
    judged = []
    for i, e in enumerate(chat):
        if not background(e) or status_of(e) not in (429, 529):
            continue
        again = [x for x in chat[i + 1 :] if x.get("body") == e.get("body")]
        if again:
            return failed(
                expected,
                f"background request seq {e.get('seq')} ({answer_of(e)}) resent at seq "
                f"{again[0].get('seq')} after {seconds(ev.gap(e, again[0]))}",
            )
        judged.append(f"{answer_of(e)} at seq {e.get('seq')} not retried")
    if not judged:
        seen = sum(1 for e in chat if background(e))
        return not_applicable(
            expected, f"{seen} background request(s), none answered 429/529 in this run"
        )
    return passed(expected, "; ".join(judged))


def expired_401(entry: ChatEntry) -> bool:
    """A 401 whose error says the credentials expired (not merely invalid)."""
    return status_of(entry) == 401 and "expired" in _sent(entry).lower()


@check("RTY-10", final=True)
def check_rty_10(ev: Evidence) -> Finding:
    """A 401 for expired credentials is retried exactly once, after a refresh: one resend of
    the same body carrying another key than the one that expired, and none after a second
    expired 401. The journal names which of the session's keys each request carried
    (``credential``: 1, 2, ...), never the key: a retry with the expired key is no refresh."""
    expected = (
        "after a 401 for expired credentials, exactly one retry of the same request, with a "
        "refreshed key"
    )
    chat = ev.chat()
    i = next((k for k, e in enumerate(chat) if expired_401(e)), None)
    if i is None:
        return not_applicable(expected, "no 401 for expired credentials in this run")
    same = [chat[i]]
    for e in chat[i + 1 :]:
        if e.get("body") != chat[i].get("body"):
            break
        same.append(e)
    retries = [(a, b) for a, b in zip(same, same[1:], strict=False) if expired_401(a)]
    if not retries and not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the retry may still come")
    if not retries:
        return failed(expected, f"the 401 at seq {chat[i].get('seq')} was never retried")
    if len(retries) > 1:
        return failed(
            expected,
            f"{len(retries)} retries after expired-credential 401s "
            f"(seqs {[b.get('seq') for _, b in retries]}): refresh-and-retry must happen once",
        )
    expired, r = retries[0]
    if "credential" not in expired or "credential" not in r:
        return not_applicable(
            expected,
            "this journal does not say which key each request carried (recorded since "
            "release 1.2.0): a refresh cannot be told from a plain retry",
        )
    if r["credential"] == expired["credential"]:
        return failed(
            expected,
            f"the retry at seq {r.get('seq')} carried the key that had expired (the session's "
            f"key {expired['credential']}): it was resent without a refresh",
        )
    return passed(
        expected,
        f"one retry at seq {r.get('seq')} with a refreshed key (the session's key "
        f"{expired['credential']}, then {r['credential']}), answered {answer_of(r)}",
    )


_OAI_WINDOW = re.compile(r"maximum context length is (\d+)", re.I)
_OAI_INPUT = re.compile(r"(\d+) in the messages", re.I)
_ANT_SUM = re.compile(r"(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")


def overflow(entry: ChatEntry) -> tuple[int, int] | None:
    """(window, input tokens) from a 400 saying input plus maximum output exceed the window,
    in OpenAI's wording or in Anthropic's ("input length and max_tokens exceed context limit:
    a + b > c"); None when the input alone does not fit or the reply says neither."""
    if status_of(entry) != 400:
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
# The longest wait RTY-14 allows for an excessive asked wait: its own number.
EXCESSIVE_WAIT_S = float(by_id("RTY-14").numbers["max_wait_s"])


def excessive_core(asked_s: float) -> tuple[float, float]:
    """RTY-14's band for the retry after an excessive asked wait: at most the cap, and less
    than half the asked wait."""
    return 0.0, min(EXCESSIVE_WAIT_S, asked_s / 2)


def excessive_bound(ev: Evidence, asked_s: float) -> float:
    """The longest nominal wait before retrying after an excessive asked wait, as judged."""
    return excessive_core(asked_s)[1] + ev.slack


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
            bound = excessive_bound(ev, s)
            if wait > bound:
                return failed(expected, f"asked {s:g}s via {asked[1]}, waited {seconds(wait)}")
            judged.append(f"asked {s:g}s, retried after {seconds(wait)}")
            continue
        if not ev.errors() and not turn_over(ev):
            # Neither the retry nor the error has come yet: a FAIL only once the silence has
            # outlasted the bound (a run cut at its deadline; a retry after it is too late).
            silent = ev.silence_after(e)
            if silent is not None and silent > excessive_bound(ev, s) + ev.late_slack:
                return failed(
                    expected,
                    f"asked {s:g}s via {asked[1]} at seq {e.get('seq')}: still silent "
                    f"{seconds(silent)} later, neither retried nor an error shown",
                )
            continue
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
        flag = (header(e, "x-should-retry") or "").strip().lower()
        if flag not in ("true", "false") or not is_failed(e):
            continue
        again = next((x for x in chat[i + 1 :] if _messages(x) == _messages(e)), None)
        if flag == "false" and again is not None:
            return failed(
                expected,
                f"{answer_of(e)} with x-should-retry: false (seq {e.get('seq')}) resent "
                f"at seq {again.get('seq')}",
            )
        if flag == "true" and again is None and not turn_over(ev):
            continue  # the forced retry may still come
        if flag == "true" and again is None:
            return failed(
                expected,
                f"{answer_of(e)} with x-should-retry: true (seq {e.get('seq')}) not retried",
            )
        judged.append(f"{answer_of(e)} x-should-retry {flag}: {'retried' if again else 'not'}")
    if not judged:
        return not_applicable(expected, "no failed response with x-should-retry in this run")
    return passed(expected, "; ".join(judged))
