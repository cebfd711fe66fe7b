"""The failover probe: judge a gateway's own retries and fallbacks under upstream faults.

Theory of operation: for every case (``failover_cases.CASES``) the fake gateway serves two
sessions, the primary with the case's fault and a healthy secondary (for a non-retryable case,
one that refuses alike). The gateway under test (a :class:`Target`) is configured once, from the
:class:`Policy`, with every case's two upstreams (``failover_config``), then the cases run one
after the other: one streamed chat request through the gateway per case, its reply kept as an
:class:`Exchange`. The verdict (``failover_judge``) is read from the two sessions' journals
(every attempt: arrival, headers, end, status, the fault served, in ms from the client's send)
and the client's bytes, never from what the gateway reports about itself.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance import __version__
from conformance.probe.client import Probe
from conformance.probe.exchange import Exchange
from conformance.probe.failover_cases import (
    CASES,
    Case,
    Policy,
    primary_scenario,
    secondary_scenario,
)
from conformance.probe.failover_config import Route
from conformance.probe.failover_judge import FAILOVER_VERDICTS, attempts, client_facts, judge
from conformance.probe.probes import ProbeRequest
from conformance.probe.redact import scrub

__all__ = ["GatewayRequest", "Target", "failover_document", "run_case", "run_failover"]

# Body kept per client reply in the report.
_BODY_CHARS = 4000


@dataclass(frozen=True)
class GatewayRequest:
    """Where and how the client sends a case's request through the gateway under test."""

    base_url: str
    model: str
    headers: dict[str, str] = field(default_factory=dict)


class Target(Protocol):
    """A gateway under test: configured for all cases at once, then asked per case."""

    name: str
    version: str
    key: str | None  # the key the client sends the gateway
    secrets: list[str]  # everything to mask in what is written

    def start(self, routes: dict[str, Route]) -> str:
        """Write its configuration for ``routes`` and start (or reconfigure) the gateway;
        return the configuration as written."""
        ...

    def request(self, case_id: str) -> GatewayRequest: ...

    def stop(self) -> None: ...


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _settle(sessions: Sequence[Any], deadline_s: float) -> list[dict[str, Any]]:
    """The journals once every attempt has ended (or at the deadline: an attempt still open,
    e.g. a stall the gateway walked away from, is reported with no end)."""
    end = time.monotonic() + deadline_s
    while True:
        js = [s.journal() for s in sessions]
        open_ = [
            e
            for j in js
            for e in j["entries"]
            if e.get("kind") == "chat" and (e.get("response") or {}).get("t_end_ns") is None
        ]
        if not open_ or time.monotonic() >= end:
            return js
        time.sleep(0.01)  # the other side is a process of its own: polling is all there is


def _body(ex: Exchange) -> str:
    text = ex.body.decode("utf-8", "replace")
    return text if len(text) <= _BODY_CHARS else text[:_BODY_CHARS] + "\n[... cut]"


def run_case(
    target: Target,
    case: Case,
    policy: Policy,
    sessions: tuple[Any, Any],
    *,
    time_scale: float,
    client_timeout: float,
    settle_s: float,
) -> dict[str, Any]:
    """Send the case's request through the gateway; its verdict and evidence."""
    req = target.request(case.id)
    probe = Probe(
        req.base_url,
        req.model,
        target.key,
        headers=req.headers,
        rate=1000.0,
        timeout=client_timeout,
        max_tokens=64,
    )
    pr = ProbeRequest(case.id, f"failover:{case.id}", True, "Reply with one sentence.")
    t0 = time.monotonic_ns()
    try:
        ex = probe.send(pr)
    finally:
        probe.client.close()
    js = _settle(sessions, settle_s)
    prim = attempts("primary", js[0], t0)
    sec = attempts("secondary", js[1], t0)
    facts = client_facts(ex)
    verdict, why = judge(case, policy, facts, prim, sec, time_scale=time_scale)
    return {
        "id": case.id,
        "title": case.title,
        "kind": case.kind,
        "expect": case.expect,
        "verdict": verdict,
        "value": why,
        "client": {**facts, "headers": ex.headers, "body": _body(ex)},
        "attempts": prim + sec,
    }


def failover_document(
    target: Target,
    policy: Policy,
    cases: list[dict[str, Any]],
    *,
    config: str,
    started: str,
    finished: str,
    time_scale: float,
    error: str | None = None,
) -> dict[str, Any]:
    """The JSON failover report (schema ``reports/schemas/probe-failover.schema.json``), the
    target's secrets scrubbed."""
    totals = {v: sum(c["verdict"] == v for c in cases) for v in FAILOVER_VERDICTS}
    bad = [c["id"] for c in cases if c["verdict"] != "PASS"]
    doc: dict[str, Any] = {
        "format": "gateway-failover-probe",
        "version": 1,
        "probe": {
            "gateway": target.name,
            "gateway_version": target.version,
            "policy": policy.as_dict(),
            "config": config,
            "started": started,
            "finished": finished,
            "time_scale": time_scale,
            "harness_version": __version__,
        },
        "outcome": "error" if error else ("findings" if bad else "pass"),
        "error": error,
        "totals": totals,
        "cases": cases,
    }
    clean: dict[str, Any] = scrub(doc, [target.key, *target.secrets])  # same shape as doc
    # The probe's own words (verdicts, ids) are never a secret's echo: keep them as written.
    for c, o in zip(clean["cases"], cases, strict=True):
        c.update({k: o[k] for k in ("id", "verdict", "kind")})
    clean["totals"] = totals
    return clean


def run_failover(
    gw: Any,
    target: Target,
    policy: Policy | None = None,
    *,
    cases: Sequence[Case] = CASES,
    time_scale: float = 1.0,
    client_timeout: float = 25.0,
    settle_s: float = 2.0,
) -> dict[str, Any]:
    """Run ``cases`` against ``target`` with upstreams on the fake gateway ``gw`` (a
    :class:`fakes.SyncGateway`); the scrubbed document (``failover_document``)."""
    policy = policy or Policy()
    started = _now()
    made: dict[str, tuple[Any, Any]] = {}
    results: list[dict[str, Any]] = []
    config, error = "", None
    try:
        for c in cases:
            made[c.id] = (
                gw.create_session(primary_scenario(c), time_scale=time_scale),
                gw.create_session(secondary_scenario(c), time_scale=time_scale),
            )
        routes = {k: Route(p.base_url, s.base_url) for k, (p, s) in made.items()}
        try:
            config = target.start(routes)
            for c in cases:
                print(f"== failover case {c.id}", flush=True)
                r = run_case(
                    target,
                    c,
                    policy,
                    made[c.id],
                    time_scale=time_scale,
                    client_timeout=client_timeout,
                    settle_s=settle_s,
                )
                print(f"   {r['verdict']}: {r['value']}", flush=True)
                results.append(r)
        finally:
            target.stop()
    except Exception as e:  # noqa: BLE001 - reported in the document, never lost
        error = f"{type(e).__name__}: {e}"
    finally:
        for p, s in made.values():
            gw.drop_session(p.id)
            gw.drop_session(s.id)
    return failover_document(
        target,
        policy,
        results,
        config=config,
        started=started,
        finished=_now(),
        time_scale=time_scale,
        error=error,
    )
