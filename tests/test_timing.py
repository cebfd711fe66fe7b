"""The run's timing allowances: from the measured overshoots, with floors and caps; one
calibration per process, all of them in the results."""

from __future__ import annotations

from conformance.judging.timing import (
    EARLY_SLACK_S,
    LATE_CAP_S,
    LATE_FLOOR_S,
    NOISE_CAP_S,
    NOISE_FLOOR_S,
    measure,
    run_timing,
    timing_from,
)


def _summary(p90: float, p99: float) -> dict:
    return {"n": 100, "p50_ms": 0.1, "p90_ms": p90, "p99_ms": p99, "max_ms": p99}


def test_an_idle_machine_gets_about_the_floors():
    t = timing_from(_summary(0.2, 0.4), _summary(0.2, 0.6))
    assert t.early_slack_s == EARLY_SLACK_S
    assert LATE_FLOOR_S < t.late_slack_s < LATE_FLOOR_S + 0.003
    assert NOISE_FLOOR_S < t.noise_s < NOISE_FLOOR_S + 0.001


def test_a_busy_machine_gets_more_up_to_the_caps():
    busy = timing_from(_summary(3, 12), _summary(2, 8))
    assert busy.late_slack_s == LATE_FLOOR_S + 2 * 0.020
    assert busy.noise_s == NOISE_FLOOR_S + 2 * 0.005
    worst = timing_from(_summary(40, 300), _summary(40, 300))
    assert (worst.late_slack_s, worst.noise_s) == (LATE_CAP_S, NOISE_CAP_S)


class _Gateway:
    def overshoot(self, seconds: float) -> dict:
        assert seconds == 0.05
        return _summary(1.0, 5.0)


def test_measure_here_and_in_the_gateway_at_once():
    t = measure(_Gateway(), 0.05, process="gw1")
    assert t.process == "gw1" and t.gateway == _summary(1.0, 5.0)
    assert t.harness is not None and t.harness["n"] > 3  # sleeps of 1-5 ms for 50 ms
    assert t.late_slack_s >= LATE_FLOOR_S + 2 * 0.005


def test_the_results_hold_the_largest_allowances_and_every_calibration():
    assert run_timing([]) is None
    a = timing_from(_summary(0.2, 0.4), None).as_dict() | {"process": "gw1"}
    b = timing_from(_summary(3, 12), None).as_dict() | {"process": "gw0"}
    doc = run_timing([a, b])
    assert doc["late_slack_s"] == b["late_slack_s"] and doc["noise_s"] == b["noise_s"]
    assert [c["process"] for c in doc["calibrations"]] == ["gw0", "gw1"]


def test_a_run_measures_the_machine_and_says_so_in_its_results(tmp_path, monkeypatch):
    import json
    from pathlib import Path

    from conformance.cli import main

    monkeypatch.chdir(tmp_path)
    healthy = (
        Path(__file__).resolve().parents[1] / "scenarios/criteria/str/str-09-healthy-stream.yaml"
    )
    assert main(["run", "-q", "--scenario", str(healthy), "--results", "r.json"]) == 0
    timing = json.loads(Path("r.json").read_text(encoding="utf-8"))["run"]["timing"]
    (one,) = timing["calibrations"]  # one process ran the scenarios, with its own gateway
    # How many timer samples fit in the calibration depends on the machine's load: some did.
    # Run in this process (not a pytest-xdist worker of the run, even under xdist): "main".
    assert one["process"] == "main" and one["harness"]["n"] > 0 and one["gateway"]["n"] > 0
    assert timing["late_slack_s"] == one["late_slack_s"] >= LATE_FLOOR_S
    assert timing["noise_s"] == one["noise_s"] >= NOISE_FLOOR_S
    index = Path("conformance-report", "index.html").read_text(encoding="utf-8")
    assert "Timing measured at the start of the run (1 process(es))" in index


def test_after_a_request_the_agent_timed_out_a_wait_may_read_shorter_by_the_gateways_lag():
    from conformance.checks import run_check
    from conformance.judging.evidence import nominal_backoff
    from conformance.judging.timing import Timing
    from tests.checks.synth import Journal

    def run(end: str) -> Journal:
        j = Journal(scale=0.02)
        for n in range(1, 6):
            e = j.chat(503, wait=nominal_backoff(n - 1) if n > 1 else 0.0)
            if end == "client_gone":  # the agent gave up waiting for the headers
                e["response"].update(status=None, end="client_gone")
                e["fault"] = "delay_headers"
        # Retry 5 (band from 6 s nominal, 120 ms real) 8 ms real early: by more than the 5 ms
        # slack, by less than the slack and a 10 ms wake-up allowance.
        j.chat(200, wait=nominal_backoff(5) * 0.75 - 0.008 / 0.02)
        return j

    lagging = Timing(wakeup_s=0.01)
    gone = run("client_gone")
    assert run_check("RTY-06", gone.evidence(timing=lagging)).outcome == "pass"
    assert run_check("RTY-06", gone.evidence()).outcome == "fail"  # no lag measured
    # An end stamped when the reply's last byte went out is not late: no allowance.
    assert run_check("RTY-05", run("complete").evidence(timing=lagging)).outcome == "fail"
