"""The verdict of one failover case, from what the client received and the upstreams' journals.

Nothing the gateway says about itself is read: the attempts are the fake upstreams' journal
entries (arrival, headers, end, status, the fault served), the reply is the client's bytes.
Verdicts, worst first (docs/probe.md, "Failover"):

* ``UNSAFE``: a partial or spliced reply presented as complete (it carries a finish reason),
  or a reply given a finish reason its upstream never sent, or a request that must not be resent (400, context length) was sent again, here or there;
* ``TRUNCATED``: a partial reply that ended cleanly with no finish reason and no error: only a
  client that checks the finish marker can tell;
* ``RETRY-TOO-SOON``: the primary was retried sooner than its 429's ``Retry-After`` said;
* ``NO-RECOVERY``: the client got an error, a hang or the fault itself, with nothing passed on
  before it, where a retry or the fallback was configured and allowed;
* ``NOT-REACHED``: no request reached the primary: the case says nothing of the gateway's
  recovery (its configuration or routing is wrong);
* ``PASS``: a complete reply from either upstream, or a clear error where recovery is not
  allowed (a non-retryable case; or a failure after content was already passed on, where
  only splicing could continue).
"""

from __future__ import annotations

import re
from typing import Any

from conformance.probe.exchange import Exchange
from conformance.probe.failover_cases import PRIMARY_TEXT, SECONDARY_TEXT, Case, Policy
from reports.probe_failover import FAILOVER_VERDICTS  # the report's list, worst first

__all__ = ["FAILOVER_VERDICTS", "attempts", "client_facts", "judge"]

# A retry counts as honouring Retry-After if it waited at least this share of it (clock
# granularity and the gateway's own bookkeeping).
_RETRY_AFTER_SLACK = 0.9


# A finish reason in what an upstream sent (the fake renders ``"finish_reason": null`` until the
# last chunk).
_FINISH = re.compile(r'"finish_reason"\s*:\s*"')


def _ms(ns: int | None, t0_ns: int) -> float | None:
    return None if ns is None else round((ns - t0_ns) / 1e6, 1)


def attempts(upstream: str, journal: dict[str, Any], t0_ns: int) -> list[dict[str, Any]]:
    """The chat requests an upstream received, in order, times in ms from the client's send."""
    out = []
    for e in journal.get("entries", []):
        if e.get("kind") != "chat":
            continue
        r = e.get("response") or {}
        out.append(
            {
                "upstream": upstream,
                "t_arrival_ms": _ms(e.get("t_arrival_ns"), t0_ns),
                "t_headers_ms": _ms(r.get("t_headers_ns"), t0_ns),
                "t_end_ms": _ms(r.get("t_end_ns"), t0_ns),
                "status": r.get("status"),
                "retry_after": {k.lower(): v for k, v in (r.get("headers") or {}).items()}.get(
                    "retry-after"
                ),
                "fault": e.get("fault"),
                "end": r.get("end"),
                "events_sent": r.get("events_sent"),
                "sent_bytes": r.get("sent_bytes"),
                "finish_sent": bool(_FINISH.search(r.get("sent") or "")),
            }
        )
    return out


def _relation(text: str) -> str:
    """How the client's text relates to the upstreams' whole texts."""
    if not text:
        return "empty"
    for name, full in (("primary", PRIMARY_TEXT), ("secondary", SECONDARY_TEXT)):
        if text == full:
            return f"{name}'s whole text"
    for name, full in (("primary", PRIMARY_TEXT), ("secondary", SECONDARY_TEXT)):
        if full.startswith(text):
            return f"the first {len(text)} of {len(full)} characters of the {name}'s text"
    for a, fa in (("primary", PRIMARY_TEXT), ("secondary", SECONDARY_TEXT)):
        for b, fb in (("primary", PRIMARY_TEXT), ("secondary", SECONDARY_TEXT)):
            if text.endswith(fb) and fa.startswith(text[: -len(fb)]):
                return (
                    f"spliced: the first {len(text) - len(fb)} characters of the {a}'s text, "
                    f"then the {b}'s whole text"
                )
    return "a text neither upstream sent"


def _read_stream(ex: Exchange, f: dict[str, Any], text: list[str]) -> int | None:
    """Read an SSE body into ``f`` and ``text``; where (in characters of text) it first failed."""
    failed_at: int | None = None
    evs = ex.events()
    f["events"] = len(evs)
    for ev in evs:
        if ev["data"] == "[DONE]":
            f["done"] = True
            continue
        j = ev["json"]
        broken = not isinstance(j, dict)
        if broken or "error" in j or ev["event"] == "error":
            f["malformed_events" if broken else "error_events"] += 1
            failed_at = len("".join(text)) if failed_at is None else failed_at
            continue
        for ch in j.get("choices") or []:
            delta = ch.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            if ch.get("finish_reason"):
                f["finish_reason"] = ch["finish_reason"]
    return failed_at


def _read_json(ex: Exchange, f: dict[str, Any], text: list[str]) -> None:
    body = ex.json_body()
    if not isinstance(body, dict):
        return
    for ch in body.get("choices") or []:
        msg = ch.get("message") or {}
        if isinstance(msg.get("content"), str):
            text.append(msg["content"])
        if ch.get("finish_reason"):
            f["finish_reason"] = ch["finish_reason"]
    if isinstance(body.get("error"), dict):
        f["error_body"] = {k: body["error"].get(k) for k in ("type", "code") if k in body["error"]}


