"""Wire dialects: one module per dialect behind the ``Dialect`` protocol, and their registry.

``REGISTRY`` is the one list of dialect names: CLI choices, schema enums and the gateway's
dispatch read it. Adding a dialect is adding its module and one line here (docs/contracts.md,
"Adding a dialect").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from fakes.dialects import anthropic_messages, openai_chat, openai_responses
from fakes.dialects._protocol import ChatOut, Dialect, Event, StreamReader

__all__ = ["ChatOut", "Dialect", "Event", "StreamReader", "REGISTRY", "NAMES", "CHAT"]

CHAT = openai_chat.NAME  # the canonical view every other dialect is read back into

# Typed as the protocol, so mypy checks that every module provides all of it.
_CHAT: Dialect = openai_chat
_ANTHROPIC: Dialect = anthropic_messages
_RESPONSES: Dialect = openai_responses

# Name (as the journal records it) -> module; the order is the order lists show.
REGISTRY: Mapping[str, Dialect] = MappingProxyType(
    {d.NAME: d for d in (_CHAT, _ANTHROPIC, _RESPONSES)}
)
NAMES: tuple[str, ...] = tuple(REGISTRY)
