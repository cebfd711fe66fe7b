"""The parts of the committed JSON Schemas that are generated, and their writer.

Two things in the schemas are not written by hand: the fault parts of ``scenarios/schema.json``
(``$defs.fault``, from the fault classes of ``fakes.faults``; ``$defs.mcp_fault``, from
``fakes.mcp_faults``) and every enum of wire dialect names
(from the registry of ``fakes.dialects``), in the scenario schema, in the adapter protocol's
``start`` message and in the probe report. ``python -m fakes write-schema`` rewrites the scenario schema;
``python scripts/write_schemas.py`` rewrites every committed schema; tests hold each file equal to
what :func:`generated` makes of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes.dialects import NAMES
from fakes.faults import FAULTS
from fakes.mcp_faults import mcp_fault_schema

__all__ = ["fault_schema", "generated", "schema_text", "with_dialects", "write_schema"]


def fault_schema() -> dict[str, Any]:
    """``$defs.fault`` of the scenario schema: exactly one of the registered faults."""
    return {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": {name: f.params for name, f in FAULTS.items()},
    }


def with_dialects(node: Any) -> Any:
    """``node`` with every enum that names a wire dialect replaced by the registry's names."""
    if isinstance(node, dict):
        out = {k: with_dialects(v) for k, v in node.items()}
        enum = node.get("enum")
        if isinstance(enum, list) and any(e in NAMES for e in enum):
            out["enum"] = list(NAMES)
        return out
    if isinstance(node, list):
        return [with_dialects(v) for v in node]
    return node


def generated(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its generated parts made anew: the dialect enums, and the fault parts
    where the schema has them (the scenario schema: model faults and MCP faults)."""
    out: dict[str, Any] = with_dialects(schema)
    if "fault" in out.get("$defs", {}):
        defs = {**out["$defs"], "fault": fault_schema(), "mcp_fault": mcp_fault_schema()}
        out = {**out, "$defs": defs}
    return out


def schema_text(schema: dict[str, Any]) -> str:
    """The committed layout of a schema file."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path | None = None) -> str:
    """Rewrite the generated parts of the schema at ``path`` (default: the scenario schema);
    returns the file's name."""
    if path is None:
        from fakes.scenario import SCHEMA_PATH  # here: the scenario loader imports the faults

        path = SCHEMA_PATH
    current = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(schema_text(generated(current)), encoding="utf-8")
    return path.name
