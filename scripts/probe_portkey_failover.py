"""Judge Portkey's open-source gateway's own retries and fallbacks under upstream faults, on
loopback.

Theory of operation: the pinned gateway (installed as by ``probe_portkey.py``, bound to
127.0.0.1 by the same preloaded module) is started by the failover probe
(``conformance probe failover --kind portkey``'s target,
``conformance.probe.failover_command.CommandTarget``) once per run on a free port. Portkey takes
its routing config per request: each case's request carries ``x-portkey-config``, the JSON the
probe writes (``failover_config.portkey_config``: a ``fallback`` strategy over the case's
primary and secondary, each target with ``retry`` and ``request_timeout``), holding a random key
the gateway passes on to the upstreams. Two runs (``probe_failover_common.RUNS``). Written to
``--out``: ``failover.html``, ``failover-<run>.json`` (every case's config in it, key masked),
``gateway-<run>.log`` (key scrubbed) and ``summary.json``.

Usage: ``python scripts/probe_portkey_failover.py [--out DIR] [--prefix DIR]``
(or ``tox -e probe-portkey-failover``). Exit status: 0 every run finished, 2 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from gateway_behind import ROOT
from probe_failover_common import run_all
from probe_portkey import LOOPBACK_JS, PORTKEY, ensure_installed

from conformance.probe.failover_cases import Policy
from conformance.probe.failover_command import CommandTarget


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
    with tempfile.TemporaryDirectory(prefix="portkey-failover-") as tmp:
        preload = Path(tmp) / "loopback.cjs"
        preload.write_text(LOOPBACK_JS, encoding="utf-8")
        command = f"{node} --require {preload} {server} --port={{port}} --headless"

        def target(label: str, policy: Policy) -> CommandTarget:
            return CommandTarget(
                "portkey",
                command,
                policy,
                name=f"portkey {label}",
                version=PORTKEY[1],
                log=out / f"gateway-{label.replace('+', '-')}.log",
                env={"DO_NOT_TRACK": "1"},
            )

        return run_all(target, out)


if __name__ == "__main__":
    sys.exit(main())
