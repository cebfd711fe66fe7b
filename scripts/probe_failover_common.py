"""What the real-gateway failover probes (``probe_litellm_failover.py``,
``probe_portkey_failover.py``) share: the runs (a policy and the cases it is judged on), running
them on one fake gateway, and writing the report and the summary.

Two runs per gateway: ``retry+fallback`` (the default policy, every case) and ``retries-only``
(no secondary, the two 429 cases), because a gateway with a fallback may go to it at once on a
429, and then whether its retries honour ``Retry-After`` is never seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway_behind import ROOT  # noqa: F401 - puts the project on sys.path

from conformance.probe.failover import Target, run_failover
from conformance.probe.failover_cases import CASES, Case, Policy
from fakes import Gateway
from reports.probe_failover import render_failover

BY_ID = {c.id: c for c in CASES}

RUNS: tuple[tuple[str, Policy, tuple[Case, ...]], ...] = (
    ("retry+fallback", Policy(), CASES),
    (
        "retries-only",
        Policy(fallback=False),
        (BY_ID["429-retry-after"], BY_ID["429-no-retry-after"]),
    ),
)


def run_all(make_target: Callable[[str, Policy], Target], out: Path) -> int:
    """Each run against a target made for it; the page, the documents and ``summary.json`` in
    ``out``. Exit status 0 when every run finished (its verdicts are findings), 2 otherwise."""
    out.mkdir(parents=True, exist_ok=True)
    docs: list[dict[str, Any]] = []
    secrets: list[str] = []
    with Gateway.running() as gw:
        for label, policy, cases in RUNS:
            print(f"=== run {label}", flush=True)
            target = make_target(label, policy)
            secrets += [s for s in (target.key, *target.secrets) if s]
            docs.append(run_failover(gw, target, policy, cases=cases))
    page = render_failover(docs, out, secrets=secrets)
    summary = {
        d["probe"]["gateway"]: {
            "version": d["probe"]["gateway_version"],
            "error": d["error"],
            "verdicts": {c["id"]: c["verdict"] for c in d["cases"]},
            "evidence": {c["id"]: c["value"] for c in d["cases"]},
        }
        for d in docs
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    print(json.dumps({k: v["verdicts"] for k, v in summary.items()}, indent=2))
    print(f"report: {page}")
    return 2 if any(d["error"] for d in docs) else 0
