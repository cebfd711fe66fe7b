"""What a wire dialect module provides: the typed seam between the dialects and their users.

A dialect is one module named after the dialect (``fakes/dialects/<name>.py``), registered in
``fakes.dialects.REGISTRY``. Every dialect, chat completions included, provides all of
``Dialect``: it checks a request and gives the chat-shaped view script steps match on, renders a
neutral reply as a JSON body or as a stream of events (``fakes.plan``), places faults at neutral
positions (``marks``), shapes its errors and the bytes faults inject, and reads its own requests
and replies back into the canonical chat-completions view (``read_body``, ``stream_reader``,
``read_json``; used by ``conformance.judging.canon``). ``openai_chat`` *is* that view, so its
read-back and its match view are the identity and its ``marks`` are the neutral scale.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ChatOut", "Dialect", "Event", "StreamReader"]


# One event of a streamed reply: its name and its payload (``frame`` makes its bytes).
Event = tuple[str, dict[str, Any]]


class ChatOut(Protocol):
    """Where a stream reader writes the chat SSE frames it reads back (``_chatview.ChatFrames``)."""

    id: str
    model: str

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
        with_choice: bool = True,
    ) -> None: ...

    def data(self, payload: str) -> None: ...


class StreamReader(Protocol):
    """Reads one streamed response, event by event, into chat frames."""

    def event(self, kind: str, payload: dict[str, Any]) -> None: ...


class Dialect(Protocol):
    """What every dialect module provides."""

    NAME: str  # as the journal records it
    PATH: str  # the endpoint the gateway serves it on, under a session's base URL

    def check_request(self, body: Any) -> str | None:
        """What is wrong with a request body, or None."""
        ...

    def match_view(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat-shaped view of a request that script steps match on."""
        ...

    def json_body(
        self, reply: dict[str, Any], model: str, *, empty: str | None = ...
    ) -> dict[str, Any]:
        """The non-streaming body of a neutral reply (``empty``: an ``empty_reply`` kind)."""
        ...

    def stream_events(
        self,
        reply: dict[str, Any],
        model: str,
        *,
        terminal: bool = ...,
        empty: str | None = ...,
    ) -> list[Event]:
        """The events of a streamed reply; ``terminal``: with its end-of-stream marker."""
        ...

    def frame(self, event: str, payload: dict[str, Any]) -> bytes:
        """One SSE event on the wire."""
        ...

    def marks(self, events: list[Event]) -> list[tuple[int, ...] | None]:
        """The neutral content milestone of each event (``openai_chat.marks``' terms), None
        for an event that delivers none."""
        ...

    def error_body(self, message: str, type_: str = ...) -> dict[str, Any]:
        """An error body of this dialect's shape."""
        ...

    def read_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """A request body of this dialect as a chat-completions body."""
        ...

    def stream_reader(self, out: ChatOut) -> StreamReader:
        """A reader of this dialect's stream events writing chat frames to ``out``."""
        ...

    def read_json(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """A JSON reply of this dialect as a chat body (a completion or ``{"error": ...}``),
        or None when ``obj`` is not one of its replies (then it is kept as sent)."""
        ...

    # The bytes the faults inject (``fakes.faults.Context.dialect``), in this dialect.
    def http_error_body(self, status: int) -> dict[str, Any]:
        """The default body of a scripted ``http_error``."""
        ...

    def prompt_too_long_body(self) -> dict[str, Any]:
        """The body of an ``http_error`` with ``error: prompt_too_long``: the context window
        overflow in this API's own words."""
        ...

    def in_band_error_frame(self, error: dict[str, Any] | None, seq: int, model: str) -> bytes:
        """The frame of a scripted ``in_band_error``."""
        ...

    def malformed_frame(self, kind: str) -> bytes:
        """The frame of a scripted ``malformed_event`` (``bad_json`` or ``missing_data``)."""
        ...
