"""Checks for the TJS criteria (tool-call argument JSON), judged from the wire.

Theory of operation: the tool calls are read from what the gateway actually sent (the SSE deltas
or the JSON body), never from the agent's echo of them. Each call is followed on the wire: the
hosted tool invocations it caused (matched by ``call_id``, or by tool name between the response
and the next chat request when the agent sends no id) and the tool result that the next requests
carry for it. Argument text is classified independently of any agent: a truncation whose unclosed
strings and braces can simply be closed is "recoverable" (TJS-02); one with an unclosed ``[`` is
"array" (TJS-03); one that closing does not make parse is "unrecoverable" (TJS-04). The seed's
repair closes strings and braces and nothing else: text cut right after a key, a comma or inside
a literal stays unparsable, however easily a lenient parser would drop the dangling part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from conformance.checks.declare import check
from conformance.checks.finding import Finding, as_json, failed, listed, not_applicable, passed
from conformance.checks.partial import turn_over
from conformance.checks.seed_strings import TRUNCATION_HINT
from conformance.checks.trn import length_finished
from conformance.judging.evidence import Evidence, response_of
from fakes.journal import ChatEntry, ToolEntry

__all__ = [
    "OK_BEHAVIOURS",
    "Call",
    "classify_truncated",
    "follow_calls",
    "host_output",
    "message_text",
    "repaired_arguments",
    "sent_tool_calls",
    "tool_schemas",
]

# final=True (see registry.py): a call run that must not be, or a result without what it must
# say. Left out: TJS-02 and TJS-06, whose calls must run with the repaired arguments (a later run
# may still do so).

OK_BEHAVIOURS = frozenset({"output", "large_output"})


def message_text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c if isinstance(c, str) else ""


def sent_tool_calls(entry: ChatEntry) -> list[dict[str, str]]:
    """Tool calls the gateway sent in a chat response: ``{id, name, arguments}`` (raw text)."""
    resp = response_of(entry)
    sent = resp.get("sent") or ""
    calls: dict[int, dict[str, str]] = {}
    if resp.get("stream"):
        for line in sent.splitlines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            try:
                obj = json.loads(payload)
            except ValueError:
                continue
            for ch in (obj.get("choices") or []) if isinstance(obj, dict) else []:
                for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                    c = calls.setdefault(
                        int(tc.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                    )
                    c["id"] = tc.get("id") or c["id"]
                    fn = tc.get("function") or {}
                    c["name"] += fn.get("name") or ""
                    c["arguments"] += fn.get("arguments") or ""
        return [calls[i] for i in sorted(calls)]
    try:
        obj = json.loads(sent)
    except ValueError:
        return []
    out = []
    for ch in (obj.get("choices") or []) if isinstance(obj, dict) else []:
        for tc in (ch.get("message") or {}).get("tool_calls") or []:
            fn = tc.get("function") or {}
            args = fn.get("arguments")
            out.append(
                {
                    "id": tc.get("id") or "",
                    "name": fn.get("name") or "",
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                }
            )
    return out


def host_output(tool_entry: ToolEntry) -> tuple[str | None, dict[str, Any] | None]:
    """What the tool host answered: (output text, error object), from the bytes it sent."""
    try:
        data = json.loads(response_of(tool_entry).get("sent") or "")
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    out = data.get("output")
    err = data.get("error")
    return (out if isinstance(out, str) else None), (err if isinstance(err, dict) else None)


@dataclass
class Call:
    """One tool call sent by the gateway, followed on the wire."""

    entry: ChatEntry  # the chat attempt whose response carried the call
    id: str
    name: str
    arguments: str
    truncated: bool  # the response finished with finish_reason length
    executions: list[ToolEntry] = field(default_factory=list)  # hosted tool invocations
    result: str | None = None  # the tool result the agent sent back
    result_seq: Any = None


def follow_calls(ev: Evidence) -> Iterator[Call]:
    """Every tool call the gateway sent, with its executions and its result."""
    chat = ev.chat()
    tools = ev.tool_entries()
    for i, e in enumerate(chat):
        calls = sent_tool_calls(e)
        if not calls:
            continue
        start = int(e.get("t_arrival_ns", 0))
        ids = {c["id"] for c in calls if c["id"]}
        for c in calls:
            call = Call(e, c["id"], c["name"], c["arguments"], length_finished(e))
            # Without a result, stop at the next response that carries tool calls.
            end = next(
                (int(x.get("t_arrival_ns", 0)) for x in chat[i + 1 :] if sent_tool_calls(x)), None
            )
            for later in chat[i + 1 :]:
                for m in (later.get("body") or {}).get("messages") or []:
                    if m.get("role") == "tool" and m.get("tool_call_id") == c["id"]:
                        call.result, call.result_seq = message_text(m), later.get("seq")
                        end = int(later.get("t_arrival_ns", 0))
                        break
                if call.result is not None:
                    break
            # Executions happen between the response and the request carrying the result
            # (models reuse ids across responses, so an id alone is not enough).
            window = [
                t
                for t in tools
                if int(t.get("t_arrival_ns", 0)) >= start
                and (end is None or int(t.get("t_arrival_ns", 0)) < end)
            ]
            if any(t.get("call_id") in ids for t in window):
                call.executions = [t for t in window if t.get("call_id") == c["id"]]
            else:  # an agent that sends no ids (or its own) to the tool host
                call.executions = [t for t in window if t.get("tool") == c["name"]]
            yield call


def _scan(text: str) -> tuple[list[str], bool, bool, list[tuple[int, list[str]]]]:
    """(open brackets, inside a string, escape pending, structural commas with their stack)."""
    stack: list[str] = []
    in_str = esc = False
    commas: list[tuple[int, list[str]]] = []
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
        elif ch == ",":
            commas.append((i, list(stack)))
    return stack, in_str, esc, commas


def _close(prefix: str, stack: list[str]) -> str:
    return prefix + "".join("}" if s == "{" else "]" for s in reversed(stack))


def _dict_or_none(text: str) -> dict[str, Any] | None:
    try:
        v = json.loads(text)
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def classify_truncated(text: str) -> tuple[str, dict[str, Any] | None]:
    """Class of cut-short argument text and, when recoverable, the object it closes to.

    whole | recoverable | array | unrecoverable (seed 000, 恢复截断的工具参数: close unclosed
    strings and braces; an unclosed ``[`` is not guessed; what still does not parse is an error).
    """
    if _dict_or_none(text) is not None:
        return "whole", _dict_or_none(text)
    stack, in_str, esc, _commas = _scan(text)
    if "[" in stack:
        return "array", None
    simple = (text[:-1] if esc else text) + ('"' if in_str else "")
    obj = _dict_or_none(_close(simple, stack)) if stack else None
    if obj is not None:
        return "recoverable", obj
    return "unrecoverable", None


def _executed_args(call: Call) -> list[Any]:
    return [t.get("arguments") for t in call.executions]


def _executions(call: Call) -> str:
    """The arguments of each execution of a call, as JSON (what the tool host received)."""
    return listed(as_json(a) for a in _executed_args(call))


@check("TJS-02")
def check_tjs_02(ev: Evidence) -> Finding:
    """Cut-short arguments (missing } or ") are closed, executed, and a warning appended."""
    expected = (
        "arguments cut short by a length finish (missing '}' or '\"') are closed and executed "
        "with the closed object, and the result ends with a truncation warning after the output"
    )
    judged = 0
    for call in follow_calls(ev):
        if not call.truncated:
            continue
        kind, obj = classify_truncated(call.arguments)
        if kind != "recoverable":
            continue
        judged += 1
        where = f"call {call.id!r} ({call.arguments!r})"
        if not call.executions:
            return failed(
                expected, f"{where} was never executed; result: {(call.result or '')[:200]!r}"
            )
        if obj not in _executed_args(call):
            return failed(
                expected, f"{where} executed with {_executions(call)}, not {as_json(obj)}"
            )
        if call.result is None:
            return failed(expected, f"{where}: no tool result sent back")
        out, _err = host_output(call.executions[-1])
        pos = call.result.find(out) + len(out) if out and out in call.result else 0
        if out and out not in call.result:
            return failed(expected, f"{where}: result lacks the tool output {out[:80]!r}")
        tail = call.result[pos:].lower()
        if "truncat" not in tail and "截断" not in tail:
            return failed(
                expected, f"{where}: no truncation warning after the output: {call.result[:200]!r}"
            )
    if not judged:
        return not_applicable(expected, "no recoverable cut-short arguments in this run")
    return passed(expected, f"{judged} cut-short call(s) closed, executed and warned")


def _error_with_hint(kinds: frozenset[str], expected: str, what: str, ev: Evidence) -> Finding:
    """Truncated calls of ``kinds``: never executed, and a result carrying the exact hint."""
    judged = 0
    for call in follow_calls(ev):
        if not call.truncated or classify_truncated(call.arguments)[0] not in kinds:
            continue
        where = f"call {call.id!r} ({call.arguments!r})"
        if call.executions:
            return failed(expected, f"{where} was executed with {_executions(call)}")
        if call.result is None and not turn_over(ev):
            continue  # the result may still be sent
        judged += 1
        if call.result is None:
            return failed(expected, f"{where}: no tool result sent back")
        if TRUNCATION_HINT not in call.result:
            return failed(expected, f"{where}: result lacks the hint: {call.result[:200]!r}")
    if not judged:
        return not_applicable(expected, f"no {what} in a length-finished response in this run")
    return passed(expected, f"{judged} call(s) not executed, error with the hint")


@check("TJS-03", final=True)
def check_tjs_03(ev: Evidence) -> Finding:
    """An unclosed '[' is not recovered: not executed, the standard error (with the hint)."""
    expected = (
        "arguments cut short inside an unclosed '[' are not recovered: the tool is not executed "
        f"and the result is the standard error, containing {TRUNCATION_HINT!r}"
    )
    return _error_with_hint(
        frozenset({"array"}), expected, "arguments cut inside an unclosed '['", ev
    )


@check("TJS-04", final=True)
def check_tjs_04(ev: Evidence) -> Finding:
    """Arguments that no closing makes parse: not executed, error with the hint."""
    expected = (
        "cut-short arguments that still do not parse once closed are not executed and the "
        f"result is an error containing {TRUNCATION_HINT!r}"
    )
    return _error_with_hint(
        frozenset({"unrecoverable"}), expected, "unrecoverable cut-short arguments", ev
    )


@check("TJS-01", final=True)
def check_tjs_01(ev: Evidence) -> Finding:
    """Malformed arguments in a length-finished response: not run, the error carries the hint.

    Malformed means what the seed's repair (TJS-02) cannot fix: an unclosed ``[`` (TJS-03) or
    text that closing strings and braces does not make parse (TJS-04). Whole arguments and
    arguments the repair fixes are not this criterion's business, even in a length finish.
    Whether the call ran is read from the tool host's journal.
    """
    expected = (
        "a tool call in a length-finished response whose arguments are malformed (an unclosed "
        "'[', or text that closing strings and braces does not make parse) is not executed and "
        f"its result contains {TRUNCATION_HINT!r}"
    )
    return _error_with_hint(
        frozenset({"array", "unrecoverable"}), expected, "malformed cut-short arguments", ev
    )


_INVALID_WORDS = ("invalid", "malformed", "parse", "decode", "not valid", "无效", "解析")


@check("TJS-05", final=True)
def check_tjs_05(ev: Evidence) -> Finding:
    """Malformed arguments without truncation: not executed, invalid-JSON error, no hint."""
    expected = (
        "malformed arguments without a length finish: not executed, a result saying the JSON is "
        f"invalid, without {TRUNCATION_HINT!r}"
    )
    judged = 0
    for call in follow_calls(ev):
        if call.truncated or not call.arguments.strip():
            continue
        try:
            json.loads(call.arguments)
            continue
        except ValueError:
            pass
        where = f"call {call.id!r} ({call.arguments!r})"
        if call.executions:
            return failed(expected, f"{where} was executed with {_executions(call)}")
        if call.result is None and not turn_over(ev):
            continue  # the result may still be sent
        judged += 1
        if call.result is None:
            return failed(expected, f"{where}: no tool result sent back")
        low = call.result.lower()
        if "json" not in low or not any(w in low for w in _INVALID_WORDS):
            return failed(
                expected, f"{where}: result does not say invalid JSON: {call.result[:200]!r}"
            )
        if TRUNCATION_HINT in call.result:
            return failed(
                expected, f"{where}: result carries the truncation hint: {call.result[:200]!r}"
            )
    if not judged:
        return not_applicable(expected, "no malformed arguments outside a length finish")
    return passed(expected, f"{judged} malformed call(s) reported as invalid JSON, no hint")


def _decodes_to(value: Any, want: str) -> Any:
    """The decoded value when ``value`` is a JSON text of JSON-schema type ``want``, else None."""
    if not isinstance(value, str):
        return None
    try:
        inner = json.loads(value)
    except ValueError:
        return None
    if want == "object" and isinstance(inner, dict):
        return inner
    if want == "array" and isinstance(inner, list):
        return inner
    return None


def repaired_arguments(call_args: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The object an object-sent-as-string repair yields, or None when nothing needs it.

    Whole arguments that are a JSON string holding an object, or top-level properties whose
    schema type is object/array but whose value is a JSON text of that type.
    """
    try:
        value = json.loads(call_args)
    except ValueError:
        return None
    if isinstance(value, str):
        whole: dict[str, Any] | None = _decodes_to(value, "object")
        return whole
    if not isinstance(value, dict):
        return None
    props = (schema or {}).get("properties") or {}
    fixed, changed = dict(value), False
    for k, v in value.items():
        want = (props.get(k) or {}).get("type")
        inner = _decodes_to(v, want) if want in ("object", "array") else None
        if inner is not None:
            fixed[k], changed = inner, True
    return fixed if changed else None


def tool_schemas(ev: Evidence) -> dict[str, dict[str, Any]]:
    return {
        t["name"]: t.get("parameters") or {}
        for t in ev.tools
        if isinstance(t, dict) and t.get("name")
    }


@check("TJS-06")
def check_tjs_06(ev: Evidence) -> Finding:
    """An object sent as a JSON-encoded string is decoded before execution."""
    expected = (
        "arguments (or an object/array field) sent as a JSON-encoded string are decoded and the "
        "tool executed with the decoded value"
    )
    schemas = tool_schemas(ev)
    judged = 0
    for call in follow_calls(ev):
        if call.truncated:
            continue
        want = repaired_arguments(call.arguments, schemas.get(call.name))
        if want is None:
            continue
        judged += 1
        where = f"call {call.id!r} ({call.arguments!r})"
        if not call.executions:
            return failed(expected, f"{where} not executed; result: {(call.result or '')[:200]!r}")
        if want not in _executed_args(call):
            return failed(
                expected, f"{where} executed with {_executions(call)}, not {as_json(want)}"
            )
    if not judged:
        return not_applicable(expected, "no object sent as a JSON-encoded string in this run")
    return passed(expected, f"{judged} double-encoded call(s) decoded before execution")
