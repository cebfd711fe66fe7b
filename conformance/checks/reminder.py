"""Whether a note to the model is a loop reminder about one tool (LOP-01, LOP-02), by meaning.

Seed 004 §7.6.3 gives an example ("You have called Edit 4 times in a row, all failing with ...
Do NOT retry the same Edit again.") and its detector's own wording ("连续 N 次调用 X，参数几乎未变。
建议换方法。"), not a fixed text. A reminder therefore counts when it names the tool and says
either that the tool failed repeatedly, or that it must not be retried the same way; a note that
only says an error occurred says neither.
"""

from __future__ import annotations

import re

__all__ = ["is_loop_reminder", "names_tool"]

_COUNT = r"(\d+|two|three|four|five|six|several|multiple|many)"
# Repetition: "4 times", "in a row", "repeatedly", "each time", "连续", "3 次", ...
_REPEATED = re.compile(
    rf"\b{_COUNT}\s+(times|attempts|calls|failures|tries)\b|\bin a row\b|\brepeated(ly)?\b"
    r"|\bconsecutive(ly)?\b|\bagain and again\b|\bkeeps? failing\b|\b(each|every) time\b"
    r"|\bstill failing\b|\d+\s*次|连续|多次|反复|重复|屡次",
    re.IGNORECASE,
)
_FAILED = re.compile(r"\bfail|\berror|\bunsuccessful|\bnot found\b|失败|错误|出错", re.IGNORECASE)
_NOT = r"\b(do not|don't|dont|never|stop|avoid|must not|should not|shouldn't|no more)\b"
# A directive against the same retry: "do not retry", "don't call it again", "stop calling it
# with the same arguments", "try a different approach", "不要再", "换方法", ...
_DONT = re.compile(
    rf"{_NOT}[^.\n]{{0,60}}?\b(retry|retrying|repeat|repeating)\b"
    rf"|{_NOT}[^.\n]{{0,60}}?\b(call|calling|use|using|run|running|invoke|invoking)\b"
    r"[^.\n]{0,60}?\b(again|same|anymore|any more)\b"
    r"|\b(different|another|alternative|other)\s+(approach|tool|strategy|way|method|path)\b"
    r"|\bchange (your |the )?(approach|strategy|method)\b"
    r"|不要再|不要重复|别再|勿再|停止重试|换(个|一种)?(方法|思路|工具|路径)",
    re.IGNORECASE,
)
# Tool names are ASCII identifiers; a neighbouring CJK character is no part of them.
_WORD = "A-Za-z0-9_-"


def names_tool(text: str, tool: str) -> bool:
    """Whether ``text`` names ``tool`` as a word (any case; ``read_file`` is not ``file``)."""
    if not tool:
        return False
    pattern = rf"(?<![{_WORD}]){re.escape(tool)}(?![{_WORD}])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def is_loop_reminder(text: str, tool: str) -> bool:
    """A note naming ``tool`` that says it failed repeatedly or must not be retried the same way."""
    if not names_tool(text, tool):
        return False
    repeated_failure = _REPEATED.search(text) is not None and _FAILED.search(text) is not None
    return repeated_failure or _DONT.search(text) is not None
