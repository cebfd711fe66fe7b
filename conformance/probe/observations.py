"""The observations: one function per habit, each a pure function of what was seen.

An observation is a function ``Seen -> Finding`` (verdict, value, evidence) registered with
:func:`observation`, which gives it its id, title and whether the reference agent relies on the
habit. :data:`OBSERVATIONS` lists them in report order; :func:`observe` runs them all. To add
one: write the function here with its ``@observation(...)`` line, put it in ``OBSERVATIONS``,
give it a row in the table of ``docs/probe.md`` (a test compares the two) and a passing and a
failing case in the tests.

Verdicts: ``OK`` the habit is there; ``MISSING`` a habit the reference agent relies on is
missing (exit status 1); ``NOTE`` differs from OpenAI's own habit but the reference agent copes;
``NOT_SEEN`` nothing in this probe showed it; ``NOT_APPLICABLE`` the dialect spoken has no
counterpart of the habit (``wire``), said instead of judged. A *normal* stream is a 200 ``text/event-stream``
reply without an error event (:class:`Seen`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from conformance.probe.exchange import Exchange
from conformance.probe.facts import (
    REASONING_KEYS,
    Seen,
    by_name,
    error_shape,
    first_error,
    json_message,
    tool_fragments,
)

__all__ = ["OBSERVATIONS", "VERDICTS", "Finding", "Observation", "observation", "observe"]

VERDICTS = ("OK", "MISSING", "NOTE", "NOT_SEEN", "NOT_APPLICABLE")


class Finding(NamedTuple):
    """What one observation concludes: its verdict, a sentence of value, the exchanges read."""

    verdict: str
    value: str
    evidence: list[str]


@dataclass(frozen=True)
class Observation:
    """One observation: its id, title, whether the reference agent relies on the habit, and
    the function that judges it. Called with a :class:`Seen`, it gives the report's entry."""

    id: str
    title: str
    relied_on: bool
    judge: Callable[[Seen], Finding]

    def __call__(self, seen: Seen) -> dict[str, Any]:
        why = seen.not_applicable.get(self.id)
        if why is not None:
            f = Finding("NOT_APPLICABLE", f"not applicable to {seen.dialect}: {why}", [])
        else:
            f = self.judge(seen)
        return {
            "id": self.id,
            "title": self.title,
            "relied_on": self.relied_on,
            "verdict": f.verdict,
            "value": f.value,
            "evidence": f.evidence,
        }


def observation(
    oid: str, title: str, *, relied_on: bool
) -> Callable[[Callable[[Seen], Finding]], Observation]:
    """Make the decorated judging function an :class:`Observation` with this id and title."""

    def make(judge: Callable[[Seen], Finding]) -> Observation:
        return Observation(oid, title, relied_on, judge)

    return make


def _names(xs: list[Exchange]) -> list[str]:
    return [x.name for x in xs]


@observation("stream-finish", "The last chunk of a stream carries finish_reason", relied_on=True)
def stream_finish(seen: Seen) -> Finding:
    """Reads every normal stream: does its last chunk with a choice carry ``finish_reason``?

    The reference agent keeps a finish_reason from any chunk: a stream without one is MISSING;
    one whose finish chunk is followed by more choice chunks (usage) is a NOTE, since a client
    reading only the last chunk would take it for truncated.
    """
    normal, facts = seen.normal, seen.facts
    if not normal:
        return Finding("NOT_SEEN", "no stream was answered normally", _names(seen.streams))
    lacking = [x.name for x in normal if not facts[x.name]["finishes"]]
    trailing = [
        x.name for x in normal if facts[x.name]["finishes"] and not facts[x.name]["last_finish"]
    ]
    desc = "; ".join(
        f"{x.name}: {', '.join(facts[x.name]['finishes']) or 'no finish_reason'}"
        + (
            f", then {facts[x.name]['after_finish']} chunk(s) with a choice and no finish_reason"
            if facts[x.name]["after_finish"]
            else ""
        )
        + ("" if x.end == "complete" else f" (body {x.end})")
        for x in normal
    )
    if lacking:
        verdict = "MISSING"
        value = f"{len(lacking)} of {len(normal)} streams end without finish_reason ({desc})"
    elif trailing:
        verdict = "NOTE"
        value = (
            f"finish_reason is not on the last chunk of {len(trailing)} of {len(normal)} "
            f"streams ({desc})"
        )
    else:
        verdict, value = "OK", f"{len(normal)} of {len(normal)} streams ({desc})"
    return Finding(verdict, value, _names(normal))


