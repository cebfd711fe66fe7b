"""Probe Portkey's open-source gateway in front of the fake gateway, all on loopback.

Theory of operation: the gateway (``@portkey-ai/gateway``, pinned) is installed from npm into a
folder of its own (first run only), with ``@hono/node-server`` held at the version of the
gateway's own lockfile: a plain install resolves a newer one with which every streamed reply
becomes a 500 (Portkey-AI/gateway issue 1389). It is started with ``node`` on a free port
(``--port=N``, ``--headless``), bound to 127.0.0.1 by a preloaded module, since the gateway
itself always listens on every interface. It routes by request headers only:
``x-portkey-provider: openai`` and ``x-portkey-custom-host: <fake gateway session URL>``, which
``conformance probe`` sends with ``--header`` and ``--header-env`` (their values, like the key,
are never written). Each upstream personality of the fake gateway is probed through it in chat
completions, and some again in Anthropic Messages (provider ``anthropic``) and OpenAI Responses
(provider ``openai``); the report, the recording (replayed on the fake gateway and compared byte for byte), the
upstream's journal (what it really sent) and the gateway's log are written to ``--out``.

Usage: ``python scripts/probe_portkey.py [--out DIR] [--prefix DIR]`` (or ``tox -e probe-portkey``).
Exit status: 0 every probe ran (the habits found are findings), 2 otherwise.
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

from gateway_behind import (
    ROOT,
    UPSTREAMS,
    free_port,
    probe_one,
    scrub_file,
    stop,
    upstream,
    wait_ready,
)

from fakes import Gateway

PORTKEY = ("@portkey-ai/gateway", "1.15.2")
NODE_SERVER = ("@hono/node-server", "1.13.5")  # the gateway's own lockfile's version
HOST_VAR = "PORTKEY_PROBE_CUSTOM_HOST"

# The other dialects: (dialect, Portkey provider that speaks it to the upstream, upstreams).
DIALECT_RUNS = (
    ("anthropic_messages", "anthropic", ("well-behaved", "dies-close", "dies-in-band")),
    ("openai_responses", "openai", ("well-behaved", "dies-close", "dies-in-band")),
)

# Preloaded into the gateway: a server told to listen on a port only listens on 127.0.0.1.
LOOPBACK_JS = """\
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && typeof args[1] !== "string") {
    if (args.length > 1 && args[1] === undefined) args.splice(1, 1);
    args.splice(1, 0, "127.0.0.1");
  } else if (typeof args[0] === "object" && args[0] !== null && !args[0].host) {
    args[0] = { ...args[0], host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
"""


def installed(prefix: Path, package: str) -> str | None:
    meta = prefix / "node_modules" / package / "package.json"
    try:
        return json.loads(meta.read_text("utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_installed(prefix: Path) -> Path:
    """The gateway's ``build/start-server.js``, installing the pinned versions first if needed."""
    want = {PORTKEY[0]: PORTKEY[1], NODE_SERVER[0]: NODE_SERVER[1]}
    if any(installed(prefix, p) != v for p, v in want.items()):
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("probe_portkey: npm is not on PATH (Node 20 or later is needed)")
        prefix.mkdir(parents=True, exist_ok=True)
        manifest = {
            "private": True,
            "dependencies": {PORTKEY[0]: PORTKEY[1]},
            "overrides": {NODE_SERVER[0]: NODE_SERVER[1]},
        }
        (prefix / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
        cmd = [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"]
        print("+", " ".join(cmd), f"(in {prefix})", flush=True)
        subprocess.run(cmd, cwd=prefix, check=True, env={**os.environ, "DO_NOT_TRACK": "1"})
    got = {p: installed(prefix, p) for p in want}
    if got != want:
        raise SystemExit(f"probe_portkey: wanted {want} in {prefix}, found {got}")
    return prefix / "node_modules" / PORTKEY[0] / "build" / "start-server.js"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".tox" / "probe-portkey")
    ap.add_argument("--prefix", type=Path, default=ROOT / ".cache" / f"portkey-{PORTKEY[1]}")
    args = ap.parse_args(argv)
    node = shutil.which("node")
    if node is None:
        raise SystemExit("probe_portkey: node is not on PATH (Node 20 or later is needed)")
    server = ensure_installed(args.prefix.absolute())
    out = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    key = "sk-" + secrets.token_hex(16)  # passed through to the upstream as its key
    results: dict[str, dict] = {}
    hosts: list[str] = []
    with Gateway.running() as gw, tempfile.TemporaryDirectory(prefix="portkey-probe-") as tmp:
        preload = Path(tmp) / "loopback.cjs"
        preload.write_text(LOOPBACK_JS, encoding="utf-8")
        port = free_port()
        log = (out / "gateway.log").open("w", encoding="utf-8")
        proc = subprocess.Popen(
            [node, "--require", str(preload), str(server), f"--port={port}", "--headless"],
            env={**os.environ, "DO_NOT_TRACK": "1", "NO_PROXY": "127.0.0.1,localhost"},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        try:
            wait_ready(f"http://127.0.0.1:{port}/", proc, "probe_portkey")
            runs = [("openai_chat", "openai", name) for name in UPSTREAMS]
            runs += [(d, prov, name) for d, prov, names in DIALECT_RUNS for name in names]
            for dialect, provider, name in runs:
                run = name if dialect == "openai_chat" else f"{dialect.replace('_', '-')}-{name}"
                print(f"== {run} (upstream {name}, {dialect}, provider {provider})", flush=True)
                session = gw.create_session(upstream(*UPSTREAMS[name]))
                hosts.append(session.base_url)
                os.environ[HOST_VAR] = session.base_url
                results[run] = probe_one(
                    gw,
                    session,
                    ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", "fake-model"]
                    + ["--dialect", dialect, "--header", f"x-portkey-provider: {provider}"]
                    + ["--header-env", f"x-portkey-custom-host={HOST_VAR}"],
                    key,
                    out / run,
                    out / run / f"portkey-{run}.yaml",
                )
        finally:
            stop(proc)
            log.close()
            os.environ.pop(HOST_VAR, None)
    scrub_file(out / "gateway.log", [key, "openai", "anthropic", *hosts])
    summary = {
        "portkey": PORTKEY[1],
        "hono_node_server": NODE_SERVER[1],
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip(),
        "upstreams": results,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    print(json.dumps(summary, indent=2))
    return 2 if any(r["exit"] == 2 for r in results.values()) or not results else 0


if __name__ == "__main__":
    sys.exit(main())
