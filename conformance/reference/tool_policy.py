"""Tool-layer decisions of the reference agent, as pure functions (TOL-*, TJS-*, FMT-*, DBG-03).

Theory of operation: one tool call goes through ``precheck`` (unknown name -> error text with
the closest name; arguments parsed, recovered and validated by ``tool_args``), then one or more
executor attempts, each reporting a raw outcome (``ok`` / ``error`` / ``transient`` /
``denied``). ``transient`` is retried ``RETRIES`` more times after ``backoff_s`` (unscaled); the
whole call is bounded by the tool time limit. ``final_output`` caps the output (``formatting``)
and appends the truncation warning. ``log_record`` is the tool-call log line (without ``ts``,
which the writer adds). The recovery core and the batch runner both decide with these; neither
this module nor they do I/O here.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from ._behaviours import Behaviours
from .formatting import cap_output
from .tool_args import ParsedArgs, parse_tool_arguments

__all__ = [
    "BATCH_TOOL",
    "OUTPUT_LIMIT",
    "RETRIES",
    "Precheck",
    "backoff_s",
    "denied_text",
    "error_text",
    "final_output",
    "log_record",
    "precheck",
    "timeout_text",
    "unavailable_text",
]

RETRIES = 2  # transient failures are retried this many more times
BACKOFF_S = 0.5  # unscaled; doubled on each retry
OUTPUT_LIMIT = 30000  # characters of tool output the model sees (FMT-01)
BATCH_TOOL = "batch"
_ALL_ON = Behaviours()


@dataclass(frozen=True)
class Precheck:
    """``status`` is ``run`` (execute ``parsed.arguments``), ``unknown`` or ``invalid``."""

    status: str
    output: str = ""
    parsed: ParsedArgs | None = None


def precheck(
    name: str,
    raw: str | dict[str, Any],
    *,
    truncated: bool,
    schemas: dict[str, dict[str, Any]],
    strict: bool = True,
    b: Behaviours = _ALL_ON,
) -> Precheck:
    """Decide a call before any execution: unknown tool, invalid arguments, or run it.

    ``strict=False`` (a broken copy) repairs cut-short arguments past the seed's rule; ``b``
    holds the other broken copies' switches.
    """
    if name not in schemas and not b.reject_unknown_tools:
        # Broken copy: the name is not checked; the call goes to the executor as asked.
        parsed = parse_tool_arguments(raw, truncated=truncated, schema=None, strict=strict, b=b)
        if not parsed.ok:
            return Precheck("invalid", f"Error: {parsed.error}")
        return Precheck("run", "", parsed)
    if name not in schemas:
        names = sorted(schemas)
        close = difflib.get_close_matches(name, names, n=1)
        msg = (
            f"Error: tool {name!r} does not exist. Available tools: {', '.join(names) or '(none)'}."
        )
        if close and b.suggest_closest_tool:
            msg += f" Did you mean {close[0]!r}?"
        return Precheck("unknown", msg)
    parsed = parse_tool_arguments(
        raw, truncated=truncated, schema=schemas[name], strict=strict, b=b
    )
    if not parsed.ok:
        return Precheck("invalid", f"Error: {parsed.error}")
    return Precheck("run", "", parsed)


def backoff_s(retry: int) -> float:
    """Unscaled wait before retry number ``retry`` (1-based)."""
    return BACKOFF_S * float(2 ** (retry - 1))


def error_text(name: str, error_type: str, message: str) -> str:
    """The text of a final (non-transient) tool failure reported by the executor."""
    if error_type == "unconfigured":
        return f"Error: tool {name!r} cannot run here: no tool endpoint configured."
    if error_type in ("http", "local"):
        # An HTTP failure without a structured error, or a local tool's own failure.
        return f"Error: tool {name!r} failed: {message}"
    return f"Error: tool {name!r} failed ({error_type}): {message or 'no message'}"


def denied_text(name: str, reason: str) -> str:
    return (
        f"Error: permission denied for tool {name!r}: {reason or 'no reason given'}. "
        "The call was not executed and will not be retried. To obtain permission, ask the "
        f"user to allow {name!r}; otherwise choose another approach."
    )


def unavailable_text(name: str, last: str) -> str:
    return f"Error: tool {name!r} is temporarily unavailable: {last}"


def timeout_text(name: str, timeout_s: float) -> str:
    return f"Error: tool {name!r} timed out after {timeout_s:g} seconds and was stopped."


def final_output(
    output: str, warning: str | None, limit: int = OUTPUT_LIMIT, b: Behaviours = _ALL_ON
) -> str:
    """Cap the output, then append the truncation warning (it must never be cut off).

    ``b``: broken copies that strip every output (FMT-03), keep no tail (FMT-02) or cap
    nothing (FMT-01).
    """
    if not b.verbatim_tool_output:
        output = output.strip()
    if b.cap_tool_output:
        output = cap_output(output, limit, keep_tail=b.keep_output_tail)
    if warning:
        output += "\n\n" + warning
    return output


def log_record(
    call_id: str,
    name: str,
    status: str,
    duration_s: float,
    attempts: int,
    arguments_chars: int,
    output_chars: int,
) -> dict[str, Any]:
    """One tool-call log line (DBG-03), without the wall-clock ``ts`` the writer adds first."""
    return {
        "call_id": call_id,
        "name": name,
        "status": status,
        "duration_ms": round(duration_s * 1000, 3),
        "attempts": attempts,
        "arguments_chars": arguments_chars,
        "output_chars": output_chars,
    }
