"""Each scenario's time in an agent's earlier run orders its next run (conformance.durations)."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.adapters.interface import AdapterBase
from conformance.adapters.reference import ReferenceAdapter
from conformance.cache import cache_folder
from conformance.durations import read_durations, write_durations
from conformance.options import RunSettings
from conformance.plugin import dealt
from conformance.session import AgentUnderTest, RunSession
from conformance.share import Share
from scenarios import SCENARIO_DIR

KEY = ("reference", "openai_chat", "http", 0.02)


class _OneAtATime(AdapterBase):
    """An agent with no table of its own that runs one scenario at a time (the default)."""

    name = "one"


def test_a_runs_durations_are_read_back_and_merged_with_the_earlier_ones() -> None:
    assert read_durations(KEY) == {}
    write_durations(KEY, {"a": 1.5, "b": 0.25})
    write_durations(KEY, {"b": 0.5, "c": 2.0})  # a run of -k b,c: a keeps its time
    assert read_durations(KEY) == {"a": 1.5, "b": 0.5, "c": 2.0}
    # Another agent, dialect, transport or time scale has its own.
    assert read_durations(("reference", "openai_chat", "http", 0.01)) == {}
    assert read_durations(("other", "openai_chat", "http", 0.02)) == {}


def test_an_unreadable_or_foreign_file_orders_nothing(tmp_path: Path) -> None:
    write_durations(KEY, {"a": 1.0})
    (path,) = (cache_folder() / "durations").iterdir()
    for text in ("{not json", "[]", json.dumps({"format": "other", "seconds": {"a": 1}})):
        path.write_text(text, encoding="utf-8")
        assert read_durations(KEY) == {}
    doc = {"format": "conformance-durations", "key": list(KEY), "seconds": {"a": -1, "b": "x"}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert read_durations(KEY) == {}  # no negative or non-number time is taken


def test_a_cache_that_cannot_be_written_is_passed_over(monkeypatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("CONFORMANCE_CACHE_DIR", str(blocker))  # a file where a folder should be
    write_durations(KEY, {"a": 1.0})
    assert read_durations(KEY) == {}


def test_the_reference_agents_table_names_every_bundled_scenario() -> None:
    from fakes import load_scenario

    ids = {load_scenario(p).id for p in (SCENARIO_DIR / "criteria").rglob("*.yaml")}
    table = ReferenceAdapter().typical_durations()
    assert set(table) == ids, "run: python scripts/reference_durations.py"
    assert all(s >= 0 for s in table.values())


def test_known_durations_deal_equal_shares_two_at_a_time_for_an_agent_that_overlaps() -> None:
    took = {"a": 6.0, "b": 3.5, "c": 3.2, "d": 3.1, "e": 3.0, "f": 1.0, "g": 0.5, "h": 0.1}
    ordered = sorted(took, key=took.__getitem__, reverse=True)
    out = dealt(ordered, 2, took.__getitem__, together=2)
    first, second = out[:4], out[4:]
    # a and b run side by side (6 s); c with d, then e with f, in the other process (6.2 s).
    assert first[:2] == ["a", "b"] and second[:2] == ["c", "d"]
    assert sorted(out) == sorted(took)

    def side_by_side_s(part: list[str]) -> float:
        return sum(max(took[x] for x in part[i : i + 2]) for i in range(0, len(part), 2))

    assert abs(side_by_side_s(first) - side_by_side_s(second)) <= 1.0
    # One at a time: each process gets an equal share of the sum.
    single = dealt(ordered, 2, took.__getitem__)
    assert abs(sum(took[x] for x in single[:4]) - sum(took[x] for x in single[4:])) <= 1.0


def test_a_run_hands_its_processes_the_earlier_durations_else_the_adapters_own(
    tmp_path: Path,
) -> None:
    session = RunSession(RunSettings(), command="x")
    session.agents += [
        AgentUnderTest("reference", "reference", ReferenceAdapter()),
        AgentUnderTest("unknown", "cmd:x", _OneAtATime()),
    ]
    write_durations(session.durations_key("unknown"), {"a": 1.0})
    session.use_share(Share.create(tmp_path, processes=2))
    session.hand_durations()
    write_durations(session.durations_key("unknown"), {"a": 9.0})  # read once: not seen
    # A worker reads them from the run's share folder.
    worker = RunSession(RunSettings(), command="x")
    worker.use_share(Share(tmp_path))
    known = worker.known_durations()
    assert known["unknown"] == {"a": 1.0}
    assert known["reference"] == ReferenceAdapter().typical_durations()
    # A run of a few scenarios (-k) leaves the others their time in the adapter's table.
    write_durations(session.durations_key("reference"), {"rty-03-backoff-429": 9.0})
    session.hand_durations()
    table = worker.known_durations()["reference"]
    assert table["rty-03-backoff-429"] == 9.0
    assert set(table) == set(ReferenceAdapter().typical_durations())


def test_an_agent_that_overlaps_its_runs_holds_the_machine_even_in_one_process(
    tmp_path: Path,
) -> None:
    session = RunSession(RunSettings(), command="x")
    overlapping = AgentUnderTest("reference", "reference", ReferenceAdapter())
    alone = AgentUnderTest("one", "cmd:x", _OneAtATime())
    assert not session.config(overlapping).shared  # no folder to hold the machine through
    session.use_share(Share.create(tmp_path, processes=1))
    assert session.config(overlapping).shared  # its run ahead is the other run in flight
    assert not session.config(alone).shared  # nothing else runs in this one process
    session.use_share(Share.create(tmp_path, processes=3))
    assert session.config(alone).shared


def test_a_run_in_one_process_goes_longest_first_once_every_scenario_is_known() -> None:
    from types import SimpleNamespace

    session = RunSession(RunSettings(), command="x")
    agent = AgentUnderTest("one", "cmd:x", _OneAtATime())
    scenarios = [SimpleNamespace(id=i) for i in ("a", "b", "c")]
    write_durations(session.durations_key("one"), {"a": 1.0, "b": 3.0})
    assert session.longest_first(agent, scenarios) is None  # "c" unknown: the order given
    write_durations(session.durations_key("one"), {"c": 2.0})
    assert session.longest_first(agent, scenarios) == [1, 2, 0]
    # The reference agent's own table orders the bundled scenarios on a first run.
    from fakes import load_scenarios

    reference = AgentUnderTest("reference", "reference", ReferenceAdapter())
    bundled = load_scenarios(SCENARIO_DIR / "criteria")
    order = session.longest_first(reference, bundled)
    assert order is not None and sorted(order) == list(range(len(bundled)))
    table = ReferenceAdapter().typical_durations()
    took = [table[bundled[i].id] for i in order]
    assert took == sorted(took, reverse=True)
