"""TOL-02's reading of a schema violation: which fields a call's arguments get wrong, and
what each expects, in the words a tool result may use to say so.

The arguments are validated with ``jsonschema`` against the tool's declared schema; each
failed rule becomes the field it concerns and the alternatives that would name its
requirement (``integer`` or ``int``, an enum's values, a format's name).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

__all__ = ["schema_violations"]

_TYPE_WORDS = {
    "integer": ("integer", "int"),
    "number": ("number", "float", "numeric"),
    "string": ("string", "str", "text"),
    "boolean": ("boolean", "bool"),
    "array": ("array", "list"),
    "object": ("object", "dict", "mapping"),
    "null": ("null", "none"),
}


def _type_req(t: Any) -> tuple[str, ...]:
    types = t if isinstance(t, list) else [t]
    return tuple(w for x in types for w in _TYPE_WORDS.get(str(x), (str(x),)))


def schema_violations(
    args: dict[str, Any], schema: dict[str, Any]
) -> list[tuple[str | None, list[tuple[str, ...]]]]:
    """(field, requirements) per schema violation; each requirement is a set of alternatives."""
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    props = schema.get("properties") or {}
    out: list[tuple[str | None, list[tuple[str, ...]]]] = []
    for err in validator.iter_errors(args):
        path = [str(p) for p in err.absolute_path]
        fld = path[-1] if path else None
        v = err.validator
        val: Any = err.validator_value  # the stubs allow an unset sentinel; a failed rule has one
        if v == "type":
            if isinstance(err.instance, str) and val in ("object", "array"):
                try:  # an object sent as a string is TJS-06's repair, not a violation
                    inner = json.loads(err.instance)
                    if isinstance(inner, dict if val == "object" else list):
                        continue
                except ValueError:
                    pass
            out.append((fld, [_type_req(val)]))
        elif v == "required":
            for k in val:
                if isinstance(err.instance, dict) and k not in err.instance:
                    t = (props.get(k) or {}).get("type") if not path else None
                    out.append((k, [_type_req(t)] if t else []))
        elif v == "enum":
            out.append((fld, [(json.dumps(x).strip('"'),) for x in val]))
        elif v == "format":
            out.append((fld, [(str(val),)]))
        elif v == "additionalProperties" and isinstance(err.instance, dict):
            for k in err.instance:
                if k not in props:
                    out.append((k, []))
        else:
            req: list[tuple[str, ...]] = (
                [(json.dumps(val).strip('"'),)] if isinstance(val, str | int | float) else []
            )
            out.append((fld, req))
    return out
