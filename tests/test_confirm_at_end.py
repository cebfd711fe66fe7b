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


def test_a_failed_wait_is_confirmed_after_every_first_run_and_stands(tmp_path: Path, capsys):
    # Retry-After ignored: RTY-01's 2 s wait comes more than a second early on every clock.
    agent = f"cmd:{sys.executable} -m conformance.reference adapter --off honour_retry_after"
    results = tmp_path / "r.json"
    rc = main(
        [
            "run",
            "-n",
            "2",
            "--agent",
            agent,
            "--scenario",
            str(RTY / "rty-01-retry-after-seconds.yaml"),
            "--scenario",
            str(RTY / "rty-06-request-timeout.yaml"),
            "--scenario",
            str(RTY / "rty-06-connection-refused.yaml"),
            "--results",
            str(results),
            "--report-dir",
            str(tmp_path / "report"),
        ]
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