@observation("stream-done", "[DONE] follows the finish chunk", relied_on=False)
def stream_done(seen: Seen) -> Finding:
    """Reads every normal stream: is ``[DONE]`` (the dialect's end marker) its last event? NOTE
    when not (the reference agent judges completion by finish_reason)."""
    done = seen.end_marker
    normal = seen.normal
    if not normal:
        return Finding("NOT_SEEN", "no stream was answered normally", [])
    no_done = [x.name for x in normal if not seen.facts[x.name]["done_last"]]
    if no_done:
        return Finding(
            "NOTE",
            f"no {done} at the end of: {', '.join(no_done)} (the reference agent judges "
            f"completion by finish_reason; a client waiting for {done} would hang or fail)",
            _names(normal),
        )
    return Finding(
        "OK", f"every stream ends with {done} ({len(normal)} of {len(normal)})", _names(normal)
    )


@observation("reasoning-field", "Reasoning field name", relied_on=True)
def reasoning_field(seen: Seen) -> Finding:
    """Reads the reasoning keys of every stream's deltas and every 200 non-streamed message
    (the ``reasoning-stream`` request asks for long reasoning): OK when ``reasoning_content``
    is among them, MISSING when reasoning came only under another name."""
    names = sorted({k for x in seen.streams for k in seen.facts[x.name]["reasoning"]})
    for x in seen.exchanges:
        msg, _ = json_message(x) if not x.stream and x.status == 200 else ({}, None)
        names += [k for k in REASONING_KEYS if msg.get(k) and k not in names]
    evidence = [x.name for x in seen.exchanges if x.name.startswith("reasoning")]
    if not names:
        return Finding("NOT_SEEN", "no reasoning was sent (the model may not reason)", evidence)
    if "reasoning_content" in names:
        return Finding("OK", f"reasoning arrives as {', '.join(names)}", evidence)
    return Finding(
        "MISSING",
        f"reasoning arrives as {', '.join(names)}, not reasoning_content: the reference "
        "agent would not see it",
        evidence,
    )


@observation("stream-usage", "Usage is streamed", relied_on=False)
def stream_usage(seen: Seen) -> Finding:
    """Reads every normal stream (each asked for ``stream_options.include_usage``): does it
    carry ``usage``? NOTE when some do not."""
    normal = seen.normal
    if not normal:
        return Finding("NOT_SEEN", "no stream was answered normally", [])
    with_usage = [x.name for x in normal if seen.facts[x.name]["usage"]]
    return Finding(
        "OK" if len(with_usage) == len(normal) else "NOTE",
        f"usage in {len(with_usage)} of {len(normal)} streams"
        + ("" if with_usage else " (token counts of streamed replies are unknown)"),
        _names(normal),
    )


