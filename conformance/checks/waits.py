"""Every retry's wait with the band the retry criteria allow it, for the report's timelines.

Theory of operation: the checks judge waits and say so in a sentence; the report draws them. This
module walks the same retries the checks walk (``Evidence.retries``) and, for each, names the
rule that bounds its wait and the band of that rule, with the functions the checks themselves
use (``rty.backoff_band``, ``rty.asked_band``, ``rty_cases.excessive_bound``), so a picture can
never disagree with a verdict about where a band lies. A retry no band applies to (after a
stream cut mid-body, or a 400 answered by a corrected request) is listed with ``band_s: null``.
The result is the results document's optional ``waits`` list of a scenario (contracts §4).
"""

from __future__ import annotations

from typing import Any

from conformance.checks.rty import (
    SERVER_ERRORS,
    asked_band,
    asked_core,
    backoff_band,
    backoff_core,
    status_of,
)
from conformance.checks.rty_cases import EXCESSIVE_WAIT_S, excessive_bound, excessive_core
from conformance.judging.evidence import Evidence, Retry, asked_wait, nominal_backoff

__all__ = ["retry_waits"]

Band = tuple[float, float]

_ASKED_RULE = {"retry-after": "RTY-01", "retry-after-date": "RTY-02", "retry-after-ms": "RTY-13"}
_BACKOFF_RULE = {429: "RTY-03", 408: "RTY-16", 409: "RTY-16"} | dict.fromkeys(
    SERVER_ERRORS, "RTY-05"
)
_ASKED_HOW = {
    "retry-after": "Retry-After",
    "retry-after-date": "Retry-After (HTTP-date)",
    "retry-after-ms": "retry-after-ms",
}


def _rule(ev: Evidence, r: Retry) -> tuple[Band | None, Band | None, str | None, str]:
    """One retry's band as judged and the rule's own band before the scheduling slack (nominal
    seconds; None when no rule bounds the wait), the criterion that sets it, and why."""
    asked = asked_wait(r.failed)
    if asked is not None:
        s, how = asked
        if s > EXCESSIVE_WAIT_S:
            core = excessive_core(s)
            return (
                (core[0], excessive_bound(ev, s)),
                core,
                "RTY-14",
                f"{_ASKED_HOW[how]} {s:g} s: excessive",
            )
        return (
            asked_band(ev, s, r.failed),
            asked_core(s),
            _ASKED_RULE[how],
            f"{_ASKED_HOW[how]} {s:g} s",
        )
    status = status_of(r.failed)
    rule = _BACKOFF_RULE.get(status) if status is not None else "RTY-06"
    if rule is not None:
        what = "no response" if status is None else str(status)
        basis = f"{what}; backoff {nominal_backoff(r.n):g} s"
        return backoff_band(ev, r.n, r.failed), backoff_core(r.n), rule, basis
    if status is not None and status < 400:
        return None, None, None, f"a broken response (status {status}): no wait rule"
    return None, None, None, f"status {status}: no wait rule"


def _rounded(band: Band | None) -> list[float] | None:
    return None if band is None else [round(max(band[0], 0.0), 6), round(band[1], 6)]


def retry_waits(ev: Evidence) -> list[dict[str, Any]]:
    """One record per retry, in arrival order: the attempts it joins, its number in its run,
    when the failed response ended (``from_ns``, the journal's clock), the wait and its band in
    nominal seconds (``band_s``: [low, high] as the check judges it, the scheduling slack
    included, or None; ``core_s``: the rule's own band without the slack), the criterion that
    sets the band and a short reason."""
    out = []
    for r in ev.retries():
        band, core, rule, basis = _rule(ev, r)
        out.append(
            {
                "after_seq": r.failed.get("seq"),
                "seq": r.attempt.get("seq"),
                "retry": r.n,
                "stream": ev.mode(r.attempt),
                "from_ns": ev.end_ns(r.failed),
                "wait_s": round(r.wait, 6),
                "band_s": _rounded(band),
                "core_s": _rounded(core),
                "rule": rule,
                "basis": basis,
            }
        )
    return out
