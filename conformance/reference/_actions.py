"""Actions the recovery core asks its driver to carry out.

:class:`Emission` actions map one-to-one to adapter events (``action.event()``); the others are
I/O: send or cancel a request, refresh the credentials, start or cancel a timer, run a tool, call
the stop hook, write a debug dump, end the turn. Delays are unscaled seconds: the driver applies
the time scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Action",
    "CallStopHook",
    "CancelRequest",
    "CancelTimer",
    "CancelTool",
    "EmitMessage",
    "Emission",
    "EndTurn",
    "LogToolCall",
    "NoteRetry",
    "RefreshCredentials",
    "RemoveMessage",
    "ReportUsage",
    "RunTool",
    "SendRequest",
    "ShowError",
    "ShowToolResult",
    "StartTimer",
    "WriteDebugDump",
]


class Action:
    """Base class of everything the core returns."""

    __slots__ = ()


@dataclass(frozen=True)
class SendRequest(Action):
    """POST ``body`` to the chat-completions endpoint. ``purpose``: chat | title | compact."""

    request_id: int
    body: dict[str, Any]
    purpose: str = "chat"


@dataclass(frozen=True)
class CancelRequest(Action):
    """Stop the request: close its connection, deliver nothing more about it."""

    request_id: int


@dataclass(frozen=True)
class StartTimer(Action):
    """Report :class:`TimerFired` after ``delay_s`` unscaled seconds.

    ``purpose``: wait | idle | request | tool_limit | tool_retry.
    """

    timer_id: int
    delay_s: float
    purpose: str


@dataclass(frozen=True)
class CancelTimer(Action):
    timer_id: int


@dataclass(frozen=True)
class RunTool(Action):
    """Execute ONE attempt of a tool call and report :class:`ToolOutcome` (no retries, no caps).

    ``attempt`` counts from 1; a transient failure is retried by the core with a new RunTool.
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    attempt: int = 1


@dataclass(frozen=True)
class CancelTool(Action):
    """Stop the running attempt of a tool call (its time limit ran out); report nothing."""

    call_id: str


@dataclass(frozen=True)
class LogToolCall(Action):
    """Append ``record`` to the tool-call log; the writer puts the wall-clock ``ts`` first."""

    record: dict[str, Any]


@dataclass(frozen=True)
class CallStopHook(Action):
    """Call the hosted stop hook once and report :class:`StopHookDone`."""


@dataclass(frozen=True)
class RefreshCredentials(Action):
    """Re-read the API key from its source before the next request (RTY-10)."""


@dataclass(frozen=True)
class WriteDebugDump(Action):
    """Save ``record`` as debug dump number ``index`` (the driver redacts secrets)."""

    index: int
    record: dict[str, Any]


@dataclass(frozen=True)
class EndTurn(Action):
    """The turn is over: ``reason`` is completed, error or aborted. Always the last action."""

    reason: str


class Emission(Action):
    """An action that is shown to the host as one adapter event."""

    __slots__ = ()

    def event(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class EmitMessage(Emission):
    """Show a message; the same ``id`` again replaces it (a growing streamed reply)."""

    id: str
    role: str
    text: str
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    meta: bool = False

    def event(self) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self.id,
            "role": self.role,
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls,
            "meta": self.meta,
        }


@dataclass(frozen=True)
class RemoveMessage(Emission):
    id: str

    def event(self) -> dict[str, Any]:
        return {"type": "removed", "id": self.id}


@dataclass(frozen=True)
class NoteRetry(Emission):
    attempt: int
    delay_s: float | None
    reason: str

    def event(self) -> dict[str, Any]:
        return {
            "type": "retry",
            "attempt": self.attempt,
            "delay_s": self.delay_s,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ShowError(Emission):
    kind: str
    message: str

    def event(self) -> dict[str, Any]:
        return {"type": "error", "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class ShowToolResult(Emission):
    call_id: str
    name: str
    status: str
    output: str

    def event(self) -> dict[str, Any]:
        return {
            "type": "tool",
            "call_id": self.call_id,
            "name": self.name,
            "status": self.status,
            "output": self.output,
        }


@dataclass(frozen=True)
class ReportUsage(Emission):
    prompt_tokens: int
    completion_tokens: int

    def event(self) -> dict[str, Any]:
        return {
            "type": "usage",
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