@observation("tool-chunking", "How tool-call arguments are chunked", relied_on=True)
def tool_chunking(seen: Seen) -> Finding:
    """Reads the ``tool-stream`` reply's tool-call fragments, per call: how many, whether id and
    name come in the first, the sizes of the argument pieces. MISSING when the pieces do not
    join into JSON, or a call has no id or no name."""
    tx = by_name(seen.exchanges, "tool-stream")
    frags = tool_fragments(tx) if tx is not None and tx in seen.normal else []
    if not frags:
        return Finding("NOT_SEEN", "no streamed tool call came back", [tx.name] if tx else [])
    calls: dict[Any, list[dict[str, Any]]] = {}
    for f in frags:
        calls.setdefault(f["index"] if f["index"] is not None else 0, []).append(f)
    problems, descs = [], []
    for idx, fs in calls.items():
        args = "".join(f["args"] or "" for f in fs)
        ids = [f["id"] for f in fs if f["id"]]
        names = "".join(f["name"] or "" for f in fs)
        sizes = [len(f["args"] or "") for f in fs if f["args"] is not None]
        head = (
            "id and name in the first fragment"
            if fs[0]["id"] and fs[0]["name"]
            else "id/name not in the first fragment"
        )
        try:
            json.loads(args)
            valid = "valid JSON"
        except ValueError:
            valid = "NOT valid JSON"
            problems.append(f"call {idx}: arguments do not join into JSON")
        if not ids:
            problems.append(f"call {idx}: no id")
        if not names:
            problems.append(f"call {idx}: no name")
        descs.append(
            f"call {idx} ({names or '?'}): {len(fs)} fragments, {head}, argument pieces of "
            f"{sizes} chars, joined: {valid}"
            + ("" if frags[0]["index"] is not None else ", no index field")
        )
    return Finding(
        "MISSING" if problems else "OK",
        "; ".join(descs) + (f" — {'; '.join(problems)}" if problems else ""),
        ["tool-stream"],
    )


@observation("json-finish", "A non-streamed reply carries finish_reason", relied_on=True)
def json_finish(seen: Seen) -> Finding:
    """Reads the 200 replies to ``short-json``, ``tool-json`` and ``history``: does each carry
    ``finish_reason``? MISSING when one does not."""
    plain = [
        x
        for x in seen.exchanges
        if not x.stream and x.status == 200 and x.name in ("short-json", "tool-json", "history")
    ]
    if not plain:
        return Finding("NOT_SEEN", "no non-streamed reply came back", [])
    got = {x.name: json_message(x)[1] for x in plain}
    lacking = [n for n, f in got.items() if not f]
    return Finding(
        "MISSING" if lacking else "OK",
        "; ".join(f"{n}: {f or 'none'}" for n, f in got.items()),
        list(got),
    )


@observation(
    "reasoning-history",
    "An assistant turn of reasoning_content plus an explanatory content is accepted",
    relied_on=True,
)
def reasoning_history(seen: Seen) -> Finding:
    """Reads the ``history`` reply (an assistant turn of only ``reasoning_content`` plus the
    reference agent's explanatory content): OK on a 2xx, MISSING with the error shape otherwise."""
    hx = by_name(seen.exchanges, "history")
    if hx is None or hx.status is None:
        return Finding("NOT_SEEN", "not sent" if hx is None else f"no answer: {hx.error}", [])
    ok = 200 <= hx.status < 300
    return Finding(
        "OK" if ok else "MISSING",
        f"HTTP {hx.status}" + ("" if ok else f": {error_shape(hx)}"),
        [hx.name],
    )


@observation("error-shape", "Shape of error bodies", relied_on=False)
def error_shape_observation(seen: Seen) -> Finding:
    """Reads the ``bad-request`` reply (``messages`` not an array) and every other 4xx/5xx: OK
    when the invalid request got a 4xx with ``{error: {message, ...}}``, NOTE otherwise; the
    value lists the shape of every error body seen."""
    bx = by_name(seen.exchanges, "bad-request")
    if bx is None or bx.status is None:
        return Finding("NOT_SEEN", "not sent" if bx is None else f"no answer: {bx.error}", [])
    errs = [x for x in seen.exchanges if x.status is not None and x.status >= 400]
    j = bx.json_body()
    openai = (
        isinstance(j, dict)
        and isinstance(j.get("error"), dict)
        and isinstance(j["error"].get("message"), str)
    )
    good = 400 <= bx.status < 500 and openai
    shapes = "; ".join(f"{x.name}: HTTP {x.status} {error_shape(x)}" for x in errs)
    return Finding(
        "OK" if good else "NOTE",
        shapes or f"the invalid request got HTTP {bx.status}",
        _names(errs) or [bx.name],
    )


