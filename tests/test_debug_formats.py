"""The readers of an agent's own debug files (conformance.judging.debug_formats).

The files are cut down from what Claude Code 2.1.197 and 2.1.332 wrote on `dbg-01-*` and
`dbg-03-*` (docs/agents/claude-code.md): the same record types and fields, most fields left out.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.adapters.shipped_profile import DEBUG_FORMATS
from conformance.judging.debug_formats import (
    FORMATS,
    read_http_400,
    read_tool_calls,
    unprefixed,
)

T = "t/-tmp-w/5b30442c.jsonl"  # a transcript (any *.jsonl)
LOG = "claude-debug.log"  # its debug log (any other file)


def jsonl(*records: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def user(content: Any, at: str = "2026-12-07T12:18:02.262Z") -> dict[str, Any]:
    return {"type": "user", "timestamp": at, "message": {"role": "user", "content": content}}


def assistant(content: Any, at: str = "2026-12-07T12:18:05.000Z", **kw: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "timestamp": at,
        "message": {"role": "assistant", "model": "conformance-model", "content": content},
        **kw,
    }


def tool_use(cid: str, name: str = "mcp__conformance__write_file") -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": {"path": "a.txt"}}


def tool_result(cid: str, error: bool | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"tool_use_id": cid, "type": "tool_result", "content": "x"}
    if error is not None:
        block["is_error"] = error
    return block


# 2.1.197 on dbg-01: the prompt, the dispatch and the 400 in its debug log, the error record.
LOG_197 = (
    "2026-12-07T12:17:48.023Z [ERROR] Failed to save config with lock: Error: ENOENT\n"
    "2026-12-07T12:18:03.716Z [DEBUG] [API:timing] dispatching to firstParty "
    "model=conformance-model\n"
    "2026-12-07T12:18:03.938Z [ERROR] API error (attempt 1/11): 400 400 "
    '{"type":"error","error":{"type":"invalid_request_error","message":"simulated error 400"}}\n'
)
ERROR_RECORD = assistant(
    [{"type": "text", "text": "API Error: 400 simulated error 400"}],
    at="2026-12-07T12:18:04.129Z",
    isApiErrorMessage=True,
    apiErrorStatus=400,
)
FILES_197 = {
    T: jsonl(
        {"type": "queue-operation", "operation": "enqueue", "content": "Say hello."},
        user("Say hello."),
        ERROR_RECORD,
    ),
    LOG: LOG_197,
}
# 2.1.332 on dbg-01: an api-request record per request (its params), and it retried the 400.
API_REQUEST = {
    "type": "api-request",
    "timestamp": "2026-12-07T12:18:03.000Z",
    "params": {"model": "conformance-model", "max_tokens": 32000, "thinking": {"type": "adaptive"}},
}
FILES_332 = {
    T: jsonl(
        user("Say hello."),
        API_REQUEST,
        {**API_REQUEST, "timestamp": "2026-12-07T12:18:04.500Z", "params": {"model": "later"}},
        assistant([{"type": "text", "text": "This reply should not be reached."}]),
    ),
    LOG: LOG_197.replace("[API:timing] dispatching to firstParty model=conformance-model", "x"),
}


def test_the_format_names_are_the_profiles():
    assert set(FORMATS) == set(DEBUG_FORMATS)


def test_2_1_332_holds_every_part_of_the_400():
    dump = read_http_400("claude-code", FILES_332)
    assert dump.missing() == [], dump
    assert dump.error and dump.error.startswith(f"{LOG}:3: API error (attempt 1/11): 400")
    # The request's record before the 400, not the retry's after it.
    assert dump.model == f"{T}:2: api-request params.model 'conformance-model'"
    assert dump.config == f"{T}:2: api-request params max_tokens, thinking"
    assert dump.messages == f"1 message record(s) before the 400, from {T}:1"


def test_2_1_197_saves_no_config():
    dump = read_http_400("claude-code", FILES_197)
    assert dump.missing() == ["config"]
    assert dump.model == f"{LOG}:2: dispatched with model=conformance-model"
    assert dump.error and dump.error.startswith(f"{LOG}:3:")
    # The error record is not a message of the request.
    assert dump.messages == f"1 message record(s) before the 400, from {T}:2"


def test_the_error_from_the_transcript_when_the_log_has_none():
    dump = read_http_400("claude-code", {T: FILES_197[T]})
    assert (
        dump.error == f"{T}:3: API error record, status 400: 'API Error: 400 simulated error 400'"
    )
    assert dump.missing() == ["model", "config"]


def test_nothing_found_names_every_part():
    dump = read_http_400("claude-code", {LOG: "no log lines here\n"})
    assert dump.missing() == ["messages", "model", "config", "error"] and dump.readable


def test_unknown_format_is_said_not_raised():
    for dump in (read_http_400("x-agent", FILES_197), read_tool_calls("x-agent", FILES_197)):
        assert not dump.readable
        assert dump.notes == ["no reader for debug file format 'x-agent' (known: claude-code)"]


def test_one_record_per_tool_call_with_its_result():
    files = {
        T: jsonl(
            user("Write hi to a.txt and b.txt."),
            assistant([tool_use("call_1")]),
            assistant([tool_use("call_2")]),
            assistant([tool_use("call_3", "Bash")]),
            user([tool_result("call_1")]),
            user([tool_result("call_2", error=True)]),
        ),
        LOG: "2026-12-07T12:16:52.088Z [INFO] [Stall] tool_dispatch_start tool=mcp_tool\n",
    }
    log = read_tool_calls("claude-code", files)
    got = [(r.id, r.name, r.status, r.where) for r in log.records]
    assert got == [
        ("call_1", "mcp__conformance__write_file", "ok", f"{T}:2"),
        ("call_2", "mcp__conformance__write_file", "error", f"{T}:3"),
        ("call_3", "Bash", None, f"{T}:4"),  # no result recorded
    ]
    assert log.sources == [T] and log.notes == []


def test_garbled_lines_are_noted():
    text = jsonl(assistant([tool_use("c1")])) + "not json\n[1, 2]\n" + "{\n" * 5
    log = read_tool_calls("claude-code", {T: text})
    assert [r.id for r in log.records] == ["c1"]
    assert log.notes[:2] == [
        f"{T}:2: not a JSON object: 'not json'",
        f"{T}:3: not a JSON object: '[1, 2]'",
    ]
    assert log.notes[-1] == f"{T}: 4 more line(s) not a JSON object"


def test_a_line_nested_past_the_parsers_depth_is_noted():
    log = read_tool_calls("claude-code", {T: "[" * 100_000 + "\n"})
    assert log.records == [] and log.notes == [f"{T}:1: not a JSON object: {'[' * 60!r}"]


def test_unprefixed():
    assert unprefixed("mcp__conformance__write_file") == "write_file"
    assert unprefixed("mcp__my_server__a__b") == "a__b"
    assert unprefixed("write_file") == "write_file"
    assert unprefixed("mcp__x") == "mcp__x"


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    )


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8), _nested, max_leaves=12
)
_known = st.sampled_from(
    [
        "type",
        "message",
        "content",
        "id",
        "name",
        "tool_use_id",
        "is_error",
        "timestamp",
        "params",
        "isApiErrorMessage",
        "apiErrorStatus",
    ]
)
_record = st.dictionaries(_known | st.text(max_size=5), _json, max_size=6)
_line = (
    st.text(max_size=40)
    | _record.map(json.dumps)
    | st.builds(
        lambda t, s: f"{t} [ERROR] {s}",
        st.sampled_from(["2026-12-07T12:18:03.938Z", "2026-13-40T99:99:99Z", "2026-12-07T1"])
        | st.text(max_size=30),
        st.sampled_from(["API error (attempt 1/11): 400 {", "dispatching to x model=m"])
        | st.text(max_size=30),
    )
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([T, LOG, "a.jsonl", "b.txt"]), st.lists(_line, max_size=6).map("\n".join)
    )
)
def test_garbled_files_never_raise(files):
    dump = read_http_400("claude-code", files)
    assert set(dump.missing()) <= set(dump.PARTS)
    log = read_tool_calls("claude-code", files)
    assert all(isinstance(r.id, str) and r.status in ("ok", "error", None) for r in log.records)
