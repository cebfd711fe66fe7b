"""Seed 002's hand-over rules, one test each, in both non-chat codecs.

A conversation that reaches a dialect from elsewhere (``start.history`` is chat-shaped, or the
model changed) carries its text, never its credentials: thinking text is kept (as ordinary
content), signatures are dropped (on messages and on tool calls), tool calls are re-rendered in
the target's structure, and identifiers the target refuses are re-made, consistently.
"""

from __future__ import annotations

import json

import pytest

from conformance.reference._wire_anthropic import AnthropicCodec
from conformance.reference._wire_base import handed_over
from conformance.reference._wire_responses import ResponsesCodec

FOREIGN = {
    "role": "assistant",
    "content": "Hello!",
    "reasoning_content": "The user wants a greeting.",
    "reasoning_signature": "c2lnLW9mLXRoZS1wcmltYXJ5LXZlbmRvcg==",
    "signature": "c2ln",
    "thinking_blocks": [{"type": "thinking", "thinking": "x", "signature": "c2lnLWJsb2Nr"}],
    "tool_calls": [
        {
            "id": "call 1/a",  # not a portable identifier
            "type": "function",
            "function": {"name": "read", "arguments": '{"p": 1}'},
            "extra_content": {"google": {"thought_signature": "dGhvdWdodA=="}},
        }
    ],
}
HISTORY = [
    {"role": "user", "content": "Say hello."},
    FOREIGN,
    {"role": "tool", "tool_call_id": "call 1/a", "content": "file text"},
]
CODECS = [AnthropicCodec, ResponsesCodec]
SECRETS = ("c2ln", "dGhvdWdodA==", "thought_signature", "signature", "thinking_blocks")


def _wire(codec_cls) -> str:
    return json.dumps(codec_cls().request({"model": "m", "messages": HISTORY}))


@pytest.mark.parametrize("codec_cls", CODECS)
def test_rule_signatures_are_dropped(codec_cls):
    wire = _wire(codec_cls)
    for secret in SECRETS:
        assert secret not in wire, secret


@pytest.mark.parametrize("codec_cls", CODECS)
def test_rule_thinking_text_is_kept_as_ordinary_content(codec_cls):
    wire = codec_cls().request({"model": "m", "messages": HISTORY})
    text = json.dumps(wire)
    assert "The user wants a greeting." in text
    # Not as the target's own reasoning: that would need a credential the target cannot check.
    assert '"thinking"' not in text and '"reasoning"' not in text
    assert "Hello!" in text


@pytest.mark.parametrize("codec_cls", CODECS)
def test_rule_tool_calls_are_rendered_in_the_target_structure(codec_cls):
    wire = codec_cls().request({"model": "m", "messages": HISTORY})
    if codec_cls is AnthropicCodec:
        blocks = wire["messages"][1]["content"]
        use = next(b for b in blocks if b["type"] == "tool_use")
        result = wire["messages"][2]["content"][0]
        assert use["input"] == {"p": 1} and result["type"] == "tool_result"
        assert result["tool_use_id"] == use["id"]
    else:
        call = next(i for i in wire["input"] if i.get("type") == "function_call")
        out = next(i for i in wire["input"] if i.get("type") == "function_call_output")
        assert call["arguments"] == '{"p": 1}' and out["call_id"] == call["call_id"]


def test_rule_identifiers_are_re_made_for_a_target_that_refuses_them():
    wire = AnthropicCodec().request({"model": "m", "messages": HISTORY})
    use = next(b for b in wire["messages"][1]["content"] if b["type"] == "tool_use")
    assert use["id"] != "call 1/a" and use["id"].startswith("toolu_")
    assert wire["messages"][2]["content"][0]["tool_use_id"] == use["id"]  # still paired
    # A portable identifier is kept as it is.
    ok = [{**HISTORY[1], "tool_calls": [{**FOREIGN["tool_calls"][0], "id": "call_1"}]}]
    kept = AnthropicCodec().request({"model": "m", "messages": ok})
    assert kept["messages"][0]["content"][-1]["id"] == "call_1"


@pytest.mark.parametrize("codec_cls", CODECS)
def test_rule_credentials_do_not_follow_a_change_of_model(codec_cls):
    codec = codec_cls()
    # The codec received a signed reply from model "a" ...
    if codec_cls is AnthropicCodec:
        body = {
            "content": [
                {"type": "thinking", "thinking": "Hm", "signature": "c2lnLWE="},
                {"type": "text", "text": "Hi"},
            ],
            "stop_reason": "end_turn",
        }
    else:
        body = {
            "status": "completed",
            "output": [
                {
                    "id": "rs_1",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "Hm"}],
                    "encrypted_content": "c2lnLWE=",
                },
                {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
            ],
        }
    codec.full_body(json.dumps(body), "a")
    msg = {"role": "assistant", "content": "Hi", "reasoning_content": "Hm"}
    same = json.dumps(codec.request({"model": "a", "messages": [msg]}))
    other = json.dumps(codec.request({"model": "b", "messages": [msg]}))
    assert "c2lnLWE=" in same  # the model that wrote it gets its credential back
    assert "c2lnLWE=" not in other and "Hm" in other  # another model gets the text only


def test_handed_over_keeps_text_and_drops_every_private_key():
    out = handed_over(FOREIGN)
    assert out["handed_over_reasoning"] == "The user wants a greeting."
    assert "reasoning_content" not in out
    assert not {"signature", "reasoning_signature", "thinking_blocks"} & set(out)
    assert "extra_content" not in out["tool_calls"][0]
    assert FOREIGN["tool_calls"][0]["extra_content"]  # the input is not modified
