"""Validation of results documents against ``schemas/results.schema.json``."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from reports.errors import ResultsError

__all__ = ["load_named_schema", "load_schema", "validate_against", "validate_results"]


@cache
def load_named_schema(name: str) -> dict[str, Any]:
    """Return the JSON Schema ``schemas/<name>.schema.json`` (draft 2020-12)."""
    text = resources.files("reports").joinpath(f"schemas/{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)  # a JSON Schema is a JSON object
    return schema


def load_schema() -> dict[str, Any]:
    """Return the results JSON Schema (draft 2020-12)."""
    return load_named_schema("results")


def validate_against(name: str, doc: Any, source: str) -> None:
    """Raise ResultsError naming ``source``, the JSON path and the problem if ``doc`` does not
    match the schema ``name`` (the first problem, and how many more there are)."""
    validator = jsonschema.Draft202012Validator(load_named_schema(name))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise ResultsError(f"{source}: at {_json_path(err.absolute_path)}: {err.message}{more}")


def _json_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_results(doc: Any, *, source: str = "<results>") -> None:
    """Raise ResultsError naming ``source``, the JSON path and the problem if ``doc`` is invalid.

    Beyond the schema, checks cross-references: every criterion an agent reports is in the
    catalogue, and every scenario a criterion cites is among the agent's scenarios.
    """
    validate_against("results", doc, source)
    ids = {c["id"] for c in doc["catalogue"]}
    for i, agent in enumerate(doc["agents"]):
        scen_ids = {s["id"] for s in agent["scenarios"]}
        for cid, res in agent["criteria"].items():
            where = f"$.agents[{i}].criteria.{cid}"
            if cid not in ids:
                raise ResultsError(f"{source}: at {where}: criterion {cid!r} not in the catalogue")
            for j, sc in enumerate(res["scenarios"]):
                if sc["id"] not in scen_ids:
                    raise ResultsError(
                        f"{source}: at {where}.scenarios[{j}].id: scenario {sc['id']!r} "
                        f"not among agent {agent['name']!r}'s scenarios"
                    )
