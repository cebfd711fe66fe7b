"""With -n N, a failed timing verdict is confirmed once the run's other scenarios are all done,
in the process that started the run: nothing else of the run is in flight then, and no process
waits for the others to finish their scenario (conformance.session.confirm_deferred)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conformance.cli import main

RTY = Path(__file__).resolve().parents[1] / "scenarios" / "criteria" / "rty"


def _span_ns(entry: dict) -> tuple[int, int]:
    times = [e["t_arrival_ns"] for e in entry["journal"]["entries"]]
    return min(times), max(times)


def _broken_copy_run(switch: str, scenarios: list[str], tmp_path: Path) -> tuple[int, Path]:
    """``conformance run -n 2`` of the reference agent with ``switch`` off over the RTY
    ``scenarios``; its exit status and results file."""
    agent = f"cmd:{sys.executable} -m conformance.reference adapter --off {switch}"
    results = tmp_path / "r.json"
    words = ["run", "-n", "2", "--agent", agent, "--results", str(results)]
    words += ["--report-dir", str(tmp_path / "report")]
    for name in scenarios:
        words += ["--scenario", str(RTY / f"{name}.yaml")]
    return main(words), results


def test_a_failed_wait_is_confirmed_after_every_first_run_and_stands(tmp_path: Path, capsys):
    # Retry-After ignored: RTY-01's 2 s wait comes more than a second early on every clock.
    rc, results = _broken_copy_run(
        "honour_retry_after",
        ["rty-01-retry-after-seconds", "rty-06-request-timeout", "rty-06-connection-refused"],
        tmp_path,
    )
    assert rc == 1  # RTY-01 FAIL, and no expectations allow it
    said = capsys.readouterr().err  # the progress lines
    assert "rty-01-retry-after-seconds: ran, worst FAIL (timing to confirm once" in said
    assert "[confirmed 1/1] rty-01-retry-after-seconds: ran, worst FAIL (timing confirmed" in said
    doc = json.loads(results.read_text(encoding="utf-8"))
    agent_results = doc["agents"][0]
    by_id = {s["id"]: s for s in agent_results["scenarios"]}
    assert list(by_id) == [
        "rty-01-retry-after-seconds",
        "rty-06-request-timeout",
        "rty-06-connection-refused",
    ]
    confirmed = by_id.pop("rty-01-retry-after-seconds")
    # On the slower clock (a noisy agent's first run may be a little slower than 0.02 already).
    assert confirmed["journal"]["time_scale"] > confirmed["first_run"]["journal"]["time_scale"]
    # On the gateways' clock (the system's monotonic one): the confirming run's first request
    # came after the last request of every first run.
    start, _ = _span_ns(confirmed)
    first_runs = [confirmed["first_run"], *by_id.values()]
    assert all(_span_ns(e)[1] < start for e in first_runs)
    verdict = agent_results["criteria"]["RTY-01"]["scenarios"][0]
    assert verdict["verdict"] == "FAIL" and verdict["confirmed"]["first"]["verdict"] == "FAIL"


def _late_run(tag: str, verdict: str, *, beside: bool = False) -> tuple[dict, dict]:
    """A run on a x20 fast clock whose RTY-05 wait is 50 ms real past its band (PASS: in it)."""
    wait = 1.0 + (1.0 if verdict != "PASS" else -0.2)
    entry = {
        "id": "rty-05-status-500",
        "status": "ran",
        "journal": {"entries": [], "time_scale": 0.05, "tag": tag},
        "clock": {"time_warp": 20},
        "waits": [{"rule": "RTY-05", "wait_s": wait, "band_s": [0.5, 1.0]}],
    }
    if beside:
        entry["beside"] = True
    return entry, {"RTY-05": {"id": entry["id"], "verdict": verdict, "observed": tag}}


def test_a_late_failure_is_run_again_at_once_beside_the_others_and_not_left_for_the_end(
    tmp_path: Path, monkeypatch
):
    import conformance.session as session_mod
    from conformance.judging.reaction import NO_REACTION
    from conformance.options import RunSettings
    from conformance.share import Share
    from fakes.scenario import load_scenario

    asked: list[str] = []
    runs = {"first": _late_run("first", "FAIL"), "beside": _late_run("b", "PASS", beside=True)}

    def attempts(*_args):
        def once(attempt):
            asked.append(attempt)
            return runs[attempt]

        return once

    monkeypatch.setattr(session_mod, "attempts", attempts)
    session = session_mod.RunSession(RunSettings(), command="x")
    session.open_agents()
    session.use_share(Share.create(tmp_path, processes=2))
    monkeypatch.setattr(session, "gateway", lambda: None)
    monkeypatch.setattr(session, "ready", lambda agent: NO_REACTION)
    scenario = load_scenario(RTY / "rty-05-status-500.yaml")
    run = session.run_scenario("reference", scenario, index=0)
    assert asked == ["first", "beside"]
    assert not run["deferred"]
    assert run["verdicts"]["RTY-05"]["verdict"] == "PASS"
    assert run["entry"]["beside"] and run["entry"]["fast_clock_run"]["journal"]["tag"] == "first"
    # When the run beside fails too, the failure waits for the end, that run kept.
    asked.clear()
    runs["beside"] = _late_run("b", "FAIL", beside=True)
    run = session.run_scenario("reference", scenario, index=0)
    assert asked == ["first", "beside"] and run["deferred"]
    assert run["entry"]["beside_run"]["journal"]["tag"] == "b"


def test_a_wait_late_by_less_than_load_makes_one_fails_beside_the_others_and_alone(
    tmp_path: Path, capsys
):
    # A broken copy that waits Retry-After twice over: at time scale 0.02 its wait is late by
    # tens of milliseconds real, what a loaded machine could make it. The run beside the others
    # at once fails too, and the confirmation at the end (alone, then slower) keeps the FAIL.
    rc, results = _broken_copy_run(
        "retry_after_on_time",
        ["rty-01-retry-after-seconds", "rty-06-connection-refused"],
        tmp_path,
    )
    assert rc == 1
    said = capsys.readouterr().err
    assert "[confirmed 1/1] rty-01-retry-after-seconds: ran, worst FAIL" in said
    doc = json.loads(results.read_text(encoding="utf-8"))
    by_id = {s["id"]: s for s in doc["agents"][0]["scenarios"]}
    entry = by_id["rty-01-retry-after-seconds"]
    first = entry["first_run"]
    late = [w for w in first["waits"] if w["rule"] == "RTY-01" and w["wait_s"] > w["band_s"][1]]
    assert late, first["waits"]  # late, not early: the run beside the others was made
    assert first["beside_run"]["journal"]["time_scale"] == first["journal"]["time_scale"]
    assert "beside" not in entry  # settled by the runs alone, not by the one beside
    verdict = doc["agents"][0]["criteria"]["RTY-01"]["scenarios"][0]
    assert verdict["verdict"] == "FAIL" and verdict["confirmed"]["first"]["verdict"] == "FAIL"
