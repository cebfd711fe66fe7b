"""fakes.compaction: compaction requests as each agent words them, and requests that are not."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.compaction import is_compaction
from fakes.scenario import Step
from fakes.session import select_step

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {}}}]
PROMPT = "Write hi to a.txt, then say done."


def req(*messages: dict[str, Any], tools: bool = False) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages), **({"tools": TOOLS} if tools else {})}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


# Shortened from what each agent sent on the wire (ctx-01-overflow-after-tool-call).
AGENTS = {
    "reference": req(system("Summarize the conversation so far."), user(PROMPT)),
    "qwen-code": req(
        system("You are the component that summarizes internal chat history into a state."),
        user(PROMPT),
        user("First, reason in your <analysis> block. Then, produce the <state_snapshot> XML."),
    ),
    "opencode": req(
        system("You are a context summarization agent."),
        user("Here is the conversation so far: ... Create a new anchored summary."),
    ),
    "claude-code": req(
        system("You are Claude Code."),
        user(PROMPT),
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools. Please "
                    "provide your summary based on the conversation so far.",
                }
            ],
        },
        tools=True,
    ),
}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_each_agents_compaction_request_is_recognised(agent: str) -> None:
    assert is_compaction(AGENTS[agent], PROMPT)


SUMMARY_TASK = "Read notes.txt and summarize it."
CONVERSATION_TASK = "Summarize this conversation for me."


@pytest.mark.parametrize(
    ("body", "prompt"),
    [
        # The conversation itself, with tools, whose system prompt talks of summaries.
        (
            req(system("You can summarize files. Compact answers."), user(PROMPT), tools=True),
            PROMPT,
        ),
        # A tool result that says "summary" of the conversation, last, but not the user's.
        (
            req(
                user(PROMPT),
                {"role": "tool", "tool_call_id": "c", "content": "conversation summary"},
                tools=True,
            ),
            PROMPT,
        ),
        # The user's own task asks for a summary: the prompt is not the agent's compaction.
        (req(user(SUMMARY_TASK)), SUMMARY_TASK),
        (req(user(CONVERSATION_TASK), tools=True), CONVERSATION_TASK),
        (req(), PROMPT),
        ("not a body", PROMPT),
    ],
)
def test_other_requests_are_not_compaction(body: Any, prompt: str) -> None:
    assert not is_compaction(body, prompt)


def test_the_prompt_alone_would_have_been_taken_for_one() -> None:
    body = req(user(SUMMARY_TASK))
    assert is_compaction(body) and not is_compaction(body, SUMMARY_TASK)


def test_a_compaction_step_serves_a_compaction_request_that_offers_tools() -> None:
    script = [
        Step(index=0, reply=None, fault=None, match={"compaction": True}),
        Step(index=1, reply=None, fault=None, match={"tools": True}),
    ]
    used = [0, 0]
    assert select_step(script, used, AGENTS["claude-code"], PROMPT) is script[0]
    assert select_step(script, used, req(user(PROMPT), tools=True), PROMPT) is script[1]
    assert select_step([script[0]], [0], req(user(PROMPT), tools=True), PROMPT) is None
