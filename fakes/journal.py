"""The journal's shape as types: a session's record of every request and what was sent back.

These TypedDicts are the JSON of ``docs/contracts.md`` §2, field for field: the gateway writes
them and the harness reads them (``Session.journal()`` and ``GET
/_control/sessions/<sid>/journal`` return the same :class:`Journal`). They describe the data and
change nothing at run time; the journal stays plain JSON, so saved results and other tools read
it as before.

An entry is one of six kinds, told apart by ``kind`` (a tagged union, so a type checker narrows
``entry["kind"] == "tool"`` to :class:`ToolEntry`). Values the client sent are typed ``Any``:
the gateway records them as it parsed them, valid or not.
"""

# No `from __future__ import annotations` here: evaluated annotations let the runtime see
# NotRequired (``Journal.__optional_keys__``), which the tests compare with what is written.
from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "Kind",
    "End",
    "Response",
    "ChatEntry",
    "CountTokensEntry",
    "ModelsEntry",
    "ToolEntry",
    "McpEntry",
    "UnknownEntry",
    "Entry",
    "Refused",
    "Digest",
    "RetentionRecord",
    "Journal",
]

Kind = Literal["chat", "count_tokens", "models", "tool", "mcp", "unknown"]
# How the connection ended: the body went out whole, an RST, a clean close before the body's
# end, or the client left first.
End = Literal["complete", "reset", "close", "client_gone"]


class Digest(TypedDict):
    """What a bounded journal keeps of a body larger than its cap, instead of the body."""

    sha256: str  # of the bytes (hex)
    bytes: int  # their number
    head: str  # the first and last characters, decoded UTF-8 (replace), secrets redacted
    tail: str


class Response(TypedDict, total=False):
    """What the gateway sent back for one request (an entry's ``response``).

    The gateway always writes every key. They are optional in the type because a reader meets
    a missing response (``None``: nothing sent yet, or a tool hang the agent abandoned) as the
    empty record, and journals saved by earlier versions lack the newer keys; read them with
    ``.get``. ``tests/fakes`` checks that a served response carries exactly these keys.
    """

    status: int | None  # None when no headers were written (reset before them, client gone)
    headers: dict[str, str]  # lower-cased names, secret values redacted
    stream: bool
    sent: str | None  # the bytes written, decoded UTF-8 (replace), an echoed API key
    # redacted; None when a bounded journal kept only ``sent_digest`` of them
    sent_digest: Digest  # only when ``sent`` is None
    sent_bytes: int
    full_bytes: int  # the full rendering, of which ``sent_bytes`` went out
    events_sent: int
    cut_at_byte: int | None  # None when not cut
    t_headers_ns: int | None  # time.monotonic_ns() when the headers went out
    t_wall_headers: float | None  # time.time() then, for an HTTP-date Retry-After
    # The same moment in the agent's own clock, for an agent on a fast clock (its HTTP-dates
    # are rendered in that clock); absent otherwise.
    t_agent_wall_headers: NotRequired[float]
    t_end_ns: int | None  # when the connection ended (or the client left); None while it lasts
    end: End


class _Entry(TypedDict):
    """The fields every entry has, whatever its kind."""

    seq: int
    step: int | None  # the script step served; None for `otherwise`, or no step at all
    otherwise: bool  # served by `otherwise` (explicit, or by default the last fault step)
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names, secret values redacted
    body: Any  # the parsed JSON body (any JSON value), or None
    body_digest: NotRequired[Digest]  # only when a bounded journal kept no body (``body`` None)
    body_error: str | None  # why the body was refused, when it was
    t_arrival_ns: int  # time.monotonic_ns() at arrival
    fault: str | None  # the fault primitive applied
    fault_params: dict[str, Any] | None  # its parameters
    response: Response | None
    harness_error: str | None  # why the gateway could not serve the request
    dialect: str | None  # the endpoint's wire dialect; None for models, tool, mcp and unknown


class ChatEntry(_Entry):
    """A model request in any dialect: the scripted requests."""

    kind: Literal["chat"]
    # Which API key it carried: 1 for the session's first, 2 for the next one (a refreshed
    # key, RTY-10); None without one. The key itself is never journaled.
    credential: NotRequired[int | None]


class CountTokensEntry(_Entry):
    """Anthropic's ``POST /v1/messages/count_tokens``: answered, never scripted."""

    kind: Literal["count_tokens"]


class ModelsEntry(_Entry):
    """``GET /v1/models``."""

    kind: Literal["models"]


class ToolEntry(_Entry):
    """A call of a hosted tool (``POST /s/<sid>/tools/<tool>``)."""

    kind: Literal["tool"]
    tool: str
    call_id: Any  # as the agent sent it
    arguments: Any  # as the agent sent them
    behaviour: str | None  # the scripted behaviour's name (output, error, hang, ...)


class McpEntry(_Entry):
    """One HTTP exchange with the session's MCP endpoint (``/s/<sid>/mcp``): a JSON-RPC message
    and its answer; the message itself is ``body``."""

    kind: Literal["mcp"]
    mcp_session: str | None  # the Mcp-Session-Id sent, or issued by an `initialize`
    rpc_method: Any  # the message's `method`, as sent; None for a client's response
    rpc_id: Any  # its `id`; None for a notification
    tool: Any  # tools/call: the tool named, as sent
    arguments: Any  # tools/call: its arguments, as sent
    behaviour: str | None  # tools/call: the scripted behaviour's name
    result: Any  # the JSON-RPC `result` sent back, or None
    error: Any  # the JSON-RPC `error` object sent back, or None


class UnknownEntry(_Entry):
    """A request to an endpoint the gateway does not have (404, ``harness_error`` set)."""

    kind: Literal["unknown"]


Entry = ChatEntry | CountTokensEntry | ModelsEntry | ToolEntry | McpEntry | UnknownEntry


class Refused(TypedDict):
    """The window in which a session's own port refused every connection."""

    port: int
    seconds: float  # nominal, as the scenario says
    t_start_ns: int  # when the window opened (the session was made)
    t_listen_ns: int | None  # when it closed; None while it lasts


class RetentionRecord(TypedDict):
    """How much a bounded journal keeps (``fakes.retention``); None: no bound."""

    entries: int | None  # the ring's size: the last so many entries are kept
    body_bytes: int | None  # larger bodies are kept as a ``Digest``
    dropped: int  # entries the ring let go, the oldest first (``seq`` still counts them)


class Journal(TypedDict):
    """One session's journal."""

    session: str
    scenario: str
    time_scale: float
    entries: list[Entry]
    refused: NotRequired[Refused]  # only for a scenario with ``refuse_connections``
    retention: NotRequired[RetentionRecord]  # only for a session with a bounded journal
