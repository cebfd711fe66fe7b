"""The reference agent's OpenAI Responses codec, without sockets: bodies out, chunks in."""

from __future__ import annotations

import json

from conformance.reference._wire_responses import ResponsesCodec


def _deltas(codec: ResponsesCodec, events: list[dict], model: str = "m") -> list[dict]:
    dec = codec.decoder(model)
    out: list[dict] = []
    for e in events:
        for c in dec.feed(json.dumps(e)):
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


def _stream(terminal: dict | None) -> list[dict]:
    ev = [
        {"type": "response.created", "response": {"status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs_0", "type": "reasoning", "summary": []},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_0",
            "output_index": 0,
            "delta": "Hm",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "id": "rs_0",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Hm"}],
                "encrypted_content": "ENC",
            },
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_0",
            "output_index": 1,
            "delta": "Hi",
        },
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": {
                "id": "fc_0",
                "type": "function_call",
                "call_id": "call_1",
                "name": "read",
                "arguments": "",
            },
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_0",
            "output_index": 2,
            "delta": '{"p": ',
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_0",
            "output_index": 2,
            "delta": "1}",
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_0",
            "output_index": 2,
            "arguments": '{"p": 1}',
        },
    ]
    if terminal is not None:
        ev.append(terminal)
    return ev


COMPLETED = {
    "type": "response.completed",
    "response": {"status": "completed", "usage": {"input_tokens": 3, "output_tokens": 4}},
}
INCOMPLETE = {
    "type": "response.incomplete",
    "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
}


def test_stream_maps_text_reasoning_and_tool_call_pieces():
    got = _deltas(ResponsesCodec(), _stream(COMPLETED))
    assert {"reasoning_content": "Hm", "finish": None} in got
    assert {"content": "Hi", "finish": None} in got
    calls = [d["tool_calls"][0] for d in got if d.get("tool_calls")]
    assert calls[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": ""},
    }
    # Arguments streamed in pieces are not repeated by the .done event.
    assert "".join(c["function"]["arguments"] for c in calls) == '{"p": 1}'
    assert [d["finish"] for d in got if d.get("finish")] == ["tool_calls"]
    assert {"usage": {"prompt_tokens": 3, "completion_tokens": 4}} in got
    assert got[-1] == {"done": True}


def test_completed_without_calls_is_stop_and_incomplete_is_length():
    plain = [
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        COMPLETED,
    ]
    assert [d["finish"] for d in _deltas(ResponsesCodec(), plain) if d.get("finish")] == ["stop"]
    got = _deltas(ResponsesCodec(), _stream(INCOMPLETE))
    assert [d["finish"] for d in got if d.get("finish")] == ["length"]


def test_no_terminal_event_means_no_finish_marker():
    got = _deltas(ResponsesCodec(), _stream(None))
    assert not [d for d in got if d.get("finish")] and {"done": True} not in got


def test_failed_and_error_events_are_in_band_errors():
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
    }
    got = _deltas(ResponsesCodec(), [failed])
    assert got == [{"error": {"code": "server_error", "message": "boom"}}]
    err = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}
    got = _deltas(ResponsesCodec(), [err])
    assert got[0]["error"]["message"] == "slow down"


def test_arguments_given_only_whole_are_sent_once():
    ev = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "fc_0", "type": "function_call", "call_id": "c", "name": "n"},
        },
        {"type": "response.function_call_arguments.done", "item_id": "fc_0", "arguments": "{}"},
    ]
    calls = [d["tool_calls"][0] for d in _deltas(ResponsesCodec(), ev) if d.get("tool_calls")]
    assert "".join(c["function"]["arguments"] for c in calls) == "{}"


def test_request_body_renders_instructions_items_and_outputs():
    body = {
        "model": "m",
        "max_tokens": 50,
        "stream": False,
        "tools": [
            {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
        ],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "one"},
            {"role": "system", "content": "note"},
        ],
    }
    wire = ResponsesCodec().request(body)
    assert wire["instructions"] == "Be brief."
    assert wire["max_output_tokens"] == 50 and wire["stream"] is False and "messages" not in wire
    assert wire["tools"] == [
        {"type": "function", "name": "read", "description": "", "parameters": {"type": "object"}}
    ]
    assert wire["input"] == [
        {"type": "message", "role": "user", "content": "hi"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look."}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "one"},
        {"type": "message", "role": "system", "content": "note"},
    ]


def test_own_reasoning_items_go_back_to_the_same_model():
    codec = ResponsesCodec()
    _deltas(codec, _stream(COMPLETED), model="m")
    msg = {"role": "assistant", "content": "Hi", "reasoning_content": "Hm"}
    items = codec.request({"model": "m", "messages": [msg]})["input"]
    assert items[0]["type"] == "reasoning" and items[0]["encrypted_content"] == "ENC"
    assert items[0]["summary"] == [{"type": "summary_text", "text": "Hm"}]
    assert items[1]["content"] == [{"type": "output_text", "text": "Hi"}]


def test_json_body_becomes_a_chat_completion():
    codec = ResponsesCodec()
    body = {
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {
                "id": "rs_1",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Hm"}],
            },
            {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p": 1}'},
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    chat = json.loads(codec.full_body(json.dumps(body), "m"))
    ch = chat["choices"][0]
    assert ch["finish_reason"] == "length"
    assert ch["message"]["content"] == "Hi" and ch["message"]["reasoning_content"] == "Hm"
    assert ch["message"]["tool_calls"][0]["id"] == "c1"
    assert chat["usage"] == {"prompt_tokens": 1, "completion_tokens": 2}
    done = json.loads(codec.full_body(json.dumps({**body, "status": "completed"}), "m"))
    assert done["choices"][0]["finish_reason"] == "tool_calls"
    failed = json.loads(codec.full_body(json.dumps({"status": "failed", "output": []}), "m"))
    assert failed == {"choices": []}
