"""Tests for conformance.reference.formatting.cap_output (FMT-01..03)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.reference.formatting import cap_output

NOTICE = re.compile(r"(\d+) characters in total, (\d+) characters omitted")


def test_FMT_03_short_output_verbatim() -> None:
    text = "line 1\nline 2\n  trailing spaces  \n"
    assert cap_output(text, 30000) == text
    assert cap_output("x" * 100, 100) == "x" * 100
    assert cap_output("", 0) == ""


def test_FMT_01_long_output_cut_with_full_size_notice() -> None:
    text = "".join(f"{i:06d}\n" for i in range(10000))  # 70000 chars
    out = cap_output(text, 30000)
    assert len(out) <= 30000
    m = NOTICE.search(out)
    assert m and int(m.group(1)) == len(text)


def test_FMT_02_head_and_tail_kept_omitted_count_exact() -> None:
    text = "HEAD-MARK" + "m" * 50000 + "TAIL-MARK"
    out = cap_output(text, 1000)
    assert out.startswith("HEAD-MARK") and out.endswith("TAIL-MARK")
    m = NOTICE.search(out)
    # The visible characters plus the omitted count add up to the original size.
    kept = len(out) - len(out[out.index("\n\n[...") : out.index("...]\n\n") + 6])
    assert kept + int(m.group(2)) == len(text)


def test_negative_limit_rejected() -> None:
    with pytest.raises(ValueError, match="limit"):
        cap_output("abc", -1)


@settings(max_examples=100, deadline=None)
@given(text=st.text(min_size=0, max_size=3000), limit=st.integers(min_value=200, max_value=3000))
def test_FMT_property_within_limit_and_accounted(text: str, limit: int) -> None:
    out = cap_output(text, limit)
    if len(text) <= limit:
        assert out == text
        return
    assert len(out) <= limit
    start = out.index("\n\n[... output truncated")
    end = out.index("...]\n\n", start) + len("...]\n\n")
    head, tail = out[:start], out[end:]
    assert text.startswith(head) and text.endswith(tail)
    m = NOTICE.search(out[start:end])
    assert int(m.group(1)) == len(text)
    assert len(head) + len(tail) + int(m.group(2)) == len(text)


def test_broken_copy_keeps_the_head_only() -> None:
    text = "".join(f"line {i}\n" for i in range(10000))
    out = cap_output(text, 30000, keep_tail=False)
    assert len(out) <= 30000 and out.startswith("line 0\n")
    assert "line 9999" not in out
    m = NOTICE.search(out)
    assert m and int(m.group(1)) == len(text)
