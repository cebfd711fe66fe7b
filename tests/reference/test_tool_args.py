"""Tests for conformance.reference.tool_args (TJS-01..06, TOL-02)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.reference import Behaviours
from conformance.reference.tool_args import (
    TRUNCATION_HINT,
    parse_tool_arguments,
    recover_truncated_json,
)

HINT = "(output truncated, please reduce your output)"


def test_hint_is_exact_seed_string() -> None:
    assert TRUNCATION_HINT == HINT


def test_TJS_01_malformed_truncated_error_contains_hint() -> None:
    res = parse_tool_arguments('{"path": [1, 2', truncated=True, schema=None)
    assert not res.ok and res.arguments is None
    assert HINT in res.error


def test_TJS_02_missing_brace_recovered_with_warning() -> None:
    res = parse_tool_arguments(
        '{"path": "a.txt", "content": "hello wor', truncated=True, schema=None
    )
    assert res.ok
    assert res.arguments == {"path": "a.txt", "content": "hello wor"}
    assert res.warning and "truncated" in res.warning


def test_TJS_02_nested_braces_closed() -> None:
    assert json.loads(recover_truncated_json('{"a": {"b": 1')) == {"a": {"b": 1}}


def test_TJS_02_not_recovered_when_not_truncated() -> None:
    res = parse_tool_arguments('{"path": "a.txt"', truncated=False, schema=None)
    assert not res.ok and HINT not in res.error


def test_TJS_03_unclosed_bracket_no_recovery() -> None:
    assert recover_truncated_json('{"files": ["a", "b"') is None
    res = parse_tool_arguments('{"files": ["a", "b"', truncated=True, schema=None)
    assert not res.ok and "Invalid JSON" in res.error and HINT in res.error


def test_TJS_03_closed_bracket_is_fine() -> None:
    assert json.loads(recover_truncated_json('{"f": ["a"], "g": "x')) == {"f": ["a"], "g": "x"}


def test_TJS_04_recovered_still_unparsable_gives_error_with_hint() -> None:
    res = parse_tool_arguments('{"a": tru', truncated=True, schema=None)
    assert not res.ok and HINT in res.error


def test_TJS_04_a_dangling_key_is_not_dropped() -> None:
    # Closing strings and braces only (seed 000): the key without a value stays unparsable.
    text = '{"path": "a.txt", "content": '
    assert recover_truncated_json(text) == '{"path": "a.txt", "content": }'
    res = parse_tool_arguments(text, truncated=True, schema=None)
    assert not res.ok and res.arguments is None and res.error.endswith(HINT)
    assert "does not make it valid JSON" in res.error


def test_TJS_04_a_cut_key_or_trailing_comma_is_not_repaired_either() -> None:
    for text in ['{"path": "a.txt", "con', '{"path": "a.txt",', '{"path": "a.txt", "content"']:
        res = parse_tool_arguments(text, truncated=True, schema=None)
        assert not res.ok and HINT in res.error, text


def test_TJS_04_lenient_recovery_is_the_broken_copy() -> None:
    text = '{"path": "a.txt", "content": '
    assert recover_truncated_json(text, strict=False) == '{"path": "a.txt"}'
    res = parse_tool_arguments(text, truncated=True, schema=None, strict=False)
    assert res.ok and res.arguments == {"path": "a.txt"}


def test_TJS_02_an_unfinished_escape_is_dropped_when_the_string_is_closed() -> None:
    assert json.loads(recover_truncated_json('{"a": "x\\')) == {"a": "x"}
    assert json.loads(recover_truncated_json('{"a": "x\\u00')) == {"a": "x"}


def test_TJS_05_invalid_json_without_truncation_has_no_hint() -> None:
    res = parse_tool_arguments("{'a': 1}", truncated=False, schema=None)
    assert not res.ok
    assert "Invalid JSON" in res.error and HINT not in res.error


def test_TJS_06_double_encoded_object_repaired() -> None:
    raw = json.dumps(json.dumps({"path": "x"}))
    res = parse_tool_arguments(raw, truncated=False, schema=None)
    assert res.ok and res.arguments == {"path": "x"} and res.warning is None


def test_dict_passes_through_and_empty_is_empty_object() -> None:
    assert parse_tool_arguments({"a": 1}, truncated=False, schema=None).arguments == {"a": 1}
    assert parse_tool_arguments("  ", truncated=False, schema=None).arguments == {}


def test_non_object_json_rejected() -> None:
    res = parse_tool_arguments("[1, 2]", truncated=False, schema=None)
    assert not res.ok and "JSON object" in res.error


SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer"},
        "when": {"type": "string", "format": "date"},
    },
    "required": ["path"],
}


def test_TOL_02_wrong_type_names_field_and_type() -> None:
    res = parse_tool_arguments('{"path": "a", "limit": "ten"}', truncated=False, schema=SCHEMA)
    assert not res.ok and "limit" in res.error and "integer" in res.error


def test_TOL_02_missing_required_field_named() -> None:
    res = parse_tool_arguments("{}", truncated=False, schema=SCHEMA)
    assert not res.ok and "path" in res.error and "required" in res.error


def test_TOL_02_bad_format_named() -> None:
    res = parse_tool_arguments({"path": "a", "when": "yesterday"}, truncated=False, schema=SCHEMA)
    assert not res.ok and "when" in res.error and "date" in res.error


def test_TOL_02_valid_arguments_pass() -> None:
    res = parse_tool_arguments({"path": "a", "limit": 3}, truncated=False, schema=SCHEMA)
    assert res.ok and res.error is None


def test_TOL_02_recovered_args_are_validated_too() -> None:
    res = parse_tool_arguments('{"limit": 3', truncated=True, schema=SCHEMA)
    assert not res.ok and "path" in res.error


def test_recover_never_raises_on_garbage() -> None:
    for text in ["", "}", "]", '"', "{]", "[{", '{"a"::', "\\", '{"a": "\\']:
        out = recover_truncated_json(text)
        assert out is None or isinstance(out, str)


# Objects without arrays: nested dicts of scalars.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
)
_objects = st.recursive(
    st.dictionaries(st.text(max_size=6), _scalars, min_size=1, max_size=4),
    lambda inner: st.dictionaries(
        st.text(max_size=6), st.one_of(_scalars, inner), min_size=1, max_size=4
    ),
    max_leaves=10,
)


def _cut_points(text: str) -> tuple[list[int], list[int], list[int]]:
    """Cut points inside value strings, inside key strings, and just after a complete value."""
    values, keys, after = [], [], []
    in_str = esc = is_key = False
    prev = ""  # the previous significant character outside strings
    for i, ch in enumerate(text):
        if in_str:
            (keys if is_key else values).append(i)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
                prev = '"'
                # the string ends at i+1; after a value if followed by , or }
                rest = text[i + 1 :].lstrip()
                if rest[:1] in (",", "}"):
                    after.append(i + 1)
            continue
        if ch == '"':
            in_str, is_key = True, prev in ("{", ",")
        elif ch == "}":
            after.append(i + 1)
        elif ch not in " :,{" and text[i + 1 : i + 2] in (",", "}"):
            after.append(i + 1)  # end of a number / literal
        if not ch.isspace() and ch != '"':
            prev = ch
    return values, keys, after


@settings(max_examples=100, deadline=None)
@given(obj=_objects, data=st.data(), ascii_only=st.booleans())
def test_TJS_02_property_prefix_recovers_to_prefix_keys(
    obj: dict, data: st.DataObject, ascii_only: bool
) -> None:
    text = json.dumps(obj, ensure_ascii=ascii_only)
    values, _keys, after = _cut_points(text)
    cuts = [c for c in values + after if 0 < c < len(text)]
    if not cuts:
        return
    cut = data.draw(st.sampled_from(cuts))
    prefix = text[:cut]
    fixed = recover_truncated_json(prefix)
    assert fixed is not None, prefix
    value = json.loads(fixed)
    assert isinstance(value, dict)
    keys = list(value)
    assert keys == list(obj)[: len(keys)]


@settings(max_examples=100, deadline=None)
@given(obj=_objects, data=st.data())
def test_TJS_04_property_a_cut_inside_a_key_stays_unparsable(
    obj: dict, data: st.DataObject
) -> None:
    # Closing strings and braces leaves a key without a value: not JSON, so no call runs.
    text = json.dumps(obj)
    _values, keys, _after = _cut_points(text)
    if not keys:
        return
    prefix = text[: data.draw(st.sampled_from(keys))]
    res = parse_tool_arguments(prefix, truncated=True, schema=None)
    assert not res.ok and HINT in res.error, prefix
    # The broken copy drops the dangling key and parses what is left.
    lenient = json.loads(recover_truncated_json(prefix, strict=False))
    assert list(lenient) == list(obj)[: len(lenient)]


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=40))
def test_recover_never_raises_property(text: str) -> None:
    out = recover_truncated_json(text)
    assert out is None or isinstance(out, str)


_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "start": {"type": "integer"},
        "options": {"type": "object"},
    },
    "required": ["path", "start"],
}


def test_TOL_02_a_missing_field_is_named_with_what_it_expects() -> None:
    r = parse_tool_arguments('{"path": "a.txt"}', truncated=False, schema=_SCHEMA)
    assert not r.ok
    assert "'start' (expected type 'integer')" in r.error


def test_TJS_06_an_object_field_sent_as_json_text_is_decoded() -> None:
    raw = '{"path": "a", "start": 1, "options": "{\\"mode\\": \\"fast\\"}"}'
    r = parse_tool_arguments(raw, truncated=False, schema=_SCHEMA)
    assert r.ok and r.arguments["options"] == {"mode": "fast"}


def test_TJS_06_text_that_is_not_the_expected_json_stays_an_error() -> None:
    raw = '{"path": "a", "start": 1, "options": "[1, 2]"}'
    r = parse_tool_arguments(raw, truncated=False, schema=_SCHEMA)
    assert not r.ok and "'options'" in r.error


# Broken copies: each switch off gives its classic bug, and only that one.
def test_broken_copy_closes_an_unclosed_array() -> None:
    text = '{"path": "a.txt", "lines": ["one", "tw'
    assert recover_truncated_json(text) is None
    fixed = recover_truncated_json(text, close_arrays=True)
    assert json.loads(fixed or "") == {"path": "a.txt", "lines": ["one", "tw"]}
    res = parse_tool_arguments(
        text, truncated=True, schema=None, b=Behaviours(refuse_unclosed_array=False)
    )
    assert res.ok and res.warning


def test_broken_copies_of_repair_hint_decoding_and_validation() -> None:
    cut = parse_tool_arguments(
        '{"path": "a.txt"',
        truncated=True,
        schema=None,
        b=Behaviours(recover_truncated_arguments=False),
    )
    assert not cut.ok and HINT in (cut.error or "")
    bad = parse_tool_arguments(
        '{"a": x}', truncated=False, schema=None, b=Behaviours(hint_only_on_length=False)
    )
    assert not bad.ok and HINT in (bad.error or "")
    raw = json.dumps(json.dumps({"path": "a"}))
    assert parse_tool_arguments(raw, truncated=False, schema=None).ok
    off = Behaviours(decode_string_arguments=False)
    assert not parse_tool_arguments(raw, truncated=False, schema=None, b=off).ok
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    args = {"n": "ten"}
    assert not parse_tool_arguments(args, truncated=False, schema=schema).ok
    unchecked = Behaviours(validate_arguments=False)
    assert parse_tool_arguments(args, truncated=False, schema=schema, b=unchecked).arguments == args
