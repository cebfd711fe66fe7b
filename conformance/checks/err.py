"""Checks for ERR-01, ERR-03, ERR-04 (how an exhausted API error is surfaced).

Theory of operation: a turn ended in an API error when the last chat attempt failed on the wire
and the turn did not complete. The wire says what failed last; the agent's last ``error`` event
is what the user was shown (the only place the wire cannot reach). Recovery actions are read
from the wire: a resend after a failure (retry), a non-streaming attempt after a failed
streaming one, a request to the fallback model, a compaction request.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from conformance.checks.ctx import is_media_error, is_prompt_too_long
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.mfb import is_overload
from conformance.checks.rty_cases import background
from conformance.checks.wire import answer_of
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.journal import ChatEntry

__all__ = ["TYPED_KINDS", "expected_kinds"]

# None is final on a run cut short (see registry.py): each judges the error the turn ended with.

# Error kinds named by seed 001 (API 错误也是一种内部 assistant 消息) and the adapter protocol.
TYPED_KINDS = frozenset(
    {
        "rate_limit",
        "overloaded",
        "server",
        "timeout",
        "connection",
        "prompt_too_long",
        "media_too_large",
        "request_too_large",
        "tool_pairing",
        "auth",
        "permission",
        "model_access",
        "not_found",
        "billing",
        "bad_request",
    }
)


def expected_kinds(entry: ChatEntry) -> frozenset[str]:
    """The typed kinds that fit the failure of one chat attempt."""
    resp = response_of(entry)
    status = resp.get("status")
    if is_prompt_too_long(entry):
        return frozenset({"prompt_too_long"})
    if is_media_error(entry):
        return frozenset({"media_too_large", "request_too_large"})
    if is_overload(entry):
        return frozenset({"overloaded", "server"})
    if status is None or (status < 400 and resp.get("end") in ("reset", "close")):
        return frozenset({"connection", "timeout"})
    table = {
        401: {"auth"},
        403: {"permission", "auth", "model_access", "billing"},
        404: {"not_found", "model_access"},
        408: {"timeout"},
        429: {"rate_limit"},
        402: {"billing"},
    }
    if status in table:
        return frozenset(table[status])
    if status >= 500:
        return frozenset({"server", "overloaded"})
    if status >= 400:
        return frozenset({"bad_request", "tool_pairing"})
    # A 200 that broke mid-body: transport or server trouble.
    return frozenset({"connection", "server", "timeout"})


def _ended_in_api_error(
    ev: Evidence, *, completed_too: bool = False
) -> tuple[ChatEntry | None, str]:
    """The final failed attempt when the turn ended on an API error, else None and why.

    The turn's own requests count: a compaction, or a background title request (in a scenario
    that asks for one), that fails last does not end the turn in error. ``completed_too``: a turn the agent reported as
    completed although its last request failed ended on that error all the same.
    """
    titles = bool(ev.config.get("background_title"))
    chat = [e for e in ev.chat() if not ev.is_compaction(e) and not (titles and background(e))]
    if not chat:
        return None, "no chat request in this run"
    ends = ev.turn_ends()
    reason = ends[-1].get("reason") if ends else None
    if reason == "aborted" or (reason == "completed" and not completed_too):
        return None, f"the turn ended {reason!r}"
    last = chat[-1]
    if not is_failed(last):
        return None, f"the last request (seq {last.get('seq')}) succeeded"
    return last, ""


@check("ERR-01")
def check_err_01(ev: Evidence) -> Finding:
    """The exhausted API error is shown with a kind that names its type.

    Judged whatever the turn's reported end: a turn reported as completed right after its
    last request failed (nothing sent after it) swallowed the exhausted error, which is a
    FAIL unless a typed error was shown. Only a user abort ends the turn without one.
    """
    expected = "the exhausted API error is shown as a typed error whose kind fits the failure"
    last, why = _ended_in_api_error(ev, completed_too=True)
    if last is None:
        return not_applicable(expected, why)
    fits = expected_kinds(last)
    errors = ev.errors()
    reason = (ev.turn_ends() or [{}])[-1].get("reason")
    if not errors:
        how = "ended the turn as completed" if reason == "completed" else "ended the turn"
        return failed(
            expected, f"seq {last.get('seq')} ({answer_of(last)}) {how}; no error was shown"
        )
    kind = errors[-1].get("kind")
    if not isinstance(kind, str) or kind not in TYPED_KINDS:
        return failed(
            expected, f"kind {kind!r} is not a typed error kind ({listed(sorted(TYPED_KINDS))})"
        )
    if kind not in fits:
        return failed(
            expected,
            f"seq {last.get('seq')} ({answer_of(last)}) shown as {kind!r}; fits {', '.join(sorted(fits))}",
        )
    return passed(expected, f"seq {last.get('seq')} ({answer_of(last)}) shown as {kind!r}")


@check("ERR-03")
def check_err_03(ev: Evidence) -> Finding:
    """With a stop hook configured, no hook call follows a turn that ended in an API error."""
    expected = "no stop_hook call after a turn that ended in an API error"
    if not ev.config.get("stop_hook"):
        return not_applicable(expected, "no stop hook configured")
    last, why = _ended_in_api_error(ev)
    if last is None:
        return not_applicable(expected, why)
    t = last.get("t_arrival_ns", 0)
    hooks = [e for e in ev.tool_entries() if e.get("tool") == "stop_hook"]
    late = [e for e in hooks if e.get("t_arrival_ns", 0) > t]
    if late:
        return failed(
            expected,
            f"stop_hook called (seq {late[0].get('seq')}) after the API "
            f"error at seq {last.get('seq')}",
        )
    return passed(
        expected, f"turn ended on the API error at seq {last.get('seq')}; no stop_hook call"
    )


_RETRY_WORDS = re.compile(r"\b(retr(y|ies|ied|ying)|attempts)\b")


def _actions(ev: Evidence) -> dict[str, Callable[[str], bool]]:
    """Recovery actions seen on the wire -> a test the error's (lower-cased) text must pass."""
    chat = ev.chat()
    fb = str(ev.config.get("fallback_model") or "")
    acts: dict[str, Callable[[str], bool]] = {}
    for prev, cur in zip(chat, chat[1:], strict=False):
        if ev.is_compaction(prev) or ev.is_compaction(cur) or not is_failed(prev):
            continue  # the resend after a compaction belongs to the compaction
        same_model = (prev.get("body") or {}).get("model") == (cur.get("body") or {}).get("model")
        if same_model and ev.mode(prev) == ev.mode(cur):
            acts["retries"] = lambda m: bool(_RETRY_WORDS.search(m))
        if ev.mode(prev) and not ev.mode(cur):
            acts["non-streaming fallback"] = lambda m: "stream" in m
    if fb and any((e.get("body") or {}).get("model") == fb for e in chat):
        acts["model fallback"] = lambda m: any(
            w in m for w in (fb.lower(), "fallback model", "model fallback")
        )
    if any(ev.is_compaction(e) for e in chat):
        acts["compaction"] = lambda m: "compact" in m or "summar" in m
    return acts


@check("ERR-04")
def check_err_04(ev: Evidence) -> Finding:
    """The surfaced error names every recovery action the wire shows was tried."""
    expected = "the error shown names the recovery actions tried (retries, fallbacks, compaction)"
    last, why = _ended_in_api_error(ev)
    if last is None:
        return not_applicable(expected, why)
    acts = _actions(ev)
    if not acts:
        return not_applicable(expected, "no recovery action was tried before the error")
    errors = ev.errors()
    if not errors:
        return failed(expected, "no error was shown")
    msg = str(errors[-1].get("message") or "").lower()
    missing = [a for a, named in acts.items() if not named(msg)]
    if missing:
        return failed(
            expected,
            f"tried {listed(sorted(acts))}; the error does not name {listed(missing)}: {msg[:200]!r}",
        )
    return passed(expected, f"the error names {listed(sorted(acts))}")
