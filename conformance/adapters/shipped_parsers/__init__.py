"""Output parsers of the shipped agents: what an agent printed, mapped to protocol events.

One module per output format, each a function ``stdout -> events`` (no ``hello`` nor
``turn_end``: the adapter adds those, and stamps times after the agent exits). A profile names
its format in ``output``; `parse` dispatches on it, and `PARSERS` is the list the profile schema
accepts. The parsers and the shipped adapter share `_events` and import nothing else of ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.adapters.shipped_parsers._events import error_event, json_values
from conformance.adapters.shipped_parsers.claude_code import parse_claude_stream_json
from conformance.adapters.shipped_parsers.codex import parse_codex_json
from conformance.adapters.shipped_parsers.opencode import parse_opencode_json
from conformance.adapters.shipped_parsers.qwen_code import parse_qwen_json
from conformance.adapters.shipped_parsers.text import parse_text

__all__ = [
    "PARSERS",
    "error_event",
    "json_values",
    "parse",
    "parse_claude_stream_json",
    "parse_codex_json",
    "parse_opencode_json",
    "parse_qwen_json",
    "parse_text",
]

# A profile's ``output`` -> its parser (the agent and the flag that makes it print so).
PARSERS: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "text": parse_text,  # any agent: stdout is the answer
    "qwen-json": parse_qwen_json,  # Qwen Code -o json
    "opencode-json": parse_opencode_json,  # opencode run --format json
    "claude-stream-json": parse_claude_stream_json,  # Claude Code --output-format stream-json
    "codex-json": parse_codex_json,  # Codex CLI exec --json
}


def parse(kind: str, stdout: str) -> list[dict[str, Any]]:
    """Map an agent's stdout to protocol events with the parser its profile names."""
    try:
        parser = PARSERS[kind]
    except KeyError:
        raise ValueError(f"unknown output parser {kind!r}; known: {', '.join(PARSERS)}") from None
    return parser(stdout)
