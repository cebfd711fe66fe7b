"""Round trips through every dialect: render a reply, read it back, get the chat view.

Each dialect module both renders a neutral reply (stream and JSON, errors) and reads its wire
form back into the canonical chat-completions view that the checks read. The two directions
are held together here: for each dialect and each reply, the read-back of the rendering says
the same as the chat rendering of the same reply, on what the checks judge (text, reasoning,
tool calls, finish reason, usage, the end-of-stream marker, errors).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.dialects import CHAT, NAMES, REGISTRY, Dialect, _protocol
from fakes.dialects import openai_chat as oc
from fakes.dialects._chatview import parse_block, read_stream, sse_blocks

OTHERS = [n for n in NAMES if n != CHAT]
USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
ARGS = json.dumps({"path": "a.txt", "n": 2})

REPLIES: dict[str, dict[str, Any]] = {
    "text": {"text": "Hello, world: a reply longer than one sixteen-character piece."},
    "reasoning": {"reasoning": "Think first, at some length.", "text": "Then answer."},
    "tool_call": {
        "text": "",
        "tool_calls": [{"id": "call_a", "name": "read_file", "arguments": ARGS}],
        "finish_reason": "tool_calls",
    },
    "two_tool_calls_with_text": {
        "text": "Reading two files.",
        "tool_calls": [
            {"id": "call_a", "name": "read_file", "arguments": ARGS},
            {"id": "call_b", "name": "list_dir", "arguments": json.dumps({"path": "."})},
        ],
        "finish_reason": "tool_calls",
    },
    "length": {"text": "cut short", "finish_reason": "length"},
    "content_filter": {"text": "", "finish_reason": "content_filter"},
    "usage": {"text": "counted", "usage": USAGE},
    "unicode": {"text": "line\u2028sep \u00e9\u4e2d\x85 end", "chunk_chars": 3},
}


def _chat_stream(sse: str) -> dict[str, Any]:
    """What a chat SSE text says: the content accumulated, finish, usage, [DONE], errors."""
    view: dict[str, Any] = {
        "text": "",
        "reasoning": "",
        "calls": {},
        "finish": None,
        "usage": None,
        "done": False,
        "errors": [],
    }
    for block in sse_blocks(sse)[0]:
        data = parse_block(block)[1]
        assert data is not None, f"a data-less block in the chat view: {block!r}"
        if data == "[DONE]":
            view["done"] = True
            continue
        obj = json.loads(data)
        if "error" in obj:
            view["errors"].append(_error(obj))
            continue
        view["usage"] = obj.get("usage") or view["usage"]
        for choice in obj["choices"]:
            delta = choice["delta"]
            view["text"] += delta.get("content") or ""
            view["reasoning"] += delta.get("reasoning_content") or ""
            for tc in delta.get("tool_calls") or []:
                call = view["calls"].setdefault(tc["index"], {"args": ""})
                if "id" in tc:
                    call["id"], call["name"] = tc["id"], tc["function"]["name"]
                call["args"] += tc["function"].get("arguments") or ""
            view["finish"] = choice.get("finish_reason") or view["finish"]
    return view


def _chat_json(body: dict[str, Any]) -> dict[str, Any]:
    """What a chat completion says."""
    choice = body["choices"][0]
    msg = choice["message"]
    calls = {
        i: {"id": c["id"], "name": c["function"]["name"], "args": c["function"]["arguments"]}
        for i, c in enumerate(msg.get("tool_calls") or [])
    }
    return {
        "text": msg.get("content") or "",
        "reasoning": msg.get("reasoning_content") or "",
        "calls": calls,
        "finish": choice["finish_reason"],
        "usage": body.get("usage"),
    }


def _error(obj: dict[str, Any]) -> tuple[Any, Any]:
    err = obj["error"]
    return err.get("message"), err.get("type")


def _chat_rendering(reply: dict[str, Any], **kw: Any) -> str:
    return _rendering(oc, reply, **kw)


def _rendering(d: Dialect, reply: dict[str, Any], **kw: Any) -> str:
    return b"".join(d.frame(n, p) for n, p in d.stream_events(reply, "m", **kw)).decode()


def _event_dialect(name: str) -> Dialect:
    """The registered module of a dialect other than chat."""
    assert name != CHAT, name
    return REGISTRY[name]


@pytest.mark.parametrize("name", OTHERS)
@pytest.mark.parametrize("case", sorted(REPLIES))
def test_stream_round_trip(name: str, case: str) -> None:
    d = _event_dialect(name)
    reply = REPLIES[case]
    text, tail, _ = read_stream(_rendering(d, reply), d.stream_reader)
    assert tail == ""
    assert _chat_stream(text) == _chat_stream(_chat_rendering(reply))


@pytest.mark.parametrize("name", OTHERS)
@pytest.mark.parametrize("case", sorted(REPLIES))
def test_json_round_trip(name: str, case: str) -> None:
    d = _event_dialect(name)
    reply = REPLIES[case]
    read = d.read_json(json.loads(json.dumps(d.json_body(reply, "m"))))
    assert read is not None
    assert _chat_json(read) == _chat_json(oc.json_body(reply, "m"))


@pytest.mark.parametrize("name", OTHERS)
def test_unfinished_stream_round_trip(name: str) -> None:
    """No finish reason and no end marker: the read-back has neither either."""
    d = _event_dialect(name)
    reply = {"text": "and then", "finish_reason": None}
    text, _, _ = read_stream(_rendering(d, reply, terminal=False), d.stream_reader)
    chat = _chat_rendering(reply, terminal=False)
    view = _chat_stream(text)
    assert (view["finish"], view["done"]) == (None, False)
    assert view == _chat_stream(chat)


@pytest.mark.parametrize("name", OTHERS)
def test_in_band_error_round_trip(name: str) -> None:
    """An error event inside the stream reads back as chat's ``{"error": ...}`` event."""
    d = _event_dialect(name)
    reply = REPLIES["text"]
    err = {"message": "overloaded right now", "type": "overloaded_error"}
    sse = _rendering(d, reply, terminal=False)
    sse += d.in_band_error_frame(err, 3, "m").decode()
    view = _chat_stream(read_stream(sse, d.stream_reader)[0])
    assert view["errors"] == [("overloaded right now", "overloaded_error")]
    assert view["text"] == reply["text"]


