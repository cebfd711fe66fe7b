"""run_protocol in the Anthropic Messages and OpenAI Responses dialects, over the fake gateway.

The same fault scripts as in chat completions: the gateway renders them in the dialect the
agent asks for (by endpoint), and the agent must recover the same way.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
import yaml

from conformance.reference import HELLO, run_protocol
from fakes import Gateway

FAULTS = Path(__file__).resolve().parents[2] / "scenarios" / "faults"
NAMES = sorted(p.stem for p in FAULTS.glob("*.yaml"))
DIALECTS = ["anthropic_messages", "openai_responses"]
KEY = "sk-dialect-secret"
# Stream faults of a one-step script: the non-streaming resend goes beyond the script and is
# served by the gateway's `otherwise` (the fault step again), whose fault only a stream shows.
FALLBACK = {"end-without-finish", "in-band-error", "malformed-event"}
# In Responses the terminal event is both the finish and the end of the stream: without it there
# is no finish marker, so "finish without [DONE]" is a failed stream there.
NO_FINISH = {"openai_responses": {"finish-without-done"}, "anthropic_messages": set()}


async def _run(scenario: dict, dialect: str, **start_extra) -> tuple[str, list[dict], dict]:
    scenario = {"criteria": ["STR-01"], **scenario}  # the gateway requires the field
    async with Gateway() as gw:
        session = gw.create_session(scenario, time_scale=0.005)
        start = {
            "type": "start",
            "protocol": 1,
            "model": "conformance-model",
            "prompt": scenario.get("prompt", "hi"),
            "tools": scenario.get("tools") or [],
            "tool_endpoint": session.tool_endpoint,
            "time_scale": 0.005,
            "config": dict(scenario.get("config") or {}),
            "dialect": dialect,
            **start_extra,
        }
        events: list[dict] = []
        reason = await asyncio.wait_for(
            run_protocol(
                start,
                events.append,
                asyncio.Event(),
                base_url=session.base_url,
                api_key=KEY,
                rng=random.Random(0),
            ),
            20,
        )
        return reason, events, session.journal()


def _final_text(events: list[dict]) -> str:
    msgs = [e for e in events if e["type"] == "message" and e["role"] == "assistant"]
    return msgs[-1]["text"] if msgs else ""


def test_hello_declares_both_dialects():
    assert {"dialect:anthropic_messages", "dialect:openai_responses"} <= set(HELLO["capabilities"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", NAMES)
async def test_fault_scenario_recovers_in_dialect(name: str, dialect: str) -> None:
    scenario = yaml.safe_load((FAULTS / f"{name}.yaml").read_text())
    reason, events, journal = await _run(scenario, dialect)
    types = [e["type"] for e in events]
    assert types[0] == "hello" and types.count("turn_end") == 1 and types[-1] == "turn_end"
    assert KEY not in repr(journal)
    entries = journal["entries"]
    assert entries and {e.get("dialect") for e in entries} == {dialect}
    assert reason == "completed", events
    assert "error" not in types  # errors withheld when recovery succeeds
    assert _final_text(events)
    if name in FALLBACK or name in NO_FINISH[dialect]:
        assert [e["body"].get("stream") for e in entries] == [True, False]
        assert "removed" in types  # the partial streamed message was withdrawn


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_tool_call_round_trip_with_signed_reasoning(dialect: str) -> None:
    scenario = {
        "id": "dialect-tools",
        "prompt": "Read a.txt",
        "tools": [{"name": "read", "parameters": {"type": "object"}}],
        "script": [
            {
                "reply": {
                    "reasoning": "I should read the file.",
                    "tool_calls": [{"id": "call_1", "name": "read", "arguments": '{"p": "a"}'}],
                    "finish_reason": "tool_calls",
                },
            },
            {"reply": {"text": "Done.", "finish_reason": "stop"}},
        ],
        "tool_host": {"read": [{"output": "contents"}]},
    }
    reason, events, journal = await _run(scenario, dialect)
    assert reason == "completed", events
    assert _final_text(events) == "Done."
    second = journal["entries"][-1]["body"]
    wire = json.dumps(second)
    if dialect == "anthropic_messages":
        assistant = second["messages"][1]["content"]
        assert assistant[0]["type"] == "thinking" and assistant[0]["signature"]
        assert assistant[-1] == {
            "type": "tool_use",
            "id": "call_1",
            "name": "read",
            "input": {"p": "a"},
        }
        assert second["messages"][2]["content"][0]["tool_use_id"] == "call_1"
    else:
        kinds = [i.get("type") for i in second["input"]]
        assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
        assert '"call_id": "call_1"' in wire
    assert "I should read the file." in wire


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_overload_529_is_retried(dialect: str) -> None:
    scenario = {
        "id": "dialect-529",
        "prompt": "hi",
        "script": [
            {"fault": {"http_error": {"status": 529, "headers": {"Retry-After-Ms": "10"}}}},
            {"reply": {"text": "Hello!", "finish_reason": "stop"}},
        ],
    }
    reason, events, journal = await _run(scenario, dialect)
    assert reason == "completed"
    assert [e["type"] for e in events].count("retry") == 1
    assert [e["response"]["status"] for e in journal["entries"]] == [529, 200]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_length_finish_is_continued(dialect: str) -> None:
    scenario = {
        "id": "dialect-length",
        "prompt": "Tell a story.",
        "config": {"max_output_tokens": 4096},
        "script": [
            {"reply": {"text": "Once upon", "finish_reason": "length"}},
            {"reply": {"text": " a time.", "finish_reason": "stop"}},
        ],
    }
    reason, events, journal = await _run(scenario, dialect)
    assert reason == "completed"
    last = json.dumps(journal["entries"][-1]["body"])
    assert "Output token limit hit." in last and "Once upon" in last


async def test_chat_shaped_history_is_handed_over_without_signatures() -> None:
    scenario = {
        "id": "dialect-history",
        "prompt": "Now say goodbye.",
        "script": [{"reply": {"text": "Goodbye!", "finish_reason": "stop"}}],
    }
    history = [
        {"role": "user", "content": "Say hello."},
        {
            "role": "assistant",
            "content": "Hello!",
            "reasoning_content": "The user wants a greeting.",
            "reasoning_signature": "c2lnLW9mLXRoZS1wcmltYXJ5",
        },
    ]
    for dialect in DIALECTS:
        reason, _, journal = await _run(scenario, dialect, history=history)
        assert reason == "completed"
        wire = json.dumps(journal["entries"][0]["body"])
        assert "The user wants a greeting." in wire and "c2lnLW9mLXRoZS1wcmltYXJ5" not in wire


async def test_unknown_dialect_ends_the_turn_with_a_clear_error() -> None:
    scenario = {"id": "x", "prompt": "hi", "script": [{"reply": {"text": "hi"}}]}
    reason, events, journal = await _run(scenario, "klingon")
    assert reason == "error" and not journal["entries"]
    err = next(e for e in events if e["type"] == "error")
    assert "klingon" in err["message"] and "anthropic_messages" in err["message"]
