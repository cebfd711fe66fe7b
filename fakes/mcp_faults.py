"""Faults of the MCP wire: the scenario's ``mcp_faults``, and what each does to one exchange.

The one home of an MCP fault: its parameter schema (``MCP_FAULTS``, from which
``scenarios/schema.json`` gets ``$defs.mcp_fault``, see ``fakes.schemas``) and its effect
(``fakes.mcp`` asks :func:`take_fault` which fault strikes a message, then carries it out). The
faults of the model wire stay in ``fakes.faults``: the two wires share no primitive.

A scenario's ``mcp_faults`` is a list of ``{method, after, times, fault}``: the fault strikes
the messages of JSON-RPC ``method`` (default ``tools/call``) numbered ``after + 1`` to ``after +
times`` in the session (defaults 0 and 1), counting only messages that reach the server's
methods (a well-formed message, of a live MCP session unless it is ``initialize``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MCP_FAULTS", "mcp_fault_schema", "take_fault"]

_SECONDS = {"type": "number", "minimum": 0}

# name -> the JSON Schema of its parameters (an object).
MCP_FAULTS: dict[str, dict[str, Any]] = {
    # The MCP session is forgotten: this message and every later one with its id get 404.
    "session_expired": {"type": "object", "additionalProperties": False, "properties": {}},
    # The answer is a JSON-RPC error (HTTP 200) instead of the method's result.
    "rpc_error": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
    },
    # An HTTP error status with a plain-text body (default empty) instead of the answer.
    "http_error": {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {
            "status": {"type": "integer", "minimum": 400, "maximum": 599},
            "body": {"type": "string"},
        },
    },
    # The answer is held ``seconds`` (scaled), then sent as usual (a slow initialize, a slow call).
    "delay": {
        "type": "object",
        "additionalProperties": False,
        "required": ["seconds"],
        "properties": {"seconds": _SECONDS},
    },
    # The usual answer (the tool runs), its full length announced, the connection reset after
    # ``at_byte`` bytes of the body (default: half of it).
    "cut": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"at_byte": {"type": "integer", "minimum": 0}},
    },
    # The usual answer as an SSE stream (one ``message`` event) instead of JSON.
    "sse": {"type": "object", "additionalProperties": False, "properties": {}},
    # The tools change: the answer goes out as an SSE stream whose first event is
    # ``notifications/tools/list_changed``, and from then on ``tools/list`` offers ``tools``.
    "list_changed": {
        "type": "object",
        "additionalProperties": False,
        "required": ["tools"],
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "parameters": {"type": "object"},
                    },
                },
            }
        },
    },
    # A broken answer: ``bad_json`` (the answer's JSON cut in half), ``wrong_id`` (the answer
    # for another id).
    "malformed": {
        "type": "object",
        "additionalProperties": False,
        "required": ["kind"],
        "properties": {"kind": {"enum": ["bad_json", "wrong_id"]}},
    },
}


def mcp_fault_schema() -> dict[str, Any]:
    """``$defs.mcp_fault`` of the scenario schema: one entry of ``mcp_faults``."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["fault"],
        "properties": {
            "method": {"type": "string", "minLength": 1},
            "after": {"type": "integer", "minimum": 0},
            "times": {"type": "integer", "minimum": 1},
            "fault": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": False,
                "properties": MCP_FAULTS,
            },
        },
    }


def take_fault(
    faults: list[dict[str, Any]], counts: dict[str, int], method: str
) -> tuple[str, dict[str, Any]] | None:
    """Count one more message of ``method`` in ``counts``; the fault (name, parameters) that
    strikes it, the first of ``faults`` whose window holds it, or None."""
    n = counts[method] = counts.get(method, 0) + 1
    for f in faults:
        after = int(f.get("after", 0))
        if f.get("method", "tools/call") == method and after < n <= after + int(f.get("times", 1)):
            name, params = next(iter(f["fault"].items()))
            return name, dict(params or {})
    return None
