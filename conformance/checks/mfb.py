"""Checks for the MFB criteria (model fallback), judged from the wire.

Theory of operation: the primary model is the ``model`` of the first chat attempt; the fallback
model is ``config.fallback_model``. A qualifying overload is a failed attempt answered with
status 529 or whose error names ``overloaded_error`` (seed 001: "529／overloaded_error"). The
switch is the first attempt whose ``model`` is the fallback model; what decided it is read from
the failures on the primary model just before it.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.judging.evidence import Evidence, is_failed, response_of
from fakes.journal import ChatEntry

__all__ = [
    "PRIVATE_KEYS",
    "is_access_error",
    "is_overload",
    "private_paths",
]

# final=True (see registry.py), all of them: a switch at the wrong time, a switch back, private
# fields sent to the fallback model; "never switched" waits for the end.

# Vendor-private fields that only the model that produced them can read (contracts §5, plus
# Google's thought signature on tool calls, seed 002).
PRIVATE_KEYS = frozenset(
    {
        "signature",
        "reasoning_signature",
        "thinking_blocks",
        "thought_signature",
        "thoughtSignature",
        "encrypted_content",
    }
)


def _sent(entry: ChatEntry) -> str:
    return str(response_of(entry).get("sent") or "")


def _status(entry: ChatEntry) -> int | None:
    return response_of(entry).get("status")


def is_overload(entry: ChatEntry) -> bool:
    """A failed attempt that is a qualifying overload: 529 or an ``overloaded_error``."""
    return is_failed(entry) and (_status(entry) == 529 or "overloaded_error" in _sent(entry))


def is_access_error(entry: ChatEntry) -> bool:
    """A failed attempt saying the model does not exist or may not be used (404 / access)."""
    if not is_failed(entry):
        return False
    text = _sent(entry).lower()
    return _status(entry) in (403, 404) or "model_not_found" in text or "model_access" in text


def private_paths(obj: Any, path: str = "") -> list[str]:
    """Where vendor-private keys occur in ``obj`` (JSON paths, for the report)."""
    out: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            here = f"{path}.{k}" if path else str(k)
            if k in PRIVATE_KEYS:
                out.append(here)
            out += private_paths(v, here)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += private_paths(v, f"{path}[{i}]")
    return out


def _fallback(ev: Evidence) -> str | None:
    fb = ev.config.get("fallback_model")
    return str(fb) if fb else None


def _model(entry: ChatEntry) -> str | None:
    return (entry.get("body") or {}).get("model")


def _switch(ev: Evidence, fb: str) -> tuple[int | None, int, ChatEntry | None]:
    """(index of the first fallback attempt or None, overload streak before it, last failure)."""
    chat = ev.chat()
    streak = 0
    last = None
    for i, e in enumerate(chat):
        if _model(e) == fb:
            return i, streak, last
        if is_failed(e):
            last = e
            streak = streak + 1 if is_overload(e) else 0
        else:
            streak, last = 0, None
    return None, streak, last


def _describe(entry: ChatEntry | None) -> str:
    if entry is None:
        return "none"
    return f"seq {entry.get('seq')} status {_status(entry)}"


@check("MFB-01", final=True)
def check_mfb_01(ev: Evidence) -> Finding:
    """Consecutive qualifying overloads with a fallback model configured: the model switches."""
    expected = (
        "after consecutive 529 / overloaded_error failures, the rest of the turn uses the "
        "fallback model"
    )
    fb = _fallback(ev)
    if fb is None:
        return not_applicable(expected, "no fallback_model configured")
    chat = ev.chat()
    idx, streak, last = _switch(ev, fb)
    if idx is not None:
        back = [e for e in chat[idx + 1 :] if _model(e) != fb and not ev.is_compaction(e)]
        if streak >= 2 and back:
            return failed(
                expected,
                f"switched to {fb!r} at seq {chat[idx].get('seq')}, but seq "
                f"{back[0].get('seq')} of the same turn went back to {_model(back[0])!r}",
            )
        if streak >= 2:
            return passed(
                expected,
                f"switched to {fb!r} at seq {chat[idx].get('seq')} after "
                f"{streak} consecutive overloads",
            )
        return failed(
            expected,
            f"switched to {fb!r} at seq {chat[idx].get('seq')} after "
            f"{streak} consecutive overload(s); last failure {_describe(last)}",
        )
    if not chat or not is_overload(chat[-1]):
        overloads = sum(1 for e in chat if is_overload(e))
        if overloads:
            return not_applicable(
                expected,
                f"{overloads} overload(s), recovered on the primary model before a switch was due",
            )
        return not_applicable(expected, "no qualifying overload in this run")
    if streak < 2:
        return not_applicable(expected, "the run ended after a single overload")
    if not turn_over(ev):
        return not_applicable(expected, "the turn has not ended: the switch may still come")
    return failed(
        expected,
        f"{streak} consecutive overloads on {_model(chat[-1])!r} ended the "
        f"turn; no request ever used {fb!r}",
    )


@check("MFB-02", final=True)
def check_mfb_02(ev: Evidence) -> Finding:
    """A 404 or model-access error never triggers the switch to the fallback model."""
    expected = "no request uses the fallback model because of a 404 or model-access error"
    fb = _fallback(ev)
    if fb is None:
        return not_applicable(expected, "no fallback_model configured")
    chat = ev.chat()
    access = [e for e in chat if _model(e) != fb and is_access_error(e)]
    if not access:
        return not_applicable(expected, "no 404 or model-access error on the primary model")
    idx, streak, last = _switch(ev, fb)
    if idx is None:
        return passed(
            expected,
            f"{len(access)} access error(s) ({_describe(access[0])}); the model never switched",
        )
    if last is not None and is_access_error(last):
        return failed(
            expected,
            f"switched to {fb!r} at seq {chat[idx].get('seq')} right after "
            f"{_describe(last)}: {_sent(last)[:160]!r}",
        )
    return passed(
        expected,
        f"the switch at seq {chat[idx].get('seq')} followed {streak} "
        "overload(s), not the access error",
    )


@check("MFB-03", final=True)
def check_mfb_03(ev: Evidence) -> Finding:
    """The first overload never switches the model: the next request stays on the primary."""
    expected = "the request after the first overload uses the same model (no switch on 1 overload)"
    fb = _fallback(ev)
    if fb is None:
        return not_applicable(expected, "no fallback_model configured")
    chat = ev.chat()
    firsts = [
        i
        for i, e in enumerate(chat)
        if is_overload(e) and _model(e) != fb and not (i and is_overload(chat[i - 1]))
    ]
    judged = [i for i in firsts if i + 1 < len(chat)]
    if not judged:
        why = "no overload" if not firsts else "no request followed the first overload"
        return not_applicable(expected, f"{why} in this run")
    for i in judged:
        nxt = chat[i + 1]
        if _model(nxt) == fb:
            return failed(
                expected,
                f"seq {nxt.get('seq')} switched to {fb!r} right after the "
                f"single overload at seq {chat[i].get('seq')}",
            )
    return passed(
        expected,
        f"{len(judged)} first overload(s); each was followed by a request on the same model",
    )


@check("MFB-04", final=True)
def check_mfb_04(ev: Evidence) -> Finding:
    """Requests to the fallback model carry no vendor-private fields."""
    expected = f"no message sent to the fallback model holds any of {listed(sorted(PRIVATE_KEYS))}"
    fb = _fallback(ev)
    if fb is None:
        return not_applicable(expected, "no fallback_model configured")
    chat = ev.chat()
    to_fb = [e for e in chat if _model(e) == fb]
    if not to_fb:
        return not_applicable(expected, "no request used the fallback model")
    before = [p for e in chat if _model(e) != fb for p in private_paths(_messages(e))]
    history = private_paths(ev.history)
    if not before and not history:
        return not_applicable(expected, "the history held no vendor-private field to strip")
    for e in to_fb:
        found = private_paths(_messages(e))
        if found:
            return failed(
                expected,
                f"seq {e.get('seq')} to {fb!r} carries messages{found[0]}"
                + (f" and {len(found) - 1} more" if len(found) > 1 else ""),
            )
    return passed(
        expected,
        f"{len(to_fb)} request(s) to {fb!r} carry none of the "
        f"{len(set(before) | set(history))} private field(s) of the history",
    )


def _messages(entry: ChatEntry) -> list[Any]:
    msgs = (entry.get("body") or {}).get("messages")
    return msgs if isinstance(msgs, list) else []
