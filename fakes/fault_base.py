"""The base of every fault primitive (``Fault``) and what a fault may use (``Context``,
``Rendering``); the primitives themselves are in ``fakes.faults`` (and ``fakes.delivery``).

A fault class carries its name, the JSON Schema of its parameters (the fault part of
``scenarios/schema.json`` is generated from these: ``fakes.schemas``), whether it
needs a stream (``stream_only``), whether it can act on recorded bytes (``replay_ok``), and how
it acts at each stage of a response that ``fakes.plan`` goes through:

1. ``replace``: answer with something else entirely (an error status, a reset);
2. ``on_plan``: set a plan-wide property (a header delay);
3. ``on_reply``: change the reply before it is rendered (``Rendering``); never on a replay;
4. ``on_body``: act on a whole non-streaming body;
5. ``on_stream``: act on the chunks of a stream, rendered or replayed, at position ``n`` (the
   caller maps ``after_events`` to the dialect's neutral position or the recording's chunks).

The bytes a fault injects come from the dialect (``Context.dialect``: ``http_error_body``,
``malformed_frame``, ``in_band_error_frame``), so no fault knows a wire format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fakes.dialects import Dialect
from fakes.response import Chunk, Plan

__all__ = ["COUNT", "SECONDS", "Context", "Fault", "Rendering", "fuzz_events"]

# The parameter types the scenario schema defines once (``$defs``).
COUNT = {"$ref": "#/$defs/count"}
SECONDS = {"$ref": "#/$defs/seconds"}


@dataclass(frozen=True)
class Context:
    """What a fault may use of the request: the dialect's fault bytes, the model, the key."""

    dialect: Dialect
    model: str = "fake-model"
    api_key: str | None = None


@dataclass
class Rendering:
    """The reply about to be rendered and how: ``empty`` an empty-reply kind, ``terminal``
    whether the stream ends with its finish and end-of-stream markers."""

    reply: dict[str, Any]
    empty: str | None = None
    terminal: bool = True


class Fault:
    """A fault primitive; the base acts nowhere, each subclass overrides its stages."""

    name: ClassVar[str]
    params: ClassVar[dict[str, Any]]  # JSON Schema of the parameters
    stream_only: ClassVar[bool] = False
    replay_ok: ClassVar[bool] = True
    # Whether an attempt that met this fault failed on the wire, unless ``attempt_failed``
    # says otherwise from the journal's response record (``conformance.judging.evidence.is_failed``).
    breaks: ClassVar[bool] = False
    # What a client meets, for the checks that judge a kind of failure whatever fault made it
    # (``conformance.judging.evidence.symptom``): "http_status" (an error status), "connection_failed"
    # (no response), "broken_stream" (a 200 body that stops or goes silent), "no_finish" (ends
    # without a finish reason), "malformed_event" (an event that does not parse; the first
    # such frame is the injected one), "in_band_error" (an error event; the last frame),
    # "length" (a reply cut at the token limit), "empty_reply"; None: nothing a client must
    # recover from.
    symptom: ClassVar[str | None] = None
    # Whether the fault changes only how the reply is delivered (where the writes fall, when
    # the events go out), never its bytes: an agent must show the same reply as without it
    # (STR-09 compares what it showed with what the wire delivered).
    reshapes: ClassVar[bool] = False

    def silence_s(self, p: dict[str, Any]) -> float | None:
        """Seconds the stream goes silent after its headers (None: it does not)."""
        return None

    def event_gap_s(self, p: dict[str, Any], sent: bytes) -> float:
        """The longest time (nominal seconds) this fault's delivery of the stream ``sent`` (the
        bytes carried, possibly cut short) leaves a client waiting for its next event, from the
        headers on (0: it adds no wait)."""
        return 0.0

    def attempt_failed(self, resp: Mapping[str, Any], p: dict[str, Any]) -> bool | None:
        """Whether the attempt failed, read from its response record; None: by ``breaks``."""
        return None

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        """Parameters for ``conformance fuzz``, drawn with Hypothesis's ``draw`` (``reply`` is
        the step's reply, for a fault that acts on its parts)."""
        return {}

    def replace(self, plan: Plan, p: dict[str, Any], ctx: Context) -> Plan | None:
        return None

    def on_plan(self, plan: Plan, p: dict[str, Any]) -> None:
        return None

    def on_reply(self, r: Rendering, p: dict[str, Any]) -> None:
        return None

    def on_body(self, plan: Plan, raw: bytes, p: dict[str, Any]) -> list[Chunk]:
        return [Chunk(raw, event=False)]

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        return chunks


def fuzz_events() -> Any:
    """Where ``conformance fuzz`` places an ``after_events`` fault."""
    from hypothesis import strategies as st

    return st.integers(0, 8)
