"""The fault classes are the one home of a fault: the committed schema, the scenario loader's
rules and the fuzzer's draws are derived from them."""

from __future__ import annotations

import json

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.faults import FAULTS
from fakes.scenario import REPLAY_UNFIT, SCHEMA_PATH, STREAM_ONLY, schema
from fakes.schemas import fault_schema, generated, schema_text


def test_the_committed_scenario_schema_has_the_generated_fault_part():
    committed = SCHEMA_PATH.read_text(encoding="utf-8")
    made = schema_text(generated(json.loads(committed)))
    assert committed == made, (
        f"{SCHEMA_PATH.name} is stale against the fault classes (fakes/faults.py): "
        "regenerate it with `python scripts/write_schemas.py`"
    )


# The twelve primitives this registry started with, and which of them need a stream or cannot
# act on recorded bytes: the loader's rules before the classes carried them.
FIRST = {
    "http_error": (False, True),
    "reset_before_headers": (False, True),
    "delay_headers": (False, True),
    "cut": (False, True),
    "stall": (False, True),
    "end_without_finish": (True, False),
    "finish_without_done": (True, False),
    "malformed_event": (True, True),
    "in_band_error": (True, True),
    "length": (False, False),
    "slow_dribble": (True, True),
    "empty_reply": (False, False),
}


def test_every_fault_has_a_valid_parameter_schema_under_its_own_name():
    assert set(FIRST) <= set(FAULTS)
    for name, fault in FAULTS.items():
        assert fault.name == name
        jsonschema.Draft202012Validator.check_schema(fault.params)
    assert list(fault_schema()["properties"]) == list(FAULTS)


def test_the_loader_rules_are_read_from_the_classes():
    for name, (stream_only, replay_ok) in FIRST.items():
        assert (name in STREAM_ONLY, name not in REPLAY_UNFIT) == (stream_only, replay_ok), name
    assert {n for n, f in FAULTS.items() if f.stream_only} == STREAM_ONLY
    assert {n for n, f in FAULTS.items() if not f.replay_ok} == REPLAY_UNFIT


@settings(max_examples=50, deadline=None)
@given(st.data(), st.booleans())
def test_the_fuzzer_draws_parameters_the_schema_accepts(data, tools):
    reply = {"tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}]} if tools else {}
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema()["$defs"], "$ref": "#/$defs/fault"}
    )
    for name, fault in FAULTS.items():
        validator.validate({name: fault.draw_params(data.draw, {**reply, "reasoning": "r"})})
