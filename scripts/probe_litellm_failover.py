"""Judge a real LiteLLM proxy's own retries and fallbacks under upstream faults, on loopback.

Theory of operation: the pinned proxy (the same virtual environment as ``probe_litellm.py``)
is started by the failover probe (``conformance probe failover --kind litellm``'s target,
``conformance.probe.failover_command.CommandTarget``) on a free 127.0.0.1 port with a random
master key, the local model cost map and no telemetry, configured per case with a model group
on the primary, router ``num_retries`` and ``fallbacks`` to the case's secondary
(``failover_config.litellm_config``); every case's two upstreams are fake gateway sessions. Two
runs (``probe_failover_common.RUNS``), each with its own config and proxy process. Written to
``--out``: ``failover.html``, ``failover-<run>.json`` (the config written is in it),
``proxy-<run>.log`` (key scrubbed) and ``summary.json``.

Usage: ``python scripts/probe_litellm_failover.py [--out DIR] [--venv DIR]``
(or ``tox -e probe-litellm-failover``). Exit status: 0 every run finished, 2 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gateway_behind import ROOT
from probe_failover_common import run_all
from probe_litellm import LITELLM, ensure_venv

from conformance.probe.failover_cases import Policy
from conformance.probe.failover_command import CommandTarget

ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "LITELLM_LOG": "ERROR",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".tox" / "probe-litellm-failover")
    ap.add_argument("--venv", type=Path, default=ROOT / ".tox" / "litellm-proxy-venv")
    args = ap.parse_args(argv)
    exe = ensure_venv(args.venv.absolute())
    out = args.out.absolute()
    os.environ.pop("DATABASE_URL", None)  # no database: the proxy keeps nothing
    command = f"{exe} --config {{config}} --host 127.0.0.1 --port {{port}} --telemetry False"

    def target(label: str, policy: Policy) -> CommandTarget:
        return CommandTarget(
            "litellm",
            command,
            policy,
            name=f"litellm {label}",
            version=LITELLM.split("==")[1],
            log=out / f"proxy-{label.replace('+', '-')}.log",
            env=ENV,
        )

    return run_all(target, out)


if __name__ == "__main__":
    sys.exit(main())
