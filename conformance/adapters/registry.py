"""From an agent spec to its adapter: the one list of agents the CLI, the tests and the
comparison read.

A spec is one of:

- ``reference`` (the reference agent, in-process) or ``openai-sdk`` (the official openai SDK
  at its defaults; extra ``sdk``): built in;
- the name of an *SDK agent*, an agent built on a Python agent SDK: an entry point of the group
  ``agent_conformance.adapters`` whose value is ``module:Factory``, a callable that takes no
  argument and returns the adapter. This distribution declares its own in ``pyproject.toml``
  (``[project.entry-points."agent_conformance.adapters"]``), each needing the optional extra
  ``sdk-<name>``; another distribution adds one the same way, with no change here;
- ``cmd:COMMAND`` (a program speaking the adapter protocol), or ``shipped:PROFILE`` (also
  written ``profile:PROFILE``: an agent as it ships, run per its profile).

Theory of operation: entry points are read from the installed distributions' metadata, which the
installer writes from ``pyproject.toml``; a checkout whose table changed is seen only once it is
installed again (``pip install -e .``), and ``tests/adapters/test_registry.py`` fails until then,
naming that command. Factories import their SDK when called, so a missing SDK is an ImportError
at lookup, turned here into `MissingExtra`, which names the extra to install. Built-in names and
names with a ``:`` cannot be taken by an entry point; of two entry points with one name, the
first distribution on the path wins.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable

from conformance.adapters.interface import Adapter
from conformance.errors import ConformanceError

__all__ = [
    "BUILTIN",
    "DISTRIBUTION",
    "GROUP",
    "MissingExtra",
    "agent_names",
    "agents_help",
    "make_adapter",
    "sdk_agents",
]

GROUP = "agent_conformance.adapters"
DISTRIBUTION = "agent-conformance"


class MissingExtra(ConformanceError, ValueError):
    """A known agent whose SDK is not installed; the message names the extra that provides it."""

    def __init__(self, agent: str, extra: str, cause: BaseException) -> None:
        super().__init__(
            f"adapter {agent!r} needs its SDK: pip install '{DISTRIBUTION}[{extra}]' ({cause})"
        )
        self.agent = agent
        self.extra = extra


def _reference() -> Adapter:
    from conformance.adapters.reference import ReferenceAdapter

    return ReferenceAdapter()


def _openai_sdk() -> Adapter:
    from conformance.adapters.openai_sdk import OpenAISDKAdapter

    return OpenAISDKAdapter()


# The agents every install has: name -> (factory, the extra its SDK comes from, or None).
BUILTIN: dict[str, tuple[Callable[[], Adapter], str | None]] = {
    "reference": (_reference, None),
    "openai-sdk": (_openai_sdk, "sdk"),
}


def sdk_agents() -> dict[str, importlib.metadata.EntryPoint]:
    """The SDK agents installed, by name, sorted (installers do not keep the declared order)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        if ep.name not in BUILTIN and ":" not in ep.name:
            found.setdefault(ep.name, ep)
    return dict(sorted(found.items()))


def agent_names() -> list[str]:
    """Every agent named without a command: built-in, SDK agents, ``shipped:`` bundled profiles."""
    from conformance.adapters.shipped_profile import which_profiles

    return [*BUILTIN, *sdk_agents(), *(f"shipped:{p}" for p in which_profiles())]


def agents_help() -> str:
    """The accepted specs in one sentence, for a command line's help."""
    sdk = ", ".join(f"'{name}'" for name in sdk_agents()) or "none installed"
    return (
        "'reference' (in-process), 'openai-sdk', an SDK agent "
        f"({sdk}; each an optional extra), 'cmd:COMMAND' (a command speaking the adapter "
        "protocol, run in a scratch directory; relative paths in it resolve against the "
        "current directory) or 'shipped:PROFILE' (an agent as it ships)"
    )


def make_adapter(spec: str) -> Adapter:
    """The adapter a spec names (see the module docstring); ValueError names what is wrong."""
    if spec.startswith("cmd:"):
        from conformance.adapters.command import CommandAdapter

        return CommandAdapter(spec[len("cmd:") :])
    if spec.startswith(("shipped:", "profile:")):
        from conformance.adapters.shipped import ShippedAdapter

        return ShippedAdapter(spec.partition(":")[2])
    if spec in BUILTIN:
        factory, extra = BUILTIN[spec]
        return _build(spec, factory, extra)
    sdk = sdk_agents()
    if spec in sdk:
        return _build_entry_point(spec, sdk[spec])
    names = ", ".join(f"'{name}'" for name in sdk)
    raise ValueError(
        f"unknown adapter {spec!r}: expected 'reference', 'openai-sdk', "
        + (f"an SDK agent ({names}), " if names else "")
        + "'cmd:COMMAND' or 'shipped:PROFILE'"
        + ("" if names else _why_no_sdk_agent())
    )


def _build(name: str, factory: Callable[[], Adapter], extra: str | None) -> Adapter:
    try:
        return factory()
    except ImportError as exc:
        if extra is None:
            raise ValueError(f"adapter {name!r} is not available: {exc}") from exc
        raise MissingExtra(name, extra, exc) from exc


def _build_entry_point(name: str, ep: importlib.metadata.EntryPoint) -> Adapter:
    # Our own SDK agents take their SDK from the extra sdk-<name>; another distribution's
    # agent has its SDK as a dependency of that distribution, so no extra can be named.
    ours = ep.dist is not None and _normalize(ep.dist.name) == DISTRIBUTION
    # ep.load() imports the adapter's module: one that imports its SDK at the top fails there.
    return _build(name, lambda: ep.load()(), f"sdk-{name}" if ours else None)


def _normalize(dist_name: str) -> str:
    return re.sub(r"[-_.]+", "-", dist_name).lower()


def _why_no_sdk_agent() -> str:
    """Why no SDK agent is registered: an install whose metadata predates the entry points."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return f" (no SDK agent: {DISTRIBUTION} is not installed; pip install -e .)"
    return (
        f" (no SDK agent: the installed metadata of {DISTRIBUTION} {dist.version} has no "
        f"{GROUP!r} entry points; install it again: pip install -e .)"
    )
