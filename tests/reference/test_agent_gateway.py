"""run_protocol against the fake gateway's fault scenarios, over HTTP and HTTPS."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
import yaml

from conformance.reference import run_protocol
from fakes import Gateway

FAULTS = Path(__file__).resolve().parents[2] / "scenarios" / "faults"
NAMES = sorted(p.stem for p in FAULTS.glob("*.yaml"))
KEY = "sk-gateway-secret"
# Stream faults of a one-step script: the non-streaming resend goes beyond the script and is
# served by the gateway's `otherwise` (the fault step again), whose fault only a stream shows.
FALLBACK = {"end-without-finish", "in-band-error", "malformed-event"}


@pytest.mark.parametrize("tls", [False, True])
@pytest.mark.parametrize("name", NAMES)
async def test_fault_scenario_recovers(name: str, tls: bool) -> None:
    scenario = yaml.safe_load((FAULTS / f"{name}.yaml").read_text())
    async with Gateway(tls=tls) as gw:
        session = gw.create_session(scenario, time_scale=0.005)
        start = {
            "type": "start",
            "protocol": 1,
            "model": "conformance-model",
            "prompt": scenario.get("prompt", "hi"),
            "tools": scenario.get("tools") or [],
            "tool_endpoint": session.tool_endpoint,
            "time_scale": 0.005,
            "config": dict(scenario.get("config") or {}),
        }
        events: list[dict] = []
        reason = await asyncio.wait_for(
            run_protocol(
                start,
                events.append,
                asyncio.Event(),
                base_url=session.base_url,
                api_key=KEY,
                ca_file=gw.ca_file,
                rng=random.Random(0),
            ),
            20,
        )
        journal = session.journal()
    types = [e["type"] for e in events]
    assert types[0] == "hello" and types.count("turn_end") == 1 and types[-1] == "turn_end"
    assert KEY not in repr(journal)
    assert reason == "completed"
    assert "error" not in types  # errors withheld when recovery succeeds
    assert len(journal["entries"]) >= 1
    if name in FALLBACK:
        assert [e["body"].get("stream") for e in journal["entries"]] == [True, False]
        assert "removed" in types  # the partial streamed message was withdrawn
