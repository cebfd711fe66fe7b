"""The dialect names come from one registry (``fakes.dialects.REGISTRY``).

The code reads them from it (CLI choices, the runner, the catalogue, the agent profile schema);
the JSON Schema files are data read by other tools too, so their enums are held to it here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance import catalogue, runner
from conformance.adapters import shipped_profile
from conformance.probe import cli as probe_cli
from conformance.probe import wire as probe_wire
from fakes import plan
from fakes.dialects import NAMES, REGISTRY

ROOT = Path(__file__).resolve().parents[1]


def _enums_with(node: Any, name: str) -> list[list[Any]]:
    """Every ``enum`` in a schema that lists ``name``."""
    found: list[list[Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and name in node["enum"]:
            found.append(node["enum"])
        for v in node.values():
            found += _enums_with(v, name)
    elif isinstance(node, list):
        for v in node:
            found += _enums_with(v, name)
    return found


@pytest.mark.parametrize(
    "path",
    [
        "scenarios/schema.json",
        "conformance/schemas/protocol/start.json",
        "reports/schemas/probe.schema.json",
    ],
)
def test_schema_enums_are_the_registry(path: str) -> None:
    enums = _enums_with(json.loads((ROOT / path).read_text()), "anthropic_messages")
    assert enums, f"{path}: no dialect enum found"
    for enum in enums:
        assert tuple(enum) == NAMES, f"{path}: dialect enum {enum} is not the registry's {NAMES}"


def test_code_reads_the_registry() -> None:
    assert runner.DIALECTS is catalogue.DIALECTS is shipped_profile.DIALECTS is NAMES
    dialect = next(a for a in probe_cli.parser()._actions if a.dest == "dialect")
    assert dialect.choices is NAMES and tuple(probe_wire.WIRES) == NAMES
    assert dict(REGISTRY) == plan.DIALECTS
