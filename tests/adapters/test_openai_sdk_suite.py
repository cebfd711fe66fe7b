"""The official openai SDK through real scenarios: verdicts its documented defaults predict.

Defaults that decide them: max_retries=2 (RTY-04 burst of 10: FAIL after 3 attempts), backoff
0.5 s doubling with jitter (RTY-03), Retry-After honoured (RTY-01), a wait asked beyond the
SDK's cap is not retried at all (RTY-14), x-should-retry obeyed (RTY-15), no re-request after a
broken stream (STR-01 FAIL) or a malformed event (STR-14). No scenario may end in ERROR.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

from conformance.adapters import MissingExtra, make_adapter, sdk_agents
from conformance.adapters.registry import DISTRIBUTION
from conformance.runner import run_scenario
from fakes import Gateway, load_scenario

CRITERIA = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"
AGENT = "openai-sdk"


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def _run(gateway, path: str) -> tuple[dict, dict[str, dict]]:
    entry, verdicts = run_scenario(
        gateway, make_adapter("openai-sdk"), load_scenario(CRITERIA / path)
    )
    bad = {c: v for c, v in verdicts.items() if v["verdict"] in ("ERROR", "TIMEOUT")}
    assert not bad, (path, bad, entry.get("error"), entry.get("agent_log"))
    assert entry["status"] == "ran", (entry.get("error"), entry.get("agent_log"))
    return entry, verdicts


def _chat(entry: dict) -> list[dict]:
    return [e for e in entry["journal"]["entries"] if e["kind"] == "chat"]


def test_two_retries_not_ten(gateway) -> None:
    entry, v = _run(gateway, "rty/rty-04-burst-of-10.yaml")
    assert len(_chat(entry)) == 3  # the first attempt and max_retries=2
    assert v["RTY-04"]["verdict"] == "FAIL"
    waits = [
        (b["t_arrival_ns"] - a["t_arrival_ns"]) / 1e9
        for a, b in zip(_chat(entry), _chat(entry)[1:], strict=False)
    ]
    assert waits[0] >= 0.5 * 0.75 - 0.005 and waits[1] >= 1.0 * 0.75 - 0.005, (
        waits
    )  # 0.5 s, 1 s less jitter
    errors = [e for e in entry["events"] if e["type"] == "error"]
    assert [e["kind"] for e in errors] == ["rate_limit"]


def test_retry_after_seconds_is_honoured(gateway) -> None:
    _, v = _run(gateway, "rty/rty-01-retry-after-seconds.yaml")
    assert v["RTY-01"]["verdict"] == "PASS"


def test_a_wait_beyond_the_sdk_cap_is_surfaced_without_retrying(gateway) -> None:
    entry, v = _run(gateway, "rty/rty-14-retry-after-one-hour.yaml")
    assert len(_chat(entry)) == 1
    assert v["RTY-14"]["verdict"] == "PASS"


def test_x_should_retry_true_forces_a_retry_of_a_400(gateway) -> None:
    entry, v = _run(gateway, "rty/rty-15-should-retry-true-400.yaml")
    assert v["RTY-15"]["verdict"] == "PASS"
    assert len(_chat(entry)) >= 2


def test_a_broken_stream_is_not_retried_and_has_no_fallback(gateway) -> None:
    entry, v = _run(gateway, "str/str-01-cut-mid-text-reset.yaml")
    assert len(_chat(entry)) == 1
    assert all(e["body"].get("stream") is True for e in _chat(entry))
    assert v["STR-01"]["verdict"] == "FAIL"
    assert entry["events"][-1] == {**entry["events"][-1], "type": "turn_end", "reason": "error"}


def test_a_malformed_event_ends_the_turn_with_an_error_not_a_crash(gateway) -> None:
    entry, v = _run(gateway, "str/str-14-malformed-event.yaml")
    assert v["STR-14"]["verdict"] == "NON-STRICT"  # a stream failure, never re-requested
    assert [e["type"] for e in entry["events"]][-2:] == ["error", "turn_end"]


def test_the_api_key_is_in_no_event(gateway) -> None:
    entry, _ = _run(gateway, "rty/rty-04-burst-of-10.yaml")
    assert "sk-conformance-" not in repr(entry["events"]) + repr(entry["agent_log"])


def _sdk_modules(extra: str) -> list[str]:
    """The top-level modules of the installed distributions that `extra` requires."""
    wanted = {
        _dist_key(re.match(r"[A-Za-z0-9._-]+", req).group())
        for req in importlib.metadata.requires(DISTRIBUTION) or []
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", req)
    }
    return sorted(
        module
        for module, dists in _packages_distributions().items()
        if any(_dist_key(d) in wanted for d in dists)
    )


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()  # reads every RECORD: once is enough


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("agent", list(sdk_agents()))
def test_an_sdk_agent_without_its_extra_names_the_extra(monkeypatch, agent) -> None:
    extra = f"sdk-{agent}"  # the registry's rule for our own SDK agents
    for module in _sdk_modules(extra):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: import fails
    with pytest.raises(MissingExtra, match=rf"\[{extra}\]"):
        make_adapter(agent)
