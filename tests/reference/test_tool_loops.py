"""Tests for conformance.reference.loops.LoopDetector (LOP-01, LOP-02, LOP-06)."""

from __future__ import annotations

import pytest

from conformance.reference.loops import LoopDetector, fingerprint


def test_fingerprint_is_canonical() -> None:
    assert fingerprint("t", {"a": 1, "b": 2}) == fingerprint("t", '{"b": 2,  "a": 1}')
    assert fingerprint("t", {"a": 1}) != fingerprint("t", {"a": 2})
    assert fingerprint("t", {"a": 1}) != fingerprint("u", {"a": 1})


def test_LOP_01_three_same_failures_give_reminder() -> None:
    d = LoopDetector()
    assert d.record_tool("edit", {"old": "x"}, True) is None
    assert d.record_tool("edit", {"old": "x"}, True) is None
    msg = d.record_tool("edit", '{"old":"x"}', True)
    assert msg is not None and "edit" in msg and "same arguments" in msg


def test_LOP_01_within_window_of_five() -> None:
    d = LoopDetector()
    d.record_tool("edit", {"old": "x"}, True)
    d.record_tool("read", {"p": 1}, False)
    d.record_tool("edit", {"old": "x"}, True)
    d.record_tool("read", {"p": 2}, False)
    assert "same arguments" in (d.record_tool("edit", {"old": "x"}, True) or "")


def test_LOP_01_outside_window_no_reminder() -> None:
    d = LoopDetector()
    d.record_tool("edit", {"old": "x"}, True)
    for i in range(3):
        d.record_tool("read", {"p": i}, False)
    d.record_tool("edit", {"old": "x"}, True)
    assert d.record_tool("edit", {"old": "x"}, True) is None  # first failure left the window


def test_LOP_01_different_args_or_success_no_reminder() -> None:
    d = LoopDetector()
    for i in range(3):
        assert d.record_tool("edit", {"old": i}, True) is None
    d2 = LoopDetector()
    d2.record_tool("edit", {"old": "x"}, True)
    d2.record_tool("edit", {"old": "x"}, True)
    assert d2.record_tool("edit", {"old": "x"}, False) is None


def test_LOP_02_ignored_reminder_blocks_for_three_requests() -> None:
    d = LoopDetector()
    for _ in range(3):
        d.record_tool("bash", {"cmd": "pytest"}, True)
    assert d.blocked_tools() == set()
    d.on_request_sent()
    note = d.record_tool("bash", {"cmd": "pytest"}, True)
    assert note and "bash" in note
    seen = []
    for _ in range(4):
        seen.append("bash" in d.blocked_tools())
        d.on_request_sent()
    assert seen == [True, True, True, False]


def test_LOP_02_heeded_reminder_no_block() -> None:
    d = LoopDetector()
    for _ in range(3):
        d.record_tool("bash", {"cmd": "pytest"}, True)
    d.record_tool("read", {"p": "setup.cfg"}, False)
    assert d.blocked_tools() == set()


def test_LOP_06_same_text_three_times() -> None:
    d = LoopDetector()
    assert d.record_assistant_text("Let me try again.") is False
    assert d.record_assistant_text("Let me try again. ") is False
    assert d.record_assistant_text("Let me try again.") is True


def test_LOP_06_text_streak_broken_by_tool_call_or_other_text() -> None:
    d = LoopDetector()
    d.record_assistant_text("same")
    d.record_assistant_text("same")
    d.record_tool("read", {}, False)
    assert d.record_assistant_text("same") is False
    d.record_assistant_text("other")
    assert d.record_assistant_text("same") is False


def test_LOP_06_abab_tool_pattern() -> None:
    d = LoopDetector()
    assert d.record_tool("a", {"x": 1}, False) is None
    assert d.record_tool("b", {"y": 1}, False) is None
    assert d.record_tool("a", {"x": 1}, False) is None
    msg = d.record_tool("b", {"y": 1}, False)
    assert msg is not None and d.pattern_loop
    assert "same arguments" in msg


def test_LOP_06_abac_not_a_pattern() -> None:
    d = LoopDetector()
    for name, arg in [("a", 1), ("b", 1), ("a", 1), ("b", 2)]:
        out = d.record_tool(name, {"x": arg}, False)
    assert out is None and not d.pattern_loop


def test_bad_settings_rejected() -> None:
    with pytest.raises(ValueError, match="threshold"):
        LoopDetector(window=2, threshold=3)


def test_broken_copy_repeats_the_reminder_and_blocks_nothing() -> None:
    d = LoopDetector(block_ignored=False)
    for _ in range(3):
        d.record_tool("bash", {"cmd": "pytest"}, True)
    note = d.record_tool("bash", {"cmd": "pytest"}, True)
    assert note and "same arguments" in note
    assert d.blocked_tools() == set()
