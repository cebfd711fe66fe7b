"""Checks for the FMT criteria (see docs/criteria.md), judged from the wire first.

Theory of operation: the gateway's journal holds both sides of every hosted tool call: the
tool entry's response carries the output the tool produced, and a later chat request carries the
tool message the agent made of it (matched by ``tool_call_id``). The agent's own limit is not
known to the suite, so the checks only judge outputs whose side of every limit is certain from
the seed (seed 004 §7.2):

- *over every limit*: more than 30000 characters (the Bash cap the seed cites, the largest
  character cap it names) and more than 2000 lines (the Read hard cap, the largest line cap);
- *short*: fewer than 100 lines and under 30000 characters (the seed's "输出 < 100 行 原样返回").

Outputs in between are left unjudged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from conformance.catalogue import by_id
from conformance.checks.declare import check
from conformance.checks.finding import Finding, failed, listed, not_applicable, passed
from conformance.judging.evidence import Evidence, response_of
from fakes.journal import ToolEntry

__all__ = [
    "OVER_CHARS",
    "OVER_LINES",
    "SHORT_LINES",
    "hosted_outputs",
    "line_count",
]

# None is final on a run cut short (see registry.py).

# Over both limits, an output must be cut (FMT-01, FMT-02); under SHORT_LINES and OVER_CHARS it
# is passed through as is (FMT-03). The criteria's own numbers, from seed 004 §7.2.
OVER_CHARS = int(by_id("FMT-01").numbers["over_chars"])
OVER_LINES = int(by_id("FMT-01").numbers["over_lines"])
SHORT_LINES = int(by_id("FMT-03").numbers["short_lines"])
# Words that make a size number an explicit cut notice (English and the seed's Chinese).
_NOTICE = re.compile(r"truncat|omit|elided|cut |shortened|trimmed|截断|省略", re.IGNORECASE)
# A count off by this much still matches: head/tail split mid-line, or separator newlines.
_COUNT_SLACK = 2


@dataclass(frozen=True)
class HostedOutput:
    """One successful hosted tool output and the tool message the model was sent for it."""

    call_id: str
    tool: str
    output: str
    result: str | None  # None: no tool message for this call reached the gateway
    seq: int | None  # the chat request that carried the result


def line_count(text: str) -> int:
    """Lines as an editor counts them: a final line without a newline still counts."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def _output_of(entry: ToolEntry) -> str | None:
    """The text output a hosted tool returned, or None for errors and unreadable replies."""
    resp = response_of(entry)
    if resp.get("status") != 200:
        return None
    try:
        data = json.loads(resp.get("sent") or "")
    except json.JSONDecodeError:
        return None
    out = data.get("output") if isinstance(data, dict) else None
    return out if isinstance(out, str) else None


def hosted_outputs(ev: Evidence) -> list[HostedOutput]:
    """Every successful hosted tool output, paired with the first tool message sent for it."""
    chat = ev.chat()
    out: list[HostedOutput] = []
    for t in ev.tool_entries():
        text = _output_of(t)
        cid = t.get("call_id")
        if text is None or not cid:
            continue
        result, seq = None, None
        for e in chat:
            if e.get("t_arrival_ns", 0) < t.get("t_arrival_ns", 0):
                continue
            msgs = (e.get("body") or {}).get("messages") or []
            hit = next(
                (m for m in msgs if m.get("role") == "tool" and m.get("tool_call_id") == cid), None
            )
            if hit is not None:
                result, seq = _text(hit), e.get("seq")
                break
        out.append(HostedOutput(cid, str(t.get("tool")), text, result, seq))
    return out


def _over(o: HostedOutput) -> bool:
    return len(o.output) > OVER_CHARS and line_count(o.output) > OVER_LINES


def _numbers(text: str) -> list[int]:
    """Standalone integers in ``text``; thousands separators (, _) are accepted."""
    # ASCII word characters only: Chinese notices write numbers right against the text (共3125行).
    found = re.findall(
        r"(?<![0-9A-Za-z_.])\d{1,3}(?:[,_]\d{3})+(?![0-9A-Za-z_])|(?<![0-9A-Za-z_.,])\d+(?![0-9A-Za-z_])",
        text,
    )
    # Zero-padded tokens (line 00042) are labels, not counts.
    return [int(re.sub(r"[,_]", "", n)) for n in found if n == "0" or not n.startswith("0")]


def _new_numbers(result: str, output: str) -> list[int]:
    """Numbers the agent added: those more frequent in the result than in the output."""
    kept = _numbers(output)
    new = []
    for n in set(_numbers(result)):
        if _numbers(result).count(n) > kept.count(n):
            new.append(n)
    return new


def _sizes(text: str) -> dict[str, int]:
    return {
        "characters": len(text),
        "bytes": len(text.encode("utf-8")),
        "lines": line_count(text),
        # The seed's own code counts output.split('\n').length: one more after a final newline.
        "lines (split)": len(text.split("\n")),
    }


def _over_outputs(ev: Evidence, expected: str) -> tuple[list[HostedOutput], Finding | None]:
    over = [o for o in hosted_outputs(ev) if _over(o)]
    if not over:
        return [], not_applicable(
            expected,
            f"no hosted tool output over {OVER_CHARS} characters and {OVER_LINES} lines",
        )
    missing = [o for o in over if o.result is None]
    if missing:
        m = missing[0]
        return [], failed(expected, f"no tool message for call {m.call_id!r} reached the gateway")
    return over, None


