"""Agent-neutral compaction requests: a request that asks the model to summarize the conversation.

The seed's behaviour is "compact the history, then retry"; how an agent words its compaction
request is its own. The reference agent sends no tools and says "summarize"; Qwen Code sends no
tools and asks for a ``<state_snapshot>`` under a system prompt that says "summarize"; opencode
sends no tools and calls itself "a context summarization agent"; Claude Code keeps offering its
tools and ends the conversation with a user message asking for "your summary based on the
conversation so far". One rule covers them, and it is the only one: the gateway matches a
scenario step's ``compaction`` with it, and the checks tell compaction requests from the
conversation's own with it.

A request is a compaction request when, with the scenario's prompt taken out of its text (a
user may ask for a summary of a file: that is the task, not a compaction):

- it offers no tools and its messages say "summar..." (summary, summarize, summarise,
  summarization) or "compact"; or
- its last message is the user's and says both "summar..." and "conversation" (an agent that
  keeps its tools on the compaction request, and asks for the summary last).

``body`` is the chat-shaped view of a request (``messages``, ``tools``): chat completions as
sent, other dialects through their ``match_view`` or the harness's canonical view.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_compaction", "message_text"]

_SUMMARY = "summar"
_WORDS = (_SUMMARY, "compact")


def message_text(messages: Any) -> str:
    """The text of chat-shaped messages: string contents and the ``text`` of content parts."""
    parts: list[str] = []
    for m in messages if isinstance(messages, list) else []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += [str(p.get("text", "")) for p in c if isinstance(p, dict)]
    return "\n".join(parts)


def _without(text: str, prompt: str) -> str:
    return (text.replace(prompt, "") if prompt else text).lower()


def is_compaction(body: Any, prompt: str = "") -> bool:
    """Whether the chat-shaped request ``body`` asks for a summary of the conversation."""
    if not isinstance(body, dict):
        return False
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    if not body.get("tools"):
        text = _without(message_text(messages), prompt)
        if any(w in text for w in _WORDS):
            return True
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return False
    text = _without(message_text([last]), prompt)
    return _SUMMARY in text and "conversation" in text
