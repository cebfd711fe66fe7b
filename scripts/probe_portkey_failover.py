"""Judge Portkey's open-source gateway's own retries and fallbacks under upstream faults, on
loopback.

Theory of operation: the pinned gateway (installed as by ``probe_portkey.py``, bound to
127.0.0.1 by the same preloaded module) is started once per run on a free port. Portkey takes
its routing config per request: each case's request carries ``x-portkey-config``, the JSON the
failover probe writes (``conformance.probe.failover_config.portkey_config``: a ``fallback``
strategy over the case's primary and secondary, each target with ``retry`` and
``request_timeout``), holding a random key the gateway passes on to the upstreams. Two runs
(``probe_failover_common.RUNS``). Written to ``--out``: ``failover.html``,
``failover-<run>.json``, ``portkey-<run>.json`` (every case's config, key masked),
``gateway-<run>.log`` (key and upstream URLs scrubbed) and ``summary.json``.

Usage: ``python scripts/probe_portkey_failover.py [--out DIR] [--prefix DIR]``
(or ``tox -e probe-portkey-failover``). Exit status: 0 every run finished, 2 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from gateway_behind import MASK, ROOT, free_port, scrub_file, stop, wait_ready
from probe_failover_common import run_all
from probe_portkey import LOOPBACK_JS, PORTKEY, ensure_installed

from conformance.probe.failover import GatewayRequest
from conformance.probe.failover_cases import Policy
from conformance.probe.failover_config import Route, portkey_config


class Portkey:
    """The gateway as a failover probe target, one process per run."""

    version = PORTKEY[1]

    def __init__(self, node: str, server: Path, out: Path, label: str, policy: Policy) -> None:
        self.node, self.server, self.out, self.policy = node, server, out, policy
        self.name = f"portkey {label}"
        self.label = label.replace("+", "-")
        self.key: str | None = "sk-" + secrets.token_hex(16)
        self.secrets: list[str] = []
        self.configs: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[str] | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="portkey-failover-")
        self.port = 0
        self.hosts: list[str] = []

    def start(self, routes: dict[str, Route]) -> str:
        self.configs = {
            c: portkey_config(self.policy, r, self.key or "") for c, r in routes.items()
        }
        self.hosts = [u for r in routes.values() for u in (r.primary, r.secondary)]
        text = json.dumps({c: json.loads(v) for c, v in self.configs.items()}, indent=2)
        (self.out / f"portkey-{self.label}.json").write_text(
            text.replace(self.key or "", MASK) + "\n", "utf-8"
        )
        preload = Path(self.tmp.name) / "loopback.cjs"
        preload.write_text(LOOPBACK_JS, encoding="utf-8")
        self.port = free_port()
        self.log = (self.out / f"gateway-{self.label}.log").open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [self.node, "--require", str(preload), str(self.server)]
            + [f"--port={self.port}", "--headless"],
            env={**os.environ, "DO_NOT_TRACK": "1", "NO_PROXY": "127.0.0.1,localhost"},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=self.tmp.name,
        )
        wait_ready(f"http://127.0.0.1:{self.port}/", self.proc, self.name)
        return text

    def request(self, case_id: str) -> GatewayRequest:
        return GatewayRequest(
            f"http://127.0.0.1:{self.port}/v1",
            "fake-model",
            {"x-portkey-config": self.configs[case_id]},
        )

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None
            scrub_file(self.out / f"gateway-{self.label}.log", [self.key or "", *self.hosts])
        self.tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".tox" / "probe-portkey-failover")
    ap.add_argument("--prefix", type=Path, default=ROOT / ".cache" / f"portkey-{PORTKEY[1]}")
    args = ap.parse_args(argv)
    node = shutil.which("node")
    if node is None:
        raise SystemExit("probe_portkey_failover: node is not on PATH (Node 20 or later)")
    server = ensure_installed(args.prefix.absolute())
    out = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    return run_all(lambda label, policy: Portkey(node, server, out, label, policy), out)


if __name__ == "__main__":
    sys.exit(main())
