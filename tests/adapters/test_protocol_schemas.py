"""The published protocol schemas accept the documented examples and reject broken ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance.adapters.validation import SCHEMA_DIR, validate_event, validate_message

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapter-protocol.md"
EXAMPLES = [json.loads(m) for m in re.findall(r"```json\n(.*?)\n```", DOC.read_text(), re.S)]


def test_every_message_type_has_a_schema_and_an_example():
    documented = {e["type"] for e in EXAMPLES}
    published = {p.stem for p in SCHEMA_DIR.glob("*.json")}
    assert published == documented
    assert {"start", "abort", "hello", "turn_end"} <= published


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e["type"])
def test_doc_examples_validate(example):
    assert validate_message(example) is None


@pytest.mark.parametrize(
    ("event", "needle"),
    [
        ({"type": "turn_end", "reason": "done"}, "'reason'"),
        ({"type": "usage", "prompt_tokens": -1, "completion_tokens": 0}, "'prompt_tokens'"),
        ({"type": "hello", "agent": "a", "capabilities": "tools"}, "'capabilities'"),
        ({"type": "tool", "call_id": "c", "name": "n"}, "'status'"),
        ({"kind": "x"}, "'type'"),
        ({"type": "start", "protocol": 1}, "harness -> agent"),
    ],
)
def test_invalid_events_name_the_field(event, needle):
    problem = validate_event(event)
    assert problem is not None and needle in problem


def test_unknown_event_types_are_allowed():
    assert validate_event({"type": "progress", "percent": 3}) is None
