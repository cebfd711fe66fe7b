"""Checks over real gateway journals: a tiny client that behaves, and one that does not."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conformance.checks import run_check
from conformance.judging.evidence import Evidence, nominal_backoff
from fakes import Gateway, SyncGateway, load_scenario

SCALE = 0.02
RTY = Path(__file__).resolve().parents[2] / "scenarios" / "criteria" / "rty"
BODY = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "Say hello."}]}


@pytest.fixture
def gateway() -> Iterator[SyncGateway]:
    gw = SyncGateway(Gateway())
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


def _run(gw: SyncGateway, stem: str, delays: list[float]) -> Evidence:
    """POST the same body, sleeping ``delays[i]`` nominal seconds before retry i+1."""
    sc = load_scenario(RTY / f"{stem}.yaml")
    s = gw.create_session(sc, time_scale=SCALE)
    with httpx.Client(timeout=5) as c:
        for i in range(len(delays) + 1):
            r = c.post(f"{s.base_url}/chat/completions", json=BODY)
            if r.status_code == 200 or i == len(delays):
                break
            time.sleep(delays[i] * SCALE)
    return Evidence(scenario={"id": sc.id}, raw_journal=s.journal(), time_scale=SCALE)


def test_rty01_on_the_wire(gateway: SyncGateway) -> None:
    good = _run(gateway, "rty-01-retry-after-seconds", [2.05])
    assert run_check("RTY-01", good).outcome == "pass"
    assert run_check("RTY-12", good).outcome == "pass"
    bad = _run(gateway, "rty-01-retry-after-seconds", [0.5])
    assert run_check("RTY-01", bad).outcome == "fail"


def test_rty03_on_the_wire(gateway: SyncGateway) -> None:
    good = _run(gateway, "rty-03-backoff-429", [nominal_backoff(n) for n in range(1, 5)])
    f = run_check("RTY-03", good)
    assert f.outcome == "pass", f.observed
    bad = _run(gateway, "rty-03-backoff-429", [0.5] * 4)
    assert run_check("RTY-03", bad).outcome == "fail"
