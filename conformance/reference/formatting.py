"""Tool output capping for the reference agent (FMT-01..03).

Output longer than the limit keeps its head and tail (errors and summaries often sit
at the end) around an explicit notice that gives the full size and the omitted
count, so the model knows it sees incomplete raw data rather than a rewrite.
The capped text, notice included, never exceeds the limit unless the limit is
smaller than the notice itself.
"""

from __future__ import annotations

__all__ = ["cap_output", "truncation_notice"]

_HEAD_SHARE = 0.6  # a bit more head than tail: the start usually frames the output


def truncation_notice(total: int, omitted: int, where: str = "the middle") -> str:
    """The notice inserted where characters were cut out."""
    return (
        f"\n\n[... output truncated: {total} characters in total, "
        f"{omitted} characters omitted from {where} ...]\n\n"
    )


def cap_output(text: str, limit: int, *, keep_tail: bool = True) -> str:
    """Return ``text`` verbatim if it fits in ``limit`` characters, else head + notice + tail.

    ``keep_tail=False`` is a broken copy's cut: the head alone, the notice after it.
    """
    if limit < 0:
        raise ValueError(f"cap_output: limit must be >= 0, got {limit}")
    total = len(text)
    if total <= limit:
        return text
    # Size the notice with the widest possible numbers so the result stays within limit.
    budget = max(0, limit - len(truncation_notice(total, total)))
    if not keep_tail:
        return text[:budget] + truncation_notice(total, total - budget, "the end")
    head = int(budget * _HEAD_SHARE)
    tail = budget - head
    omitted = total - head - tail
    return text[:head] + truncation_notice(total, omitted) + (text[total - tail :] if tail else "")
