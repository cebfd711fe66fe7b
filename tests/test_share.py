"""One calibration per run: what one process measures, the run's other processes read."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from conformance.calibration import ClockChoice, judge
from conformance.options import RunSettings
from conformance.session import AgentUnderTest, RunSession
from conformance.share import ENV, Share
from tests.adapters.test_warp import needs_warp, node_agent_at


def _measure_and_count(folder: str, tally: str, out: Any) -> None:
    def measure() -> dict[str, Any]:
        with open(tally, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        return {"by": os.getpid()}

    found, here = Share(Path(folder)).once("clock of agent", measure)
    out.put((found, here))


def test_one_process_of_the_run_measures_and_the_others_read_it(tmp_path: Path) -> None:
    tally = tmp_path / "tally"
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_measure_and_count, args=(str(tmp_path), str(tally), out))
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert len(tally.read_text().split()) == 1  # measured once
    assert sorted(here for _, here in got) == [False, False, False, True]
    assert len({json.dumps(found) for found, _ in got}) == 1  # all read the same


def _die_while_measuring(folder: str) -> None:
    def measure() -> dict[str, Any]:
        os._exit(3)  # holding the lock

    Share(Path(folder)).once("clock of agent", measure)


def test_a_process_that_dies_measuring_leaves_the_measurement_to_the_next(
    tmp_path: Path,
) -> None:
    p = multiprocessing.get_context("fork").Process(
        target=_die_while_measuring, args=(str(tmp_path),)
    )
    p.start()
    p.join(60)
    assert p.exitcode == 3
    found, here = Share(tmp_path).once("clock of agent", lambda: {"ok": 1})
    assert (found, here) == ({"ok": 1}, True)


def test_without_a_shared_folder_each_process_measures_for_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    share = Share.from_env()
    calls: list[int] = []

    def measure() -> dict[str, Any]:
        calls.append(1)
        return {"n": len(calls)}

    for _ in range(2):
        share.once("k", measure)
    assert len(calls) == 2


def test_a_clock_choice_reads_back_as_it_was_written() -> None:
    fit, loose = judge(5.0, [0.2, 0.8, 0.2, 0.8]), judge(20.0, [0.05, 0.2, 0.05, 0.3])
    choice = ClockChoice(20.0, 5.0, {20.0: loose, 5.0: fit}, "time warp x20")
    again = ClockChoice.from_json(json.loads(json.dumps(choice.as_json())))
    assert again == choice


def calibrating_stand_in(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Put a stand-in for ``choose_clock`` that puts the agent on x10 without running it; the
    list it returns names the adapters it calibrated, in order."""
    from conformance import calibration

    fit = judge(10.0, [0.12, 0.42, 0.12, 0.42])
    choice = ClockChoice(10.0, 10.0, {10.0: fit}, "time warp x10")
    calibrated: list[Any] = []

    def choose_clock(gateway: Any, adapter: Any, dialect: str) -> ClockChoice:
        calibrated.append(adapter)
        adapter.warp_speeds()
        adapter.use_clock(10.0, 10.0, {10.0: fit}, "time warp x10")
        return choice

    monkeypatch.setattr(calibration, "choose_clock", choose_clock)
    return calibrated


@needs_warp
def test_the_second_process_of_a_run_takes_the_first_ones_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calibrated = calibrating_stand_in(monkeypatch)
    monkeypatch.setenv(ENV, str(tmp_path / "share"))
    (tmp_path / "share").mkdir()
    agents = []
    for process in ("gw0", "gw1"):
        session = RunSession(RunSettings(progress=False), command="x")
        session.process = process
        session._gateway = object()  # type: ignore[assignment]  # never used by the stand-in
        agent = node_agent_at(tmp_path)
        session.ready(AgentUnderTest("node-fake", "shipped:node-fake", agent))
        agents.append(agent)
    assert calibrated == [agents[0]]  # calibrated once, by the first process
    # The second runs on the same fast clock: its scenarios at a tenth of real time.
    for agent in agents:
        assert agent.fixed_time_scale(timing=False) == pytest.approx(0.1)
        assert agent.fixed_time_scale(timing=True) == pytest.approx(0.1)
        assert agent.warp_note == "time warp x10"
        assert not agent.needs_calibration()


def _probe(path: Path, mode: int) -> bool:
    """Whether a lock of ``mode`` on ``path`` could be taken now (by another holder)."""
    import fcntl

    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def test_ordinary_runs_share_the_machine_and_a_confirming_run_has_it_alone(
    tmp_path: Path,
) -> None:
    import fcntl

    share, machine = Share(tmp_path), tmp_path / "machine.lock"
    with share.hold(alone=False) as had:
        assert had
        assert _probe(machine, fcntl.LOCK_SH)  # other ordinary runs go on beside it
        assert not _probe(machine, fcntl.LOCK_EX)  # a confirming run waits for it
        assert _probe(tmp_path / "turnstile.lock", fcntl.LOCK_EX)  # held only to get in
    with share.hold(alone=True) as had:
        assert had
        assert not _probe(machine, fcntl.LOCK_SH)  # no ordinary run starts meanwhile
    assert _probe(machine, fcntl.LOCK_EX)  # released


