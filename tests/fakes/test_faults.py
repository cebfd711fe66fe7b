"""The fault classes are the one home of a fault: the committed schema, the scenario loader's
rules and the fuzzer's draws are derived from them."""

from __future__ import annotations

import json

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes.faults import FAULTS, fault_schema, schema_text, schema_with_faults
from fakes.scenario import REPLAY_UNFIT, SCHEMA_PATH, STREAM_ONLY, schema


def test_the_committed_scenario_schema_has_the_generated_fault_part():
    committed = SCHEMA_PATH.read_text(encoding="utf-8")
    generated = schema_text(schema_with_faults(json.loads(committed)))
    assert committed == generated, (
        f"{SCHEMA_PATH.name} is stale against the fault classes (fakes/faults.py): "
        "regenerate it with `python -m fakes write-schema`"
    )


def test_every_fault_has_a_valid_parameter_schema_and_a_unique_name():
    assert len(FAULTS) == len({f.name for f in FAULTS.values()}) == 12
    for name, fault in FAULTS.items():
        assert fault.name == name
        jsonschema.Draft202012Validator.check_schema(fault.params)
    assert set(fault_schema()["properties"]) == set(FAULTS)


def test_the_loader_rules_are_read_from_the_classes():
    assert set(STREAM_ONLY) == {
        "end_without_finish",
        "finish_without_done",
        "malformed_event",
        "in_band_error",
        "slow_dribble",
    }
    assert set(REPLAY_UNFIT) == {
        "length",
        "empty_reply",
        "end_without_finish",
        "finish_without_done",
    }


@settings(max_examples=50, deadline=None)
@given(st.data(), st.booleans())
def test_the_fuzzer_draws_parameters_the_schema_accepts(data, tools):
    reply = {"tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}]} if tools else {}
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema()["$defs"], "$ref": "#/$defs/fault"}
    )
    for name, fault in FAULTS.items():
        validator.validate({name: fault.draw_params(data.draw, {**reply, "reasoning": "r"})})
