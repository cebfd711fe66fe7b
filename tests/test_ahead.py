"""Two runs of an agent that overlaps its runs in flight at once (conformance.ahead)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest
from conformance.ahead import Ahead
from conformance.runner import RunConfig, run_suite
from conformance.share import Share
from fakes import Gateway, load_scenario

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"


def test_a_run_started_ahead_runs_while_the_current_one_does() -> None:
    ahead: Ahead[str] = Ahead()
    second_started = threading.Event()

    def second() -> str:
        second_started.set()
        return "second"

    def first() -> str:
        # Ends only once the second has started: without running ahead it would wait in vain.
        return "first" if second_started.wait(10) else "alone"

    ahead.start("b", second)
    assert ahead.result("a", first) == "first"
    assert ahead.result("b", lambda: "run again") == "second"  # taken, not run twice


def test_a_run_not_started_ahead_runs_when_taken() -> None:
    ahead: Ahead[int] = Ahead()
    assert ahead.result("x", lambda: 7) == 7


def test_what_a_run_ahead_raised_is_raised_where_it_is_taken() -> None:
    ahead: Ahead[int] = Ahead()

    def broken() -> int:
        raise RuntimeError("the harness broke on this run")

    ahead.start(1, broken)
    with pytest.raises(RuntimeError, match="the harness broke"):
        ahead.result(1, lambda: 0)


def test_a_key_started_twice_runs_once() -> None:
    ahead: Ahead[int] = Ahead()
    calls: list[int] = []
    gate = threading.Event()

    def run() -> int:
        gate.wait(10)
        calls.append(1)
        return len(calls)

    ahead.start("k", run)
    ahead.start("k", run)
    gate.set()
    assert ahead.result("k", lambda: -1) == 1
    assert calls == [1]


class _Meeting(AdapterBase):
    """Each run waits for another run of it to be in flight: runs one after another never meet."""

    name = "meeting"

    def __init__(self, overlap: bool, wait_s: float) -> None:
        self.overlap = overlap
        self.barrier = threading.Barrier(2, timeout=wait_s)
        self.met: list[bool] = []

    def capabilities(self) -> set[str]:
        return {"time_scale"}

    def run(self, req: RunRequest) -> RunOutcome:
        try:
            self.barrier.wait()
            self.met.append(True)
        except threading.BrokenBarrierError:
            self.met.append(False)
            self.barrier.reset()
        return RunOutcome(
            "ran", [{"type": "turn_end", "reason": "completed", "t_ns": 0}], None, "", None
        )


@pytest.mark.parametrize(
    ("overlap", "ahead", "met"),
    [
        (True, True, [True, True]),
        (False, True, [False, False]),  # an agent in a process of its own: one at a time
        # Where a confirming run could not hold the machine against a run ahead, none starts.
        (True, False, [False, False]),
    ],
)
def test_an_agent_that_overlaps_its_runs_has_two_in_flight_and_keeps_their_order(
    overlap: bool, ahead: bool, met: list[bool], tmp_path: Path
) -> None:
    files = ["err/err-01-401-auth.yaml", "err/err-01-429-exhausted.yaml"]
    scenarios = [load_scenario(CRITERIA / f) for f in files]
    agent = _Meeting(overlap, wait_s=10.0 if overlap and ahead else 0.2)
    config = RunConfig(ahead=ahead, shared=True, hold=Share(tmp_path).hold)
    with Gateway.running() as gw:
        results = run_suite(gw, agent, scenarios, config=config)
    assert agent.met == met
    assert [s["id"] for s in results["scenarios"]] == [s.id for s in scenarios]
    assert [s["status"] for s in results["scenarios"]] == ["ran", "ran"]


def _span_ns(entry: dict) -> tuple[int, int]:
    """When the gateway saw the scenario's first and last requests."""
    times = [e["t_arrival_ns"] for e in entry["journal"]["entries"]]
    return min(times), max(times)


def test_a_run_through_pytest_starts_the_next_scenario_while_one_is_in_flight(
    tmp_path: Path,
) -> None:
    from conformance.cli import main

    results = tmp_path / "r.json"
    # -k runs through pytest (conformance.plugin), in one process: the next item is started
    # ahead. The gateway's clock shows the two scenarios' requests interleaved.
    rc = main(
        [
            "run",
            "-k",
            "rty-03-backoff-429 or rty-06-request-timeout",
            "--results",
            str(results),
            "--report-dir",
            str(tmp_path / "report"),
        ]
    )
    assert rc == 0
    doc = json.loads(results.read_text(encoding="utf-8"))
    entries = doc["agents"][0]["scenarios"]
    assert [e["id"] for e in entries] == ["rty-03-backoff-429", "rty-06-request-timeout"]
    (a0, a1), (b0, b1) = (_span_ns(e) for e in entries)
    assert a0 < b1 and b0 < a1, "the two scenarios ran one after the other"
    verdicts = {cid: c["verdict"] for cid, c in doc["agents"][0]["criteria"].items()}
    assert "FAIL" not in verdicts.values(), verdicts
    # Their times order the agent's next run (conformance.durations).
    from conformance.durations import read_durations

    took = read_durations(("reference", "openai_chat", "http", 0.02))
    assert set(took) == {"rty-03-backoff-429", "rty-06-request-timeout"}
    assert took["rty-03-backoff-429"] >= entries[0]["duration_s"]


def test_scenarios_run_in_the_order_asked_and_are_reported_in_the_order_given() -> None:
    from conformance.adapters.reference import ReferenceAdapter

    files = [
        "err/err-01-401-auth.yaml",
        "err/err-01-429-exhausted.yaml",
        "rty/rty-15-should-retry-true-400.yaml",
    ]
    scenarios = [load_scenario(CRITERIA / f) for f in files]
    lines: list[str] = []
    with Gateway.running() as gw:
        results = run_suite(
            gw, ReferenceAdapter(), scenarios, progress=lines.append, order=[2, 0, 1]
        )
        with pytest.raises(ValueError, match="not an order of the 3 scenarios"):
            run_suite(gw, ReferenceAdapter(), scenarios, order=[0, 0, 1])
    ran = [line.split("] ")[1].split(":")[0] for line in lines]
    assert ran == [scenarios[i].id for i in (2, 0, 1)]
    assert [s["id"] for s in results["scenarios"]] == [s.id for s in scenarios]
