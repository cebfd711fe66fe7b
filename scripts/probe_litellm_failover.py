"""Judge a real LiteLLM proxy's own retries and fallbacks under upstream faults, on loopback.

Theory of operation: the pinned proxy (the same virtual environment as ``probe_litellm.py``)
is started on a free 127.0.0.1 port with a random master key, the local model cost map and no
telemetry, configured by the failover probe (``conformance.probe.failover_config.litellm_config``:
per case a model group on the primary, router ``num_retries`` and ``fallbacks`` to the case's
secondary); every case's two upstreams are fake gateway sessions. Two runs
(``probe_failover_common.RUNS``), each with its own config and proxy process. Written to
``--out``: ``failover.html``, ``failover-<run>.json``, ``litellm-<run>.yaml`` (the config),
``proxy-<run>.log`` (key scrubbed) and ``summary.json``.

Usage: ``python scripts/probe_litellm_failover.py [--out DIR] [--venv DIR]``
(or ``tox -e probe-litellm-failover``). Exit status: 0 every run finished, 2 otherwise.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from gateway_behind import ROOT, free_port, scrub_file, stop, wait_ready
from probe_failover_common import run_all
from probe_litellm import LITELLM, ensure_venv

from conformance.probe.failover import GatewayRequest
from conformance.probe.failover_cases import Policy
from conformance.probe.failover_config import Route, litellm_config

KEY_ENV = "LITELLM_MASTER_KEY"


class LiteLLM:
    """The proxy as a failover probe target, one process per run."""

    version = LITELLM.split("==")[1]

    def __init__(self, exe: Path, out: Path, label: str, policy: Policy) -> None:
        self.exe, self.out, self.policy = exe, out, policy
        self.name = f"litellm {label}"
        self.label = label.replace("+", "-")
        self.key: str | None = "sk-" + secrets.token_hex(16)
        self.secrets: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[str] | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="litellm-failover-")
        self.port = 0

    def start(self, routes: dict[str, Route]) -> str:
        text = litellm_config(self.policy, routes, KEY_ENV)
        cfg = Path(self.tmp.name) / "config.yaml"
        cfg.write_text(text, encoding="utf-8")
        (self.out / f"litellm-{self.label}.yaml").write_text(text, encoding="utf-8")
        self.port = free_port()
        env = {
            **os.environ,
            KEY_ENV: self.key or "",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        env.pop("DATABASE_URL", None)
        self.log = (self.out / f"proxy-{self.label}.log").open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [str(self.exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(self.port)]
            + ["--telemetry", "False"],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=self.tmp.name,
        )
        wait_ready(f"http://127.0.0.1:{self.port}/health/liveliness", self.proc, self.name)
        return text

    def request(self, case_id: str) -> GatewayRequest:
        return GatewayRequest(f"http://127.0.0.1:{self.port}/v1", case_id)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None
            scrub_file(self.out / f"proxy-{self.label}.log", [self.key or ""])
        self.tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".tox" / "probe-litellm-failover")
    ap.add_argument("--venv", type=Path, default=ROOT / ".tox" / "litellm-proxy-venv")
    args = ap.parse_args(argv)
    exe = ensure_venv(args.venv.absolute())
    out = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    return run_all(lambda label, policy: LiteLLM(exe, out, label, policy), out)


if __name__ == "__main__":
    sys.exit(main())
