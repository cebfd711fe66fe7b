"""The dialect names come from one registry (``fakes.dialects.REGISTRY``).

The code reads them from it (CLI choices, the runner, the catalogue, the agent profile schema);
the committed JSON Schema files, data read by other tools too, have their enums generated from it
(``fakes.schemas``, ``python scripts/write_schemas.py``) and are held current here.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from conformance import catalogue, runner
from conformance.adapters import shipped_profile
from conformance.probe import cli as probe_cli
from conformance.probe import wire as probe_wire
from fakes import plan, schemas
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


def _written() -> tuple[str, ...]:
    """The schema files ``scripts/write_schemas.py`` rewrites."""
    spec = importlib.util.spec_from_file_location(
        "write_schemas", ROOT / "scripts/write_schemas.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.SCHEMAS)


@pytest.mark.parametrize("path", _written())
def test_committed_schemas_are_generated_from_the_registry(path: str) -> None:
    committed = (ROOT / path).read_text(encoding="utf-8")
    enums = _enums_with(json.loads(committed), "anthropic_messages")
    assert enums, f"{path}: no dialect enum found"
    assert committed == schemas.schema_text(schemas.generated(json.loads(committed))), (
        f"{path} is stale against fakes.dialects and fakes.faults: "
        "regenerate it with `python scripts/write_schemas.py`"
    )


def test_every_schema_with_a_dialect_enum_is_generated() -> None:
    files = [
        ROOT / "scenarios/schema.json",
        *sorted((ROOT / "conformance/schemas").rglob("*.json")),
        ROOT / "reports/schemas/probe.schema.json",
    ]
    with_enum = {
        str(p.relative_to(ROOT))
        for p in files
        if _enums_with(json.loads(p.read_text(encoding="utf-8")), "anthropic_messages")
    }
    assert with_enum <= set(_written())


def test_a_new_dialect_reaches_every_enum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schemas, "NAMES", (*NAMES, "new_dialect"))
    for path in _written():
        made = schemas.generated(json.loads((ROOT / path).read_text(encoding="utf-8")))
        enums = _enums_with(made, "anthropic_messages")
        assert enums and all(e[-1] == "new_dialect" for e in enums), path


def test_code_reads_the_registry() -> None:
    assert runner.DIALECTS is catalogue.DIALECTS is shipped_profile.DIALECTS is NAMES
    dialect = next(a for a in probe_cli.parser()._actions if a.dest == "dialect")
    assert dialect.choices is NAMES and tuple(probe_wire.WIRES) == NAMES
    assert dict(REGISTRY) == plan.DIALECTS
