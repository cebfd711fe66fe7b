"""Truncation recovery (TRN-*) and reasoning preservation (RSN-*) unit tests, no I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.reference.continuation import (
    CONTINUATION_TEXT,
    DEFAULT_MAX_TOKENS,
    OUTPUT_LIMIT_ERROR,
    RAISED_MAX_TOKENS,
    TruncationCounter,
    assistant_to_wire,
    continuation_message,
    raised_limit,
)

SEED_TEXT = (
    "Output token limit hit. Resume directly \N{EM DASH} no apology, no recap of what you were "
    "doing. Pick up mid-thought if that is where the cut happened. Break remaining work into "
    "smaller pieces."
)
CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def test_TRN_01_continuation_text_is_exact() -> None:
    assert CONTINUATION_TEXT == SEED_TEXT
    assert "\u2014" in CONTINUATION_TEXT and "--" not in CONTINUATION_TEXT
    assert continuation_message() == {"role": "user", "content": SEED_TEXT}


def test_TRN_02_continuation_sent_as_plain_user_message() -> None:
    # Meta-ness is an event-level flag; on the wire it is an ordinary user message.
    msg = continuation_message()
    assert set(msg) == {"role", "content"} and msg["role"] == "user"


def test_TRN_03_truncated_with_tool_calls_recovers() -> None:
    c = TruncationCounter()
    for _ in range(10):
        assert c.on_truncation(has_tool_calls=True)
    assert c.consecutive == 0


def test_TRN_04_fourth_truncation_gives_up() -> None:
    c = TruncationCounter()
    assert [c.on_truncation(has_tool_calls=False) for _ in range(4)] == [True, True, True, False]
    assert "output token limit was repeatedly exceeded" in OUTPUT_LIMIT_ERROR


def test_TRN_05_tool_call_resets_the_count() -> None:
    c = TruncationCounter()
    for _ in range(3):
        assert c.on_truncation(has_tool_calls=False)
    c.on_tool_calls()
    assert [c.on_truncation(has_tool_calls=False) for _ in range(4)] == [True, True, True, False]


def test_TRN_06_truncated_turn_with_tool_calls_does_not_consume() -> None:
    c = TruncationCounter()
    assert c.on_truncation(has_tool_calls=False)
    assert c.on_truncation(has_tool_calls=False)
    assert c.on_truncation(has_tool_calls=True)
    assert [c.on_truncation(has_tool_calls=False) for _ in range(4)] == [True, True, True, False]


def test_TRN_07_limit_raised_once_only_without_user_override() -> None:
    assert raised_limit(None, DEFAULT_MAX_TOKENS, already_raised=False) == RAISED_MAX_TOKENS
    assert raised_limit(None, DEFAULT_MAX_TOKENS, already_raised=True) is None
    assert raised_limit(4096, 4096, already_raised=False) is None
    assert raised_limit(None, RAISED_MAX_TOKENS, already_raised=False) is None


def test_TRN_08_produced_content_kept_for_history() -> None:
    msg = assistant_to_wire("The first half of the ans")
    assert msg == {"role": "assistant", "content": "The first half of the ans"}


def test_RSN_01_reasoning_only_gets_explanatory_content() -> None:
    reasoning = "Let me think about the file layout first..."
    msg = assistant_to_wire(None, reasoning)
    assert msg is not None
    assert msg["reasoning_content"] == reasoning
    assert msg["content"].strip() and msg["content"] != reasoning
    assert reasoning not in msg["content"]


def test_RSN_02_text_and_reasoning_both_sent() -> None:
    msg = assistant_to_wire("real text", "thinking")
    assert msg == {"role": "assistant", "content": "real text", "reasoning_content": "thinking"}


@pytest.mark.parametrize("content", [None, ""])
def test_RSN_03_fully_empty_turn_dropped(content: str | None) -> None:
    assert assistant_to_wire(content, None, None) is None
    assert assistant_to_wire(content, "", []) is None


@pytest.mark.parametrize(
    ("content", "reasoning", "calls"),
    [
        (None, None, [CALL]),
        ("", "r", [CALL]),
        ("t", None, None),
        (None, "r", None),
        ("t", "r", [CALL]),
    ],
)
def test_RSN_04_never_assistant_without_content_and_tool_calls(content, reasoning, calls) -> None:
    for preserve in (True, False):
        msg = assistant_to_wire(content, reasoning, calls, preserve_reasoning=preserve)
        if msg is None:
            continue
        assert msg["role"] == "assistant"
        assert msg.get("content") or msg.get("tool_calls")
        if calls:
            assert msg["tool_calls"] == calls


def test_RSN_switch_off_drops_reasoning() -> None:
    assert "reasoning_content" not in assistant_to_wire("t", "r", preserve_reasoning=False)


@given(st.lists(st.booleans(), max_size=40))
def test_TRN_04_property_never_more_than_three_unbroken_recoveries(events: list[bool]) -> None:
    c = TruncationCounter()
    run = 0
    for has_calls in events:
        ok = c.on_truncation(has_tool_calls=has_calls)
        run = 0 if has_calls else run + 1
        assert ok == (run <= 3)
        if not ok:
            run = 3  # a given-up turn ends; the counter stays saturated