@observation("empty-stream", "No stream completes with nothing in it", relied_on=False)
def empty_stream(seen: Seen) -> Finding:
    """Reads every normal stream: NOTE when one finished with no content, reasoning or tool
    call, which is how some gateways hide an upstream failure (the reference agent re-sends an
    empty reply a bounded number of times, STR-16)."""
    normal, facts = seen.normal, seen.facts
    empty = [x for x in normal if facts[x.name]["finishes"] and not facts[x.name]["carried"]]
    if empty:
        return Finding(
            "NOTE",
            "finished with "
            + "; ".join(f"{x.name}: {', '.join(facts[x.name]['finishes'])}" for x in empty)
            + " and no content, reasoning or tool call (an upstream failure may have been "
            "turned into an empty, complete-looking reply; the reference agent re-sends "
            "empty replies a bounded number of times)",
            _names(empty),
        )
    return Finding(
        "OK" if normal else "NOT_SEEN",
        f"{len(normal)} streams carried content, reasoning or a tool call",
        _names(normal),
    )


@observation("in-band-error", "How a stream that fails mid-body ends", relied_on=False)
def in_band_error(seen: Seen) -> Finding:
    """Reads every 200 stream that carried an error event: NOTE describing its shape and the
    events before it as they came on the wire, how the body ended and whether ``[DONE]`` (the
    dialect's end marker) or ``finish_reason`` followed."""
    if not seen.broken:
        return Finding("NOT_SEEN", "no stream carried an error event", [])
    parts = []
    for x in seen.broken:
        f = seen.facts[x.name]
        shape, before = first_error(seen.raw.get(x.name, x)) or ("an error", 0)
        parts.append(
            f"{x.name}: {shape} after {before} events, then "
            + ("a clean close" if x.end == "complete" else f"body {x.end}")
            + (f"; {seen.end_marker}" if f["done"] else f"; no {seen.end_marker}")
            + (
                f"; finish_reason {', '.join(f['finishes'])}"
                if f["finishes"]
                else "; no finish_reason"
            )
        )
    return Finding(
        "NOTE",
        " | ".join(parts) + " (the reference agent treats an error event, and "
        "any stream without finish_reason, as a failed attempt)",
        _names(seen.broken),
    )


@observation("retry-after", "Retry-After survives on a 429", relied_on=True)
def retry_after(seen: Seen) -> Finding:
    """Reads every 429 (the ``rate-limit`` request invites one, any may get one): MISSING when
    one lacks ``Retry-After`` and ``retry-after-ms``, naming any header that looks like a moved
    retry hint (``*retry*``, ``*ratelimit-reset*``)."""
    r429 = [x for x in seen.exchanges if x.status == 429]
    if not r429:
        return Finding("NOT_SEEN", "no 429 was seen", [])
    lost = [x for x in r429 if not ({"retry-after", "retry-after-ms"} & set(x.headers))]
    hinted = []
    for x in r429:
        hints = {k: v for k, v in x.headers.items() if "retry" in k or "ratelimit-reset" in k}
        hinted.append(
            f"{x.name}: "
            + (", ".join(f"{k}: {v}" for k, v in sorted(hints.items())) or "no retry hint at all")
        )
    return Finding(
        "MISSING" if lost else "OK",
        ("Retry-After missing on " if lost else "") + "; ".join(hinted),
        _names(r429),
    )


# Report order (the HTML and JSON list them so).
OBSERVATIONS: tuple[Observation, ...] = (
    stream_finish,
    stream_done,
    reasoning_field,
    stream_usage,
    tool_chunking,
    json_finish,
    reasoning_history,
    error_shape_observation,
    empty_stream,
    in_band_error,
    retry_after,
)


def observe(exchanges: list[Exchange], dialect: str = "openai_chat") -> list[dict[str, Any]]:
    """The observations and their verdicts, from the exchanges (in ``dialect``) alone."""
    seen = Seen.of(exchanges, dialect)
    return [o(seen) for o in OBSERVATIONS]
