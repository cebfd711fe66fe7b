"""A fast clock's calibration kept between runs of the same agent on the same machine."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conformance import calibration
from conformance.adapters.shipped import ShippedAdapter
from conformance.cache import cache_folder
from conformance.calibration import KEEP_S, ClockChoice, judge, keep_choice, kept_choice
from conformance.options import RunSettings
from conformance.session import AgentUnderTest, RunSession
from conformance.share import ENV
from tests.adapters.test_warp import needs_warp, node_agent_at
from tests.test_share import calibrating_stand_in

IDENTITY = {"agent": "shipped:x", "package": "x@1.0.0", "bin": "/opt/x", "bin_file": [1, 2]}
FIT = judge(10.0, [0.12, 0.42, 0.12, 0.42])
CHOICE = ClockChoice(10.0, 10.0, {10.0: FIT}, "time warp x10")


def test_a_kept_choice_reads_back_with_its_age() -> None:
    keep_choice(IDENTITY, "openai_chat", CHOICE, now=1000.0)
    kept = kept_choice(IDENTITY, "openai_chat", now=1000.0 + 2 * 3600 + 5 * 60)
    assert kept is not None
    assert (kept.speed, kept.timing_speed, kept.accepted) == (10.0, 10.0, CHOICE.accepted)
    assert kept.note.startswith("time warp x10; calibrated 2 h 5 min ago on this machine")
    assert "--recalibrate" in kept.note


@pytest.mark.parametrize(
    ("identity", "dialect", "age_s"),
    [
        ({**IDENTITY, "bin_file": [1, 3]}, "openai_chat", 10.0),  # reinstalled
        ({**IDENTITY, "package": "x@1.0.1"}, "openai_chat", 10.0),  # another version
        (IDENTITY, "anthropic_messages", 10.0),  # another dialect
        (IDENTITY, "openai_chat", KEEP_S + 1),  # too old
        (IDENTITY, "openai_chat", -60.0),  # measured "later" than now: a clock set back
        (None, "openai_chat", 10.0),  # an agent whose clock is never kept
    ],
)
def test_a_choice_is_kept_only_for_the_same_agent_dialect_and_a_while(
    identity: dict[str, Any] | None, dialect: str, age_s: float
) -> None:
    keep_choice(IDENTITY, "openai_chat", CHOICE, now=1000.0)
    assert kept_choice(identity, dialect, now=1000.0 + age_s) is None


def test_another_machine_measures_again(monkeypatch: pytest.MonkeyPatch) -> None:
    keep_choice(IDENTITY, "openai_chat", CHOICE, now=1000.0)
    monkeypatch.setattr(calibration.os, "cpu_count", lambda: 64)
    assert kept_choice(IDENTITY, "openai_chat", now=1001.0) is None


def test_a_choice_that_accepted_no_speed_is_not_kept() -> None:
    real_time = ClockChoice(None, None, {}, "real time: x10: effective speed none")
    keep_choice(IDENTITY, "openai_chat", real_time, now=1000.0)
    assert not (cache_folder() / "calibrations").exists()


def test_an_unreadable_entry_reads_as_none() -> None:
    keep_choice(IDENTITY, "openai_chat", CHOICE, now=1000.0)
    (path,) = (cache_folder() / "calibrations").iterdir()
    doc = json.loads(path.read_text())
    doc["choice"] = {"speed": 10.0}  # no "accepted"
    path.write_text(json.dumps(doc))
    assert kept_choice(IDENTITY, "openai_chat", now=1001.0) is None
    doc["choice"] = {**CHOICE.as_json(), "speed": 40.0}  # a speed it never accepted
    path.write_text(json.dumps(doc))
    assert kept_choice(IDENTITY, "openai_chat", now=1001.0) is None
    doc["choice"]["speed"] = "10"
    path.write_text(json.dumps(doc))
    assert kept_choice(IDENTITY, "openai_chat", now=1001.0) is None
    doc["choice"] = CHOICE.as_json()  # as written: read back
    path.write_text(json.dumps(doc))
    assert kept_choice(IDENTITY, "openai_chat", now=1001.0) is not None
    path.write_text("{not json")
    assert kept_choice(IDENTITY, "openai_chat", now=1001.0) is None


@needs_warp
def test_the_next_run_takes_the_kept_calibration_and_recalibrate_measures_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calibrated = calibrating_stand_in(monkeypatch)
    monkeypatch.delenv(ENV, raising=False)  # runs of one process each, nothing shared

    script = Path(node_agent_at(tmp_path).resolve_bin())  # written once: its file is its identity

    def run(**settings: Any) -> Any:
        session = RunSession(RunSettings(progress=False, **settings), command="x")
        session._gateway = object()  # type: ignore[assignment]  # never used by the stand-in
        agent = ShippedAdapter(tmp_path / "node-fake.yaml", bin_path=str(script), use_netns=False)
        session.ready(AgentUnderTest("node-fake", "shipped:node-fake", agent))
        return agent

    first = run()
    assert calibrated == [first] and first.warp_note == "time warp x10"
    second = run()
    assert calibrated == [first]  # not measured again
    assert second.fixed_time_scale(timing=True) == pytest.approx(0.1)
    assert "calibrated 0 s ago on this machine and kept" in second.warp_note
    third = run(recalibrate=True)
    assert calibrated == [first, third]
    # A reinstalled agent (its executable a new file) is calibrated anew.
    os.utime(script, ns=(script.stat().st_atime_ns, script.stat().st_mtime_ns + 10**9))
    fourth = run()
    assert calibrated == [first, third, fourth]
