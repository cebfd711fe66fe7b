"""The registry of agents: one list, declared once in pyproject.toml and read from the install.

The SDK agents are entry points (``agent_conformance.adapters``); the installer copies them from
pyproject.toml into the distribution's metadata, which the registry reads. The first test holds
the two together: it fails, naming the fix, when the install predates a change to the table.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from conformance.adapters import MissingExtra, agent_names, make_adapter, sdk_agents
from conformance.adapters.interface import AdapterBase
from conformance.adapters.registry import BUILTIN, DISTRIBUTION, GROUP, agents_help
from conformance.adapters.shipped import which_profiles

PYPROJECT = tomllib.loads(
    (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
)
DECLARED: dict[str, str] = PYPROJECT["project"]["entry-points"][GROUP]
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def _ours(ep: importlib.metadata.EntryPoint) -> bool:
    return ep.dist is not None and re.sub(r"[-_.]+", "-", ep.dist.name).lower() == DISTRIBUTION


def test_the_installed_sdk_agents_are_the_ones_pyproject_declares() -> None:
    installed = {name: ep.value for name, ep in sdk_agents().items() if _ours(ep)}
    assert installed == DECLARED, (
        f"the installed metadata of {DISTRIBUTION} does not hold pyproject.toml's "
        f"[project.entry-points.{GROUP!r}] table: install the project again "
        "(pip install -e .) so that its entry points are written"
    )


def test_each_sdk_agent_has_its_extra_and_the_aggregate_holds_them_all() -> None:
    assert DECLARED, "pyproject.toml declares no SDK agent"
    for name in DECLARED:
        assert f"sdk-{name}" in EXTRAS, f"SDK agent {name!r} has no extra sdk-{name}"
    (aggregate,) = EXTRAS["all-sdk-agents"]
    named = re.fullmatch(rf"{DISTRIBUTION}\[([^\]]*)\]", aggregate)
    assert named is not None, aggregate
    assert sorted(e.strip() for e in named.group(1).split(",")) == sorted(
        f"sdk-{name}" for name in DECLARED
    )


@pytest.mark.parametrize("name", list(BUILTIN))
def test_each_built_in_agent_is_built_or_names_its_extra(name: str) -> None:
    try:
        adapter = make_adapter(name)
    except MissingExtra as exc:  # its SDK is not installed here
        assert exc.agent == name
        assert exc.extra in EXTRAS
        assert f"pip install '{DISTRIBUTION}[{exc.extra}]'" in str(exc)
    else:
        assert adapter.name == name


@pytest.mark.parametrize("name", list(DECLARED))
def test_each_sdk_agent_names_an_adapter_of_that_name(name: str) -> None:
    # Loading imports the adapter's module only (its SDK is imported when the adapter is built:
    # tests/adapters/test_sdk_agents.py builds and runs each, test_openai_sdk_suite.py takes its
    # SDK away), so this holds whether or not the SDK is installed.
    factory = sdk_agents()[name].load()
    assert callable(factory)
    assert getattr(factory, "name", None) == name


def test_the_agents_are_built_in_then_sdk_agents_then_shipped_profiles() -> None:
    profiles = [f"shipped:{p}" for p in which_profiles()]
    assert profiles, "no bundled profile"
    assert agent_names() == [*BUILTIN, *sorted(DECLARED), *profiles]
    for spec in profiles:
        assert make_adapter(spec).name == spec


def test_the_help_and_an_unknown_spec_name_every_sdk_agent() -> None:
    with pytest.raises(ValueError, match="unknown adapter 'bogus'") as info:
        make_adapter("bogus")
    for name in DECLARED:
        assert f"'{name}'" in str(info.value)
        assert f"'{name}'" in agents_help()


class ToyAdapter(AdapterBase):
    """An adapter another distribution could register."""

    name = "toy"

    def capabilities(self) -> set[str]:
        return set()


def _toy_sdk_missing() -> ToyAdapter:
    raise ImportError("No module named 'toy_sdk'")


def _registered(monkeypatch, *eps: importlib.metadata.EntryPoint) -> None:
    def entry_points(*, group: str):
        assert group == GROUP
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_an_entry_point_alone_adds_an_agent(monkeypatch) -> None:
    _registered(
        monkeypatch,
        importlib.metadata.EntryPoint("toy", f"{__name__}:ToyAdapter", GROUP),
        importlib.metadata.EntryPoint("reference", f"{__name__}:ToyAdapter", GROUP),
        importlib.metadata.EntryPoint("cmd:x", f"{__name__}:ToyAdapter", GROUP),
    )
    assert list(sdk_agents()) == ["toy"]  # built-in names and specs with ':' cannot be taken
    assert isinstance(make_adapter("toy"), ToyAdapter)
    assert make_adapter("reference").name == "reference"
    assert "toy" in agent_names()


def test_another_distributions_agent_without_its_sdk_is_named(monkeypatch) -> None:
    _registered(
        monkeypatch, importlib.metadata.EntryPoint("toy", f"{__name__}:_toy_sdk_missing", GROUP)
    )
    with pytest.raises(ValueError, match=r"adapter 'toy' is not available: .*toy_sdk") as info:
        make_adapter("toy")
    assert not isinstance(info.value, MissingExtra)  # no extra of ours provides its SDK


def test_no_sdk_agent_at_all_says_to_install_again(monkeypatch) -> None:
    _registered(monkeypatch)
    with pytest.raises(ValueError, match="unknown adapter 'litellm'") as info:
        make_adapter("litellm")
    assert "pip install -e ." in str(info.value)
