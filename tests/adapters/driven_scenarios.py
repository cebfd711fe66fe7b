"""Scenario data the driven-feature tests of several shipped profiles share."""

from __future__ import annotations

from typing import Any

# A 401 for expired credentials (RTY-10), as the rty-10-* scenarios script it.
EXPIRED: dict[str, Any] = {
    "fault": {
        "http_error": {
            "status": 401,
            "body": {
                "error": {
                    "message": "The access token has expired.",
                    "type": "authentication_error",
                    "code": "token_expired",
                }
            },
        }
    }
}

# A hosted tool that hangs 3 s under a 1 s tool time limit (TOL-04).
TOOL_TIMEOUT: dict[str, Any] = {
    "criteria": ["TOL-04"],
    "capabilities": ["tools", "mcp_tools"],
    "deadline": 20,
    "config": {"tool_timeout_s": 1},
    "tools": [{"name": "run_tests", "parameters": {"type": "object"}}],
    "tool_host": {"run_tests": [{"hang": 3}]},
    "script": [
        {"reply": {"tool_calls": [{"id": "call_1", "name": "run_tests", "arguments": "{}"}]}},
        {"reply": {"text": "Done.", "finish_reason": "stop"}},
    ],
}
