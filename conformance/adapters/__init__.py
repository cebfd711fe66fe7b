"""Adapters that drive an agent under test through the adapter protocol.

`interface` holds the types every adapter shares, `registry` the one list of agents and the
lookup from a spec (``reference``, ``openai-sdk``, an SDK agent, ``cmd:COMMAND``,
``shipped:PROFILE``) to an adapter; each adapter is a module of its own.
"""

from conformance.adapters.interface import REDACTED, Adapter, RunOutcome, RunRequest, redact
from conformance.adapters.registry import MissingExtra, agent_names, make_adapter, sdk_agents

__all__ = [
    "REDACTED",
    "Adapter",
    "MissingExtra",
    "RunOutcome",
    "RunRequest",
    "agent_names",
    "make_adapter",
    "redact",
    "sdk_agents",
]