def test_a_confirming_run_waits_for_the_ordinary_runs_in_flight(tmp_path: Path) -> None:
    import fcntl
    import threading

    share, order = Share(tmp_path), []
    started, release = threading.Event(), threading.Event()

    def ordinary() -> None:
        with share.hold(alone=False):
            started.set()
            release.wait(30)
            order.append("ordinary ends")

    t = threading.Thread(target=ordinary)
    t.start()
    started.wait(30)
    # The confirming run blocks on the machine's lock while holding the turnstile: seen from
    # outside, the turnstile is taken; only then is the ordinary run let finish.
    confirming = threading.Thread(target=lambda: _confirm(share, order))
    confirming.start()
    while _probe(tmp_path / "turnstile.lock", fcntl.LOCK_EX):
        if not confirming.is_alive():
            break
    release.set()
    t.join(30)
    confirming.join(30)
    assert order == ["ordinary ends", "confirming runs"]


def _confirm(share: Share, order: list[str]) -> None:
    with share.hold(alone=True):
        order.append("confirming runs")


def test_without_a_shared_folder_nothing_waits() -> None:
    with Share(None).hold(alone=True) as one, Share(None).hold(alone=True) as other:
        assert one and other  # no other process of the run to share with


def test_a_confirming_run_waits_a_bounded_time_then_runs_beside_the_others(
    tmp_path: Path,
) -> None:
    import fcntl

    impatient = Share(tmp_path, alone_wait_s=0.0)
    # An ordinary run in flight (an agent held to its deadline, say): the confirming run does
    # not wait for it past its bound, and runs beside it.
    with Share(tmp_path).hold(alone=False), impatient.hold(alone=True) as had:
        assert not had  # and the confirmation is told so, to say it (conformance.verify)
        assert not _probe(tmp_path / "machine.lock", fcntl.LOCK_EX)
        assert _probe(tmp_path / "machine.lock", fcntl.LOCK_SH)


def test_a_confirmation_run_beside_the_others_is_marked_and_says_so(tmp_path: Path) -> None:
    import contextlib
    from collections.abc import Iterator

    from conformance.adapters.reference import ReferenceAdapter
    from conformance.reference import Behaviours
    from conformance.runner import RunConfig, run_checked
    from fakes import Gateway, load_scenario

    asked: list[bool] = []

    @contextlib.contextmanager
    def busy_machine(alone: bool) -> Iterator[bool]:
        asked.append(alone)
        yield not alone  # an ordinary run has its share; a confirmation is never alone

    scenario = (
        Path(__file__).resolve().parents[1] / "scenarios/criteria/rty/rty-03-backoff-429.yaml"
    )
    broken = ReferenceAdapter(Behaviours(backoff_base=False))  # fails RTY-03 on any clock
    with Gateway.running() as gateway:
        entry, verdicts = run_checked(
            gateway, broken, load_scenario(scenario), RunConfig(hold=busy_machine)
        )
    assert asked == [False, True]
    assert entry["alone"] is False and "alone" not in entry["first_run"]
    assert verdicts["RTY-03"]["verdict"] == "FAIL"
    assert "beside the run's other processes" in verdicts["RTY-03"]["confirmed"]["on"]


def test_a_run_with_other_processes_confirms_an_early_wait_on_the_slower_clock_at_once() -> None:
    # -n N: a wait that came early is no load's doing, so no run alone on the same clock first
    # (conformance.verify); the one confirming run holds the machine alone.
    import contextlib
    from collections.abc import Iterator

    from conformance.adapters.reference import ReferenceAdapter
    from conformance.reference import Behaviours
    from conformance.runner import RunConfig, run_checked
    from fakes import Gateway, load_scenario

    asked: list[bool] = []

    @contextlib.contextmanager
    def machine(alone: bool) -> Iterator[bool]:
        asked.append(alone)
        yield True

    scenario = (
        Path(__file__).resolve().parents[1] / "scenarios/criteria/rty/rty-03-backoff-429.yaml"
    )
    broken = ReferenceAdapter(Behaviours(backoff_base=False))  # waits half: early
    with Gateway.running() as gateway:
        entry, verdicts = run_checked(
            gateway, broken, load_scenario(scenario), RunConfig(hold=machine, shared=True)
        )
    assert asked == [False, True]
    assert entry["journal"]["time_scale"] == 0.1 and "alone_run" not in entry
    assert verdicts["RTY-03"]["verdict"] == "FAIL"
