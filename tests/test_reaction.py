"""The agent's own reaction: measured where no wait is due, taken off its waits, never hiding a
wrong wait."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conformance.adapters.interface import RunOutcome, RunRequest
from conformance.adapters.reference import ReferenceAdapter
from conformance.calibration import measure_reaction
from conformance.judging.reaction import (
    NO_REACTION,
    REACTION_CAP_S,
    Reaction,
    judge_reaction,
    reaction_gaps,
)
from conformance.reference import Behaviours
from conformance.runner import RunConfig, run_checked
from fakes import Gateway, load_scenario

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"
BACKOFF = CRITERIA / "rty" / "rty-03-backoff-429.yaml"
DELAY_S = 0.03


def test_the_reaction_is_the_median_gap_its_spread_widens_and_slows_timing():
    quick = judge_reaction([0.001, 0.0012, 0.0011, 0.001], 0.02)
    assert quick.taken_off_s == pytest.approx(0.00105)
    assert quick.timing_scale is None and quick.scale_for(0.02, True) == 0.02
    slow = judge_reaction([0.1, 0.11, 0.105, 0.1, 0.1], 0.02)
    assert slow.median_s == pytest.approx(0.1) and slow.spread_s == pytest.approx(0.01)
    # 100 ms is 5 s of scenario time at 0.02: timing scenarios run where it is 1 s.
    assert slow.timing_scale == pytest.approx(0.1)
    assert slow.scale_for(0.02, True) == pytest.approx(0.1) and slow.scale_for(0.02, False) == 0.02
    noisy = judge_reaction([0.001, 0.3, 0.002], 0.02)
    assert noisy.timing_scale == 1.0 and "real time" in noisy.note
    assert noisy.taken_off_s <= REACTION_CAP_S
    assert not judge_reaction([0.01], 0.02).measured  # too few gaps to say


def _entry(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"journal": {"entries": list(entries)}}


def test_only_transitions_with_no_wait_due_are_measured():
    ms = 1_000_000
    gaps = reaction_gaps(
        _entry(
            {"kind": "chat", "seq": 1, "t_arrival_ns": 0, "response": {"status": 200, "t_end_ns": 5 * ms}},
            {"kind": "tool", "seq": 2, "t_arrival_ns": 7 * ms, "response": {"status": 200, "t_end_ns": 8 * ms}},
            {"kind": "chat", "seq": 3, "t_arrival_ns": 20 * ms, "response": {"status": 500, "t_end_ns": 21 * ms}},
            # after a 500 a backoff is due: not a reaction
            {"kind": "chat", "seq": 4, "t_arrival_ns": 900 * ms, "response": {"status": 429, "t_end_ns": 901 * ms}},
            {"kind": "chat", "seq": 5, "t_arrival_ns": 904 * ms, "response": {"status": 200}},
        )
    )  # fmt: skip
    assert gaps == pytest.approx([0.012, 0.003])


@pytest.fixture
def delayed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every HTTP request the in-process reference agent makes leaves DELAY_S late (real), as
    on a slower runtime."""
    real = aiohttp.ClientSession._request

    async def request(self: aiohttp.ClientSession, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(DELAY_S)
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.ClientSession, "_request", request)
    yield


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def test_a_slow_runtime_is_measured_and_a_correct_backoff_on_it_passes(gateway, delayed):
    adapter = ReferenceAdapter()
    reaction = measure_reaction(
        gateway, adapter, scale=0.02, dialect="openai_chat", tool_transport="http"
    )
    assert reaction.measured and reaction.median_s >= DELAY_S, reaction
    # As a run judges it: a failed timing verdict stands only when a slower clock confirms it.
    entry, verdicts = run_checked(
        gateway, adapter, load_scenario(BACKOFF), RunConfig(), reaction=reaction
    )
    assert verdicts["RTY-03"]["verdict"] == "PASS", verdicts["RTY-03"]
    assert entry["reaction"]["median_ms"] >= DELAY_S * 1000
    assert entry["journal"]["time_scale"] >= reaction.scale_for(0.02, True)


@pytest.mark.parametrize(
    ("switch", "criterion", "scenario"),
    [
        ("backoff_base", "RTY-03", "rty-03-backoff-429.yaml"),
        ("honour_retry_after", "RTY-01", "rty-01-retry-after-seconds.yaml"),
    ],
)
def test_a_wrong_wait_on_a_slow_runtime_still_fails(gateway, delayed, switch, criterion, scenario):
    sc = load_scenario(CRITERIA / "rty" / scenario)
    broken = ReferenceAdapter(Behaviours(**{switch: False}))
    reaction = measure_reaction(
        gateway, broken, scale=0.02, dialect="openai_chat", tool_transport="http"
    )
    _, verdicts = run_checked(gateway, broken, sc, RunConfig(), reaction=reaction)
    assert verdicts[criterion]["verdict"] in ("FAIL", "NON-STRICT"), verdicts[criterion]


class _Unmeasurable(ReferenceAdapter):
    def run(self, req: RunRequest) -> RunOutcome:
        return RunOutcome("error", [], None, "", "broke")


def test_an_agent_whose_reaction_cannot_be_measured_is_judged_without_one(gateway):
    r = measure_reaction(
        gateway, _Unmeasurable(), scale=0.02, dialect="openai_chat", tool_transport="http"
    )
    assert not r.measured and "not measured" in r.note
    assert r.taken_off_s == 0.0 and Reaction() == NO_REACTION