def _outcome(ex: Exchange, f: dict[str, Any]) -> str:
    if ex.end == "unreachable":
        return "unreachable"
    if ex.end == "timeout":
        return "hang"
    if ex.status is None or ex.status >= 400:
        return "error-status"
    if ex.end != "complete":
        return "broken"
    if f["error_events"]:
        return "in-band-error"
    if f["malformed_events"]:
        return "malformed"
    if f["finish_reason"]:
        return "complete" if f["text"] in (PRIMARY_TEXT, SECONDARY_TEXT) else "marked-partial"
    return "unmarked"


def client_facts(ex: Exchange) -> dict[str, Any]:
    """What the client received, read from its bytes: the outcome and its evidence.

    ``outcome``: ``complete`` (a finish reason, no error, a whole text of one upstream),
    ``marked-partial`` (a finish reason on anything else), ``unmarked`` (ended cleanly with no
    finish reason and no error), ``error-status``, ``in-band-error``, ``malformed``,
    ``broken`` (the body did not end properly), ``hang`` (the client's timeout) or
    ``unreachable``. ``content_before_failure``: characters of text passed on before the first
    sign of failure.
    """
    f: dict[str, Any] = {
        "status": ex.status,
        "end": ex.end,
        "error": ex.error,
        "elapsed_ms": ex.elapsed_ms,
        "body_bytes": len(ex.body),
        "events": 0,
        "text": "",
        "finish_reason": None,
        "done": False,
        "error_events": 0,
        "malformed_events": 0,
        "content_before_failure": 0,
    }
    text: list[str] = []
    failed_at: int | None = None
    if ex.is_sse():
        failed_at = _read_stream(ex, f, text)
    else:
        _read_json(ex, f, text)
    f["text"] = "".join(text)
    f["text_is"] = _relation(f["text"])
    if ex.end != "complete" and failed_at is None:
        failed_at = len(f["text"])
    f["content_before_failure"] = failed_at or 0
    f["outcome"] = _outcome(ex, f)
    return f


def _too_soon(case: Case, tries: list[dict[str, Any]], scale: float) -> str | None:
    """The first retry of the primary sooner than the Retry-After of the 429 before it."""
    for before, after in zip(tries, tries[1:], strict=False):
        ra = before.get("retry_after")
        if before["status"] != 429 or ra is None or case.retry_after_s is None:
            continue
        try:
            want_ms = float(ra) * 1000 * scale
        except ValueError:
            continue
        since = before["t_headers_ms"] if before["t_headers_ms"] is not None else 0.0
        gap = (after["t_arrival_ms"] or 0.0) - since
        if gap < want_ms * _RETRY_AFTER_SLACK:
            return (
                f"the primary was retried {gap:.0f} ms after its 429 with Retry-After: {ra} "
                f"({want_ms:.0f} ms)"
            )
    return None


def judge(
    case: Case,
    policy: Policy,
    client: dict[str, Any],
    primary: list[dict[str, Any]],
    secondary: list[dict[str, Any]],
    *,
    time_scale: float = 1.0,
) -> tuple[str, str]:
    """The verdict and a one-line reason, from ``client_facts`` and the ``attempts``."""
    got = client["outcome"]
    said = f"the client got {got} ({client['text_is']}"
    said += f", status {client['status']}" if client["status"] is not None else ""
    said += ")"
    counts = f"primary {len(primary)}, secondary {len(secondary)} request(s)"
    if not primary:
        return "NOT-REACHED", f"no request reached the primary ({counts}); {said}"
    if case.kind == "non-retryable":
        if len(primary) > 1 or secondary:
            how = "retried" if len(primary) > 1 else "failed over"
            return "UNSAFE", f"a non-retryable request was {how} ({counts}); {said}"
        if got == "error-status":
            return "PASS", f"a clear error, sent once ({counts}); {said}"
        if got in ("marked-partial", "complete"):
            return "UNSAFE", f"a refused request answered as complete ({counts}); {said}"
        return "NO-RECOVERY", f"not a clear error ({counts}); {said}"
    if got == "marked-partial":
        return "UNSAFE", f"a reply that is not whole, with finish_reason ({counts}); {said}"
    if got == "unmarked":
        return "TRUNCATED", f"ended cleanly without finish_reason or error ({counts}); {said}"
    soon = _too_soon(case, primary, time_scale)
    if soon:
        return "RETRY-TOO-SOON", f"{soon} ({counts}); {said}"
    if got == "complete":
        source = primary if client["text"] == PRIMARY_TEXT else secondary
        if not any(a.get("finish_sent") for a in source):
            return "UNSAFE", (
                f"a finish_reason the upstream never sent: an unmarked reply made to look "
                f"complete ({counts}); {said}"
            )
        return "PASS", f"recovered ({counts}); {said}"
    if got != "hang" and client["content_before_failure"] > 0:
        return "PASS", (
            f"a clear failure after {client['content_before_failure']} characters were "
            f"already passed on ({counts}); {said}"
        )
    allowed = policy.fallback or policy.retries > 0
    if not allowed:
        return "PASS", f"a clear failure, no recovery configured ({counts}); {said}"
    return "NO-RECOVERY", f"no recovery although configured ({counts}); {said}"