@check("FMT-01")
def check_fmt_01(ev: Evidence) -> Finding:
    """Output over every limit is cut, with a notice giving its full size."""
    expected = (
        f"a tool output over {OVER_CHARS} characters and {OVER_LINES} lines reaches the model "
        "shorter than it was, with a notice (truncated/omitted/截断/省略) stating its full size in "
        "characters, bytes or lines"
    )
    over, bad = _over_outputs(ev, expected)
    if bad:
        return bad
    seen = []
    for o in over:
        res = o.result or ""
        sizes = _sizes(o.output)
        if len(res) >= len(o.output):
            return failed(
                expected,
                f"call {o.call_id!r}: {sizes['characters']} characters sent uncut "
                f"({len(res)} characters in the tool message at seq {o.seq})",
            )
        if not _NOTICE.search(res):
            return failed(
                expected, f"call {o.call_id!r}: cut to {len(res)} characters with no cut notice"
            )
        new = _new_numbers(res, o.output)
        unit = next((u for u, n in sizes.items() if n in new), None)
        if unit is None:
            return failed(
                expected,
                f"call {o.call_id!r}: the notice does not give the full size "
                f"({listed(f'{n} {unit}' for unit, n in sizes.items())}); numbers added: "
                f"{listed(sorted(new)[:10])}",
            )
        seen.append(f"{o.call_id}: {sizes[unit]} {unit} cut to {len(res)} characters")
    return passed(expected, "; ".join(seen))


def _prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@check("FMT-02")
def check_fmt_02(ev: Evidence) -> Finding:
    """A cut output keeps its first and last lines and states how much was omitted."""
    expected = (
        "a cut tool output keeps its head (first line onward) and tail (through its last line), "
        f"and states the omitted amount in characters, bytes or lines (within {_COUNT_SLACK})"
    )
    over, bad = _over_outputs(ev, expected)
    if bad:
        return bad
    seen = []
    judged = 0
    for o in over:
        res, out = o.result or "", o.output
        if len(res) >= len(out):
            continue  # not cut: FMT-01's failure, nothing to judge here
        judged += 1
        lines = out.splitlines(keepends=True)
        first, last = lines[0], lines[-1].rstrip("\n")
        i = res.find(first)
        if i < 0:
            return failed(expected, f"call {o.call_id!r}: head lost, first line {first[:40]!r}")
        head = _prefix_len(res[i:], out)
        k = res.rfind(last)
        if k < 0 or k < i + head:
            return failed(expected, f"call {o.call_id!r}: tail lost, last line {last[:40]!r}")
        end = k + len(last)
        tail = _prefix_len(res[:end][::-1], out[: len(out.rstrip("\n"))][::-1])
        if tail < len(last):
            return failed(expected, f"call {o.call_id!r}: last line not kept whole")
        omitted_chars = len(out.rstrip("\n")) - head - tail
        # Whole lines kept: a line cut by the head or tail boundary counts as omitted.
        kept_lines = out[:head].count("\n")
        body = out.rstrip("\n")
        start = len(body) - tail
        kept_lines += body[start:].count("\n") + (1 if start == 0 or body[start - 1] == "\n" else 0)
        omitted_lines = line_count(out) - kept_lines
        new = _new_numbers(res, out)
        hit = [
            (n, unit)
            for n in new
            for unit, want in (("characters", omitted_chars), ("lines", omitted_lines))
            if abs(n - want) <= _COUNT_SLACK
        ]
        if not hit:
            return failed(
                expected,
                f"call {o.call_id!r}: head {head} and tail {tail} characters kept, but no "
                f"number near the omitted {omitted_chars} characters / {omitted_lines} lines "
                f"(numbers added: {listed(sorted(new)[:10])})",
            )
        seen.append(f"{o.call_id}: head {head}, tail {tail}, omitted stated as {hit[0][0]}")
    if not judged:
        return not_applicable(expected, "no over-limit output was cut (see FMT-01)")
    return passed(expected, "; ".join(seen))


@check("FMT-03")
def check_fmt_03(ev: Evidence) -> Finding:
    """A short tool output reaches the model exactly as the tool returned it."""
    expected = (
        f"a tool output under {SHORT_LINES} lines and {OVER_CHARS} characters is the tool "
        "message's content, unchanged"
    )
    short = [
        o
        for o in hosted_outputs(ev)
        if line_count(o.output) < SHORT_LINES and len(o.output) < OVER_CHARS
    ]
    if not short:
        return not_applicable(expected, "no short hosted tool output in this run")
    for o in short:
        if o.result is None:
            return failed(expected, f"no tool message for call {o.call_id!r} reached the gateway")
        if o.result != o.output:
            at = _prefix_len(o.result, o.output)
            return failed(
                expected,
                f"call {o.call_id!r} (seq {o.seq}): differs at character {at}: tool gave "
                f"{o.output[at : at + 40]!r}, model got {o.result[at : at + 40]!r}",
            )
    return passed(expected, f"{len(short)} short output(s) passed through verbatim")
