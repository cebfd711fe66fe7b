"""The reference agent's Anthropic Messages codec, without sockets: bodies out, chunks in."""

from __future__ import annotations

import json

from conformance.reference._wire_anthropic import AnthropicCodec


def _frames(codec: AnthropicCodec, events: list[dict], model: str = "m") -> list[str]:
    dec = codec.decoder(model)
    out: list[str] = []
    for e in events:
        out += dec.feed(json.dumps(e))
    return out


def _deltas(chunks: list[str]) -> list[dict]:
    out = []
    for c in chunks:
        if c == "[DONE]":
            out.append({"done": True})
            continue
        obj = json.loads(c)
        if "error" in obj:
            out.append({"error": obj["error"]})
        for ch in obj.get("choices") or []:
            out.append({**ch["delta"], "finish": ch["finish_reason"]})
        if obj.get("usage"):
            out.append({"usage": obj["usage"]})
    return out


def _stream(stop: str | None = "end_turn", *, stop_event: bool = True) -> list[dict]:
    ev = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 0}}},
        {"type": "ping"},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Hm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "SIG"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"p": '},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "1}"},
        },
        {"type": "content_block_stop", "index": 2},
    ]
    if stop is not None:
        ev.append(
            {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}
        )
    if stop_event:
        ev.append({"type": "message_stop"})
    return ev


def test_stream_maps_text_reasoning_and_tool_call_pieces():
    got = _deltas(_frames(AnthropicCodec(), _stream("tool_use")))
    assert {"reasoning_content": "Hm", "finish": None} in got
    assert {"content": "Hi", "finish": None} in got
    first = next(d for d in got if d.get("tool_calls") and d["tool_calls"][0].get("id"))
    assert first["tool_calls"][0] == {
        "index": 0,
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "read", "arguments": ""},
    }
    pieces = [
        d["tool_calls"][0]["function"]["arguments"]
        for d in got
        if d.get("tool_calls") and "id" not in d["tool_calls"][0]
    ]
    assert "".join(pieces) == '{"p": 1}'
    assert {"finish": "tool_calls"} in [{"finish": d["finish"]} for d in got if "finish" in d]
    assert {"usage": {"prompt_tokens": 7, "completion_tokens": 3}} in got
    assert got[-1] == {"done": True}


def test_stop_reasons_map_to_finish_reasons():
    for stop, finish in (
        ("end_turn", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
    ):
        got = _deltas(_frames(AnthropicCodec(), _stream(stop)))
        assert [d["finish"] for d in got if d.get("finish")] == [finish]


def test_no_stop_reason_means_no_finish_marker():
    got = _deltas(_frames(AnthropicCodec(), _stream(None, stop_event=False)))
    assert not [d for d in got if d.get("finish")]
    assert {"done": True} not in got


def test_message_delta_without_message_stop_still_finishes():
    # message_delta carries the finish; message_stop is only the end of the stream ([DONE]).
    got = _deltas(_frames(AnthropicCodec(), _stream("end_turn", stop_event=False)))
    assert [d["finish"] for d in got if d.get("finish")] == ["stop"]
    assert {"done": True} not in got


def test_error_event_is_an_in_band_error_and_bad_json_passes_through():
    codec = AnthropicCodec()
    dec = codec.decoder("m")
    err = dec.feed(
        json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    )
    assert json.loads(err[0]) == {"error": {"type": "overloaded_error", "message": "x"}}
    assert dec.feed('{"type": "content_block_delta", "delta": ') == [
        '{"type": "content_block_delta", "delta": '
    ]


def test_request_body_renders_system_tools_results_and_calls():
    body = {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {"name": "read", "description": "d", "parameters": {"type": "object"}},
            }
        ],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"p": 1}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "one"},
            {"role": "tool", "tool_call_id": "call_2", "content": "two"},
            {"role": "system", "content": "<system-reminder>note</system-reminder>"},
        ],
    }
    wire = AnthropicCodec().request(body)
    assert wire["system"] == "Be brief."
    assert wire["max_tokens"] == 100 and wire["stream"] is True
    assert wire["tools"] == [
        {"name": "read", "description": "d", "input_schema": {"type": "object"}}
    ]
    msgs = wire["messages"]
    assert msgs[0] == {"role": "user", "content": "hi"}
    assert msgs[1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "read", "input": {"p": 1}},
        {"type": "tool_use", "id": "call_2", "name": "read", "input": {}},
    ]
    # Tool results of one turn go together, in one user turn.
    assert msgs[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "two"},
        ],
    }
    # No system role inside the conversation: a later note is a user turn.
    assert msgs[3] == {"role": "user", "content": "<system-reminder>note</system-reminder>"}


def test_cut_tool_arguments_are_kept_whole():
    body = {
        "model": "m",
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "w", "arguments": '{"a": "x'}}],
            }
        ],
    }
    block = AnthropicCodec().request(body)["messages"][0]["content"][0]
    assert block["input"] == {"_raw_arguments": '{"a": "x'}


def test_own_thinking_goes_back_signed_to_the_same_model():
    codec = AnthropicCodec()
    _frames(codec, _stream("end_turn"), model="m")
    msg = {"role": "assistant", "content": "Hi", "reasoning_content": "Hm"}
    wire = codec.request({"model": "m", "messages": [msg]})
    assert wire["messages"][0]["content"] == [
        {"type": "thinking", "thinking": "Hm", "signature": "SIG"},
        {"type": "text", "text": "Hi"},
    ]


def test_json_body_becomes_a_chat_completion_and_remembers_the_signature():
    codec = AnthropicCodec()
    body = {
        "type": "message",
        "content": [
            {"type": "thinking", "thinking": "Hm", "signature": "S2"},
            {"type": "text", "text": "Hi"},
            {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"p": 2}},
        ],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 4, "output_tokens": 5},
    }
    chat = json.loads(codec.full_body(json.dumps(body), "m"))
    choice = chat["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "Hi"
    assert choice["message"]["reasoning_content"] == "Hm"
    assert choice["message"]["tool_calls"][0]["function"] == {
        "name": "read",
        "arguments": '{"p": 2}',
    }
    assert chat["usage"] == {"prompt_tokens": 4, "completion_tokens": 5}
    again = codec.request(
        {
            "model": "m",
            "messages": [{"role": "assistant", "content": "Hi", "reasoning_content": "Hm"}],
        }
    )
    assert again["messages"][0]["content"][0]["signature"] == "S2"


def test_empty_and_unreadable_bodies():
    codec = AnthropicCodec()
    empty = json.loads(codec.full_body(json.dumps({"content": [], "stop_reason": "end_turn"}), "m"))
    assert empty["choices"][0]["message"]["content"] == ""
    assert codec.full_body("not json", "m") == "not json"


def test_headers_use_x_api_key():
    h = AnthropicCodec().headers("k")
    assert h["x-api-key"] == "k" and "anthropic-version" in h and "Authorization" not in h
