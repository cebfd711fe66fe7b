"""Tool-call argument parsing for the reference agent (TJS-01..06, TOL-02).

Theory of operation: arguments arrive as a dict or as JSON text. Text that fails to
parse while the response was cut short (``finish_reason == "length"``) is handed to
``recover_truncated_json``, which closes an unterminated string and any unclosed
``{`` braces and nothing else (seed 000's rule); an unclosed ``[`` is never guessed.
A closed text that parses is used with a warning that the caller appends to the tool's
result; one that still does not parse (a key without a value, a trailing comma, a cut
literal) is the TJS-04 error, with the truncation hint. Parsed arguments are then
validated against the tool's JSON Schema so the model learns which field is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ._behaviours import Behaviours

__all__ = [
    "TRUNCATION_HINT",
    "TRUNCATION_WARNING",
    "ParsedArgs",
    "parse_tool_arguments",
    "recover_truncated_json",
]

TRUNCATION_HINT = "(output truncated, please reduce your output)"
TRUNCATION_WARNING = (
    "[warning] The tool arguments were truncated and automatically repaired "
    "(unterminated string or braces closed); check the result and keep "
    "arguments shorter. " + TRUNCATION_HINT
)

_HEX = set("0123456789abcdefABCDEF")
_ALL_ON = Behaviours()


@dataclass(frozen=True)
class ParsedArgs:
    """Outcome of parsing one tool call's arguments."""

    ok: bool
    arguments: dict[str, Any] | None
    error: str | None
    warning: str | None


def recover_truncated_json(
    text: str, *, strict: bool = True, close_arrays: bool = False
) -> str | None:
    """Close a truncated JSON object, or return None when it cannot be recovered.

    Rule: close an unclosed string (an unfinished escape in it is dropped) and
    unclosed ``{`` braces. An unclosed ``[`` means no recovery. The result may still
    not parse (``{"a": 1, "b": ``): the caller reports that (TJS-04). ``strict=False``
    is a broken copy that goes past the rule: a dangling partial key, ``"key"`` or
    ``"key":`` with no value, and a trailing comma are dropped so the result parses.
    ``close_arrays=True`` is the naive repair of a broken copy: unclosed ``[`` are closed too.
    Never raises.
    """
    if not isinstance(text, str):
        return None
    scan = _Scan()
    for i, ch in enumerate(text):
        if not scan.feed(i, ch):
            return None  # not JSON cut short: a bad escape or a mismatched bracket
    stack = scan.stack
    if not stack and not scan.in_str:
        return None  # nothing unclosed: not a truncation we can repair
    if ("[" in stack and not close_arrays) or not stack or stack[0] != "{":
        return None
    closing = "".join("}" if s == "{" else "]" for s in reversed(stack))
    return (_cut_strict(text, scan) if strict else _cut_lenient(text, scan)) + closing


@dataclass
class _Scan:
    """A scan of JSON text, character by character: what is still open where it stopped, and
    the last token seen (what the lenient repair of a broken copy cuts back to)."""

    stack: list[str] = field(default_factory=list)  # the unclosed ``{`` and ``[``
    in_str: bool = False
    esc_start: int = -1  # index of the backslash of an unfinished escape
    uni_left: int = 0  # hex digits still expected after \u
    str_start: int = -1
    str_is_key: bool = False
    prev_sig: str = ""  # previous significant char outside strings ('"' for a string)
    last_key_start: int = -1
    last_token: str = ""  # open | key | colon | comma | value

    def feed(self, i: int, ch: str) -> bool:
        """Take the character ``ch`` at index ``i``; False when the text cannot be JSON."""
        if self.in_str:
            return self._in_string(i, ch)
        if ch.isspace():
            return True
        return self._outside(i, ch)

    def _in_string(self, i: int, ch: str) -> bool:
        if self.esc_start >= 0:
            return self._escape(ch)
        if ch == "\\":
            self.esc_start = i
        elif ch == '"':
            self.in_str = False
            self.prev_sig = '"'
            if self.str_is_key:
                self.last_key_start = self.str_start
                self.last_token = "key"
            else:
                self.last_token = "value"
        return True

    def _escape(self, ch: str) -> bool:
        """A character of an escape sequence (after its backslash)."""
        if self.uni_left:
            if ch not in _HEX:
                return False
            self.uni_left -= 1
            if self.uni_left == 0:
                self.esc_start = -1
        elif ch == "u":
            self.uni_left = 4
        else:
            self.esc_start = -1
        return True

    def _outside(self, i: int, ch: str) -> bool:
        """A significant character outside strings."""
        if ch == '"':
            self.in_str = True
            self.str_start = i
            self.str_is_key = (
                bool(self.stack) and self.stack[-1] == "{" and self.prev_sig in ("{", ",")
            )
            return True  # prev_sig stays: a string is marked when it closes
        if ch in "{[":
            self.stack.append(ch)
            self.last_token = "open"
        elif ch in "}]":
            if not self.stack or self.stack[-1] != ("{" if ch == "}" else "["):
                return False
            self.stack.pop()
            self.last_token = "value"
        else:
            self.last_token = {":": "colon", ",": "comma"}.get(ch, "value")
        self.prev_sig = ch
        return True


def _cut_strict(text: str, scan: _Scan) -> str:
    """The rule: an unclosed string closed, an unfinished escape in it dropped."""
    if not scan.in_str:
        return text
    return (text[: scan.esc_start] if scan.esc_start >= 0 else text) + '"'


