"""What the exchanges show, read once for every observation: :class:`Seen` and its helpers.

Nothing here judges; the observations (``observations.py``) turn these facts into verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.probe.exchange import Exchange
from conformance.probe.wire import wire_for

__all__ = [
    "REASONING_KEYS",
    "Seen",
    "by_name",
    "error_shape",
    "first_error",
    "json_message",
    "stream_facts",
    "tool_fragments",
]

# Delta / message keys under which gateways are known to send reasoning.
REASONING_KEYS = ("reasoning_content", "reasoning", "reasoning_text", "thinking", "thoughts")


@dataclass(frozen=True)
class Seen:
    """The exchanges, and the streams among them sorted once: every observation reads these.

    ``streams`` are the 200 ``text/event-stream`` replies to streamed requests, ``facts`` their
    :func:`stream_facts` by exchange name; a *normal* stream carried no error event, a *broken*
    one did. The exchanges are in the chat view (``wire``), ``raw`` as they arrived by name;
    ``dialect`` is the one spoken, ``end_marker`` its event read as ``[DONE]`` and
    ``not_applicable`` the observations it has no counterpart of (id -> why).
    """

    exchanges: list[Exchange]
    streams: list[Exchange]
    facts: dict[str, dict[str, Any]]
    normal: list[Exchange]
    broken: list[Exchange]
    raw: Mapping[str, Exchange] = field(default_factory=dict)
    dialect: str = "openai_chat"
    end_marker: str = "[DONE]"
    not_applicable: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, exchanges: list[Exchange], dialect: str = "openai_chat") -> Seen:
        wire = wire_for(dialect)
        raw = {x.name: x for x in exchanges}
        exchanges = [wire.chat_view(x) for x in exchanges]
        streams = [x for x in exchanges if x.stream and x.status == 200 and x.is_sse()]
        facts = {x.name: stream_facts(x) for x in streams}
        return cls(
            exchanges=exchanges,
            streams=streams,
            facts=facts,
            normal=[x for x in streams if not facts[x.name]["errors"]],
            broken=[x for x in streams if facts[x.name]["errors"]],
            raw=raw,
            dialect=dialect,
            end_marker=wire.end_marker,
            not_applicable=wire.not_applicable,
        )


def stream_facts(ex: Exchange) -> dict[str, Any]:
    """What one streamed exchange shows about how streams are framed and how they end."""
    evs = ex.events()
    data = [e for e in evs if e["data"] != "[DONE]"]
    done_at = next((i for i, e in enumerate(evs) if e["data"] == "[DONE]"), None)
    with_choice = [
        e["json"] for e in data if isinstance(e["json"], dict) and e["json"].get("choices")
    ]
    errors = [
        e
        for e in data
        if e["event"] == "error" or (isinstance(e["json"], dict) and "error" in e["json"])
    ]
    finishes = [
        c.get("finish_reason")
        for j in with_choice
        for c in j["choices"]
        if isinstance(c, dict) and c.get("finish_reason")
    ]
    last = with_choice[-1]["choices"][0] if with_choice else {}
    reasoning = sorted(
        {
            k
            for j in with_choice
            for c in j["choices"]
            if isinstance(c, dict)
            for k, v in (c.get("delta") or {}).items()
            if k in REASONING_KEYS and v
        }
    )
    return {
        "events": len(evs),
        "done": done_at is not None,
        "done_last": done_at is not None and done_at == len(evs) - 1,
        "errors": errors,
        "finishes": finishes,
        "last_finish": isinstance(last, dict) and bool(last.get("finish_reason")),
        "after_finish": _after_finish(with_choice),
        "carried": sum(
            bool(v)
            for j in with_choice
            for c in j["choices"]
            if isinstance(c, dict)
            for k, v in (c.get("delta") or {}).items()
            if k in ("content", "tool_calls", "function_call") or k in REASONING_KEYS
        ),
        "usage": any(isinstance(e["json"], dict) and e["json"].get("usage") for e in data),
        "reasoning": reasoning,
        "unparsed": [e["data"][:80] for e in data if e["json"] is None],
    }


def _after_finish(with_choice: list[dict[str, Any]]) -> int:
    """How many chunks with a choice follow the last one that carries finish_reason."""
    marks = [
        i
        for i, j in enumerate(with_choice)
        if any(isinstance(c, dict) and c.get("finish_reason") for c in j["choices"])
    ]
    return len(with_choice) - 1 - marks[-1] if marks else 0


def tool_fragments(ex: Exchange) -> list[dict[str, Any]]:
    """Every tool-call fragment of a stream, in order: its index, id, name and argument piece."""
    frags = []
    for e in ex.events():
        j = e["json"]
        if not isinstance(j, dict):
            continue
        for c in j.get("choices") or []:
            for tc in (c.get("delta") or {}).get("tool_calls") or [] if isinstance(c, dict) else []:
                fn = tc.get("function") or {}
                frags.append(
                    {
                        "index": tc.get("index"),
                        "id": tc.get("id"),
                        "name": fn.get("name"),
                        "args": fn.get("arguments"),
                    }
                )
    return frags


def json_message(ex: Exchange) -> tuple[dict[str, Any], Any]:
    """The first choice's message and finish_reason of a non-streamed reply (``{}, None`` when
    the body has no choice)."""
    j = ex.json_body()
    if not isinstance(j, dict) or not j.get("choices"):
        return {}, None
    ch = j["choices"][0] if isinstance(j["choices"][0], dict) else {}
    return (ch.get("message") or {}), ch.get("finish_reason")


def first_error(ex: Exchange) -> tuple[str, int] | None:
    """How the first error event of a stream looks on the wire (``event: error``,
    ``data: {error: ...}``) and how many events came before it; None when there is none."""
    for i, e in enumerate(ex.events()):
        j = e["json"] if isinstance(e["json"], dict) else {}
        kind = e["event"] or j.get("type")
        if kind in ("error", "response.failed"):
            return (f"event: {e['event']}" if e["event"] else f"data: {{type: {kind}, ...}}"), i
        if "error" in j:
            return "data: {error: ...}", i
    return None


def by_name(exchanges: list[Exchange], name: str) -> Exchange | None:
    return next((x for x in exchanges if x.name == name), None)


def error_shape(ex: Exchange) -> str:
    """An error body's content type and top-level keys (an ``error`` object's keys with it), or
    its first bytes when not JSON."""
    j = ex.json_body()
    ctype = ex.headers.get("content-type", "").split(";")[0] or "no content type"
    if isinstance(j, dict):
        keys = [
            f"{k}: {{{', '.join(v)}}}" if k == "error" and isinstance(v, dict) else k
            for k, v in j.items()
        ]
        return f"{ctype} {{{', '.join(keys)}}}"
    return f"{ctype}, not JSON: {ex.body[:60].decode('utf-8', 'replace')!r}"