@pytest.mark.parametrize("name", OTHERS)
def test_error_body_round_trip(name: str) -> None:
    """An error body keeps its message and type in the chat view (through ``conformance.judging.canon``,
    which unwraps error envelopes before a dialect reads a reply)."""
    from conformance.judging.canon import chat_sent

    d = REGISTRY[name]
    sent = json.dumps(d.error_body("no such model", "not_found_error"))
    read = json.loads(chat_sent(sent, name, stream=False, status=404))
    assert _error(read) == ("no such model", "not_found_error")


@pytest.mark.parametrize("name", NAMES)
def test_every_registered_module_provides_the_protocol(name: str) -> None:
    """The registry holds modules that provide what the protocol names (a missing function
    would otherwise surface only when a scenario first needs it)."""
    d: Dialect = REGISTRY[name]
    assert name == d.NAME
    wanted = set(_members(_protocol.Dialect))
    missing = sorted(m for m in wanted if not hasattr(d, m))
    assert not missing, f"dialect module {name} lacks {missing}"


def _members(proto: type) -> list[str]:
    names = list(getattr(proto, "__annotations__", {}))
    return names + [k for k, v in vars(proto).items() if callable(v) and not k.startswith("_")]


def test_chat_reads_back_as_itself() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert REGISTRY[CHAT].read_body(body) is body
    assert REGISTRY[CHAT].read_json(oc.json_body(REPLIES["text"], "m")) is None