def _cut_lenient(text: str, scan: _Scan) -> str:
    """A broken copy's repair: a dangling key (with or without its colon) and a trailing
    comma dropped too, so that the closed text parses."""
    out = text
    if scan.in_str:
        if scan.str_is_key:
            out = text[: scan.str_start]
        else:
            out = (text[: scan.esc_start] if scan.esc_start >= 0 else text) + '"'
    elif scan.last_token in ("key", "colon"):
        out = text[: scan.last_key_start]
    out = out.rstrip()
    if out.endswith(","):
        out = out[:-1]
    return out


def _expected(prop: Any) -> str:
    """What a property's schema expects, in words: its type, enum or format."""
    if not isinstance(prop, dict):
        return "a value"
    if "enum" in prop:
        return "one of " + ", ".join(repr(v) for v in prop["enum"])
    kind = prop.get("type")
    words = f"type {kind!r}" if kind else "a value"
    if prop.get("format"):
        words += f" in format {prop['format']!r}"
    return words


def _decode_string_fields(args: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """TJS-06: fields the schema types as object/array but that arrived as JSON text, decoded."""
    props = (schema or {}).get("properties") or {}
    out = dict(args)
    for key, value in args.items():
        want = (props.get(key) or {}).get("type")
        if want not in ("object", "array") or not isinstance(value, str):
            continue
        try:
            inner = json.loads(value)
        except json.JSONDecodeError:
            continue
        if isinstance(inner, dict if want == "object" else list):
            out[key] = inner
    return out


def _describe_error(err: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in err.absolute_path)
    field = path or "(root)"
    if err.validator == "type":
        return f"field '{field}': expected type {err.validator_value!r}, got {type(err.instance).__name__} {err.instance!r}"
    if err.validator == "format":
        return f"field '{field}': expected format {err.validator_value!r}, got {err.instance!r}"
    if err.validator == "required":
        # jsonschema's stubs type these loosely; for "required" they are a list and a schema.
        required: list[str] = list(err.validator_value)  # type: ignore[arg-type]
        given: Any = err.instance or {}
        missing = [k for k in required if k not in given]
        where = f" in '{path}'" if path else ""
        schema: Any = err.schema
        props = (schema if isinstance(schema, dict) else {}).get("properties") or {}
        # Seed 004 §7.3.1: say which field and what it expects, so the model can fix the call.
        named = [f"{m!r} (expected {_expected(props.get(m))})" for m in missing]
        return f"missing required field(s){where}: " + ", ".join(named)
    if err.validator == "additionalProperties":
        return f"field '{field}': {err.message}"
    return f"field '{field}': {err.message}"


def _validate(args: dict[str, Any], schema: dict[str, Any] | None) -> str | None:
    if not schema:
        return None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    except jsonschema.SchemaError as exc:
        return f"Tool schema is invalid: {exc.message}"
    if not errors:
        return None
    return "Invalid tool arguments: " + "; ".join(_describe_error(e) for e in errors)


def _done(
    args: dict[str, Any], schema: dict[str, Any] | None, warning: str | None, b: Behaviours
) -> ParsedArgs:
    if b.decode_string_arguments:
        args = _decode_string_fields(args, schema)
    problem = _validate(args, schema) if b.validate_arguments else None
    if problem:
        return ParsedArgs(False, None, problem, warning)
    return ParsedArgs(True, args, None, warning)


def parse_tool_arguments(
    raw: str | dict[str, Any],
    *,
    truncated: bool,
    schema: dict[str, Any] | None,
    strict: bool = True,
    b: Behaviours = _ALL_ON,
) -> ParsedArgs:
    """Parse, repair and validate one tool call's arguments.

    ``truncated`` is True when the response carrying the call ended with
    ``finish_reason == "length"``; then errors carry TRUNCATION_HINT. ``strict``: see
    :func:`recover_truncated_json`. ``b``: the switches of the broken copies (TJS-02, TJS-03,
    TJS-05, TJS-06, TOL-02).
    """
    if isinstance(raw, dict):
        return _done(raw, schema, None, b)
    if not isinstance(raw, str):
        return ParsedArgs(
            False, None, f"Tool arguments must be a JSON object, got {type(raw).__name__}", None
        )
    text = raw.strip()
    if not text:
        return _done({}, schema, None, b)
    hint = f" {TRUNCATION_HINT}" if truncated or not b.hint_only_on_length else ""
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        note = ""
        if truncated and b.recover_truncated_arguments:
            fixed = recover_truncated_json(
                text, strict=strict, close_arrays=not b.refuse_unclosed_array
            )
            if fixed is not None:
                try:
                    value = json.loads(fixed)
                except json.JSONDecodeError:
                    value = None
                if isinstance(value, dict):
                    return _done(value, schema, TRUNCATION_WARNING, b)
                # TJS-04: closed as far as the rule goes, and still not JSON.
                note = " Closing the cut-short string and braces does not make it valid JSON."
        return ParsedArgs(
            False,
            None,
            f"Invalid JSON in tool arguments: {exc.msg} at line {exc.lineno} column {exc.colno}."
            f"{note}{hint}",
            None,
        )
    if isinstance(value, str) and b.decode_string_arguments:
        # TJS-06: an object double-encoded as a JSON string.
        try:
            inner = json.loads(value)
        except json.JSONDecodeError:
            inner = None
        if isinstance(inner, dict):
            return _done(inner, schema, None, b)
    if not isinstance(value, dict):
        return ParsedArgs(
            False,
            None,
            f"Tool arguments must be a JSON object, got {type(value).__name__}.{hint}",
            None,
        )
    return _done(value, schema, None, b)
