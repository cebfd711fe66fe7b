"""Benchmark of the fake gateway (not a test): ``python bench/gateway_bench.py [--rounds N]``.

Every server runs in its own process and so does the load client (``bench/load_client.py``), as a
user would run a load tool:

- the gateway as users run it, ``python -m fakes serve`` (its default, bounded journal), one
  scenario step with a large ``times``, answering one 503-event stream per request;
- the bare baseline, an aiohttp handler writing the same SSE bytes one awaited event at a time;
- aimock (``@copilotkit/aimock``, Node) with ``--latency 0`` and 4-character chunks, when Node and
  the package are there (``npm install --prefix .cache/aimock @copilotkit/aimock``).

1. Streaming throughput (events/s) at 1 and 50 concurrent streams: each round runs every server
   once for ``--seconds``, back to back, in turn first; the figure is the median over the rounds, and the ratios are medians of
   the per-round ratios (a single run swings with scheduling, a round's neighbours less).
   Alongside: the client's reads per response, and the server's CPU time per request
   (``/proc/PID/stat``).
2. Timing fidelity: a 200 ms stall as a client sees it and as the gateway's journal stamps it
   (headers to last byte), and the gap the journal records between a 429 with
   ``Retry-After: 1`` and a retry the client sent 1 s after reading it, against the gap the
   client measured itself (and against the nominal 1 s); ``--load C`` measures it while C
   streams run against the gateway. The client times these on a raw socket (asyncio streams,
   stamps as the bytes are read and as the retry is written), not through an HTTP library, so
   that the figures are the gateway's error and not the client library's.
3. The gateway's resident memory after all of it.
Prints Markdown tables; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "bench" / "load_client.py"
AIMOCK = ROOT / ".cache" / "aimock" / "node_modules" / "@copilotkit" / "aimock"
TICK = os.sysconf("SC_CLK_TCK")

sys.path.insert(0, str(ROOT))
from bench.load_client import REPLY  # noqa: E402

SCENARIOS = {
    "bench-stream": {"times": 10**9, "reply": REPLY},
    "bench-stall": {
        "times": 10**6,
        "reply": {"text": "ab", "chunk_chars": 1},
        "fault": {"stall": {"after_events": 2, "seconds": 0.2}},
    },
    "bench-retry": {
        "times": 10**6,
        "fault": {"http_error": {"status": 429, "headers": {"Retry-After": "1"}}},
    },
}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@contextmanager
def _process(cmd: list[str], ready: str, count: int = 1) -> Iterator[tuple[int, list[str]]]:
    """Start ``cmd``; yield its pid and the first ``count`` lines of its output holding
    ``ready``; stop it afterwards."""
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while len(lines) < count:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"{cmd[:3]} exited before it was ready")
            if ready in line:
                lines.append(line.strip())
        yield proc.pid, lines
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def client(*args: str) -> dict[str, Any]:
    """Run the load client once; its last JSON line."""
    out = subprocess.run(
        [sys.executable, str(CLIENT), *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _aimock(tmp: Path, stack: ExitStack, want: str) -> tuple[int, str, str] | None:
    """(pid, base URL, version) of a running aimock, or None when it is not available."""
    if want == "off":
        return None
    cli = (Path(want) if want != "auto" else AIMOCK) / "dist" / "cli.js"
    node = shutil.which("node")
    if node is None or not cli.is_file():
        print(f"aimock: not run (node: {node}, {cli}: missing)", file=sys.stderr)
        return None
    version = json.loads((cli.parent.parent / "package.json").read_text())["version"]
    fixture = tmp / "aimock.json"
    fixture.write_text(
        json.dumps(
            {"fixtures": [{"match": {"userMessage": "bench"}, "response": {"content": "x" * 2000}}]}
        )
    )
    cmd = [node, str(cli), "-p", "0", "-f", str(fixture), "--latency", "0", "--chunk-size", "4"]
    pid, (line,) = stack.enter_context(_process(cmd, "listening on"))
    return pid, line.split("listening on ", 1)[1].strip() + "/v1", version


def _write_scenarios(tmp: Path) -> Path:
    d = tmp / "scenarios"
    d.mkdir()
    for sid, step in SCENARIOS.items():
        sc = {"id": sid, "criteria": ["STR-01"], "prompt": "p", "script": [step]}
        (d / f"{sid}.yaml").write_text(json.dumps(sc))  # JSON is YAML
    return d


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="bench/gateway_bench.py", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=2.0, help="of streaming per run")
    p.add_argument("--aimock", default="auto", help="auto, off, or the package's directory")
    p.add_argument("--stalls", type=int, default=50, help="stalled streams timed")
    p.add_argument("--pairs", type=int, default=20, help="429 and retry pairs timed")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--fidelity-only", action="store_true", help="skip the throughput runs")
    p.add_argument(
        "--load",
        type=int,
        default=0,
        help="measure the timing while this many streams run against the gateway (default 0)",
    )
    args = p.parse_args(argv)
    out: dict[str, Any] = {"throughput": {}, "fidelity": {}, "loadavg_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as t, ExitStack() as stack:
        tmp = Path(t)
        serve = [sys.executable, "-m", "fakes", "serve", str(_write_scenarios(tmp))]
        gw_pid, lines = stack.enter_context(_process(serve, "  tools: ", len(SCENARIOS)))
        urls = {ln.split(":", 1)[0]: ln.split()[1] for ln in lines}
        bare_pid, (bare,) = stack.enter_context(
            _process([sys.executable, str(CLIENT), "bare"], "url: ")
        )
        servers: dict[str, tuple[int, str, bool]] = {
            "gateway": (gw_pid, urls["bench-stream"], True),
            "bare aiohttp": (bare_pid, bare.split()[1], True),
        }
        aimock = _aimock(tmp, stack, args.aimock)
        if aimock is not None:
            servers[f"aimock {aimock[2]}"] = (aimock[0], aimock[1], False)
        for conc in () if args.fidelity_only else (1, 50):
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
            names = list(servers)
            for r in range(args.rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    pid, url, verify = servers[name]
                    cpu0 = _cpu_s(pid)
                    flags = ["--verify"] if verify else []
                    res = client(
                        "stream",
                        url,
                        "--concurrency",
                        str(conc),
                        "--seconds",
                        str(args.seconds),
                        *flags,
                    )
                    tot = res["totals"]
                    tot["cpu_ms_per_request"] = (
                        (_cpu_s(pid) - cpu0) * 1000 / (tot["requests"] + conc)
                    )
                    tot["events_per_s"] = tot["events"] / tot["seconds"]
                    runs[name].append(tot)
            out["throughput"][conc] = runs
        load = None
        if args.load:  # streams kept running against the gateway while the timing is measured
            load = subprocess.Popen(
                [sys.executable, str(CLIENT), "stream", urls["bench-stream"]]
                + ["--concurrency", str(args.load), "--seconds", "3600"],
                cwd=ROOT,
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            stack.callback(load.wait, 10)
            stack.callback(load.terminate)
        fid = client(
            "fidelity",
            urls["bench-stall"],
            urls["bench-retry"],
            "--n",
            str(args.stalls),
            "--pairs",
            str(args.pairs),
        )
        out["fidelity"] = fid
        out["fidelity_load"] = args.load
        out["gateway_rss_mb"] = rss_mb(gw_pid)
        out["loadavg_after"] = os.getloadavg()
    _print(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


def _ratio(runs: dict[str, list[dict[str, Any]]], name: str, other: str | None) -> str:
    """The median over the rounds of ``name``'s throughput over ``other``'s."""
    if other is None or other == name:
        return "-"
    rr = [
        a["events_per_s"] / b["events_per_s"] for a, b in zip(runs[name], runs[other], strict=True)
    ]
    return f"{statistics.median(rr):.2f} (min {min(rr):.2f}, max {max(rr):.2f})"


def _print(out: dict[str, Any]) -> None:
    if out["throughput"]:
        print(
            "| server | streams | events/s (median) | ratio to bare | ratio to aimock | reads per "
            "response | server CPU ms per request |"
        )
        print("|---|---|---|---|---|---|---|")
    for conc, runs in out["throughput"].items():
        aim = next((x for x in runs if x.startswith("aimock")), None)
        for name, rs in runs.items():
            eps = statistics.median(r["events_per_s"] for r in rs)
            reads = statistics.median(r["reads"] / r["requests"] for r in rs)
            cpu = statistics.median(r["cpu_ms_per_request"] for r in rs)
            print(
                f"| {name} | {conc} | {eps:,.0f} | {_ratio(runs, name, 'bare aiohttp')} | "
                f"{_ratio(runs, name, aim)} | {reads:.1f} | {cpu:.2f} |"
            )
    fid = out["fidelity"]
    print()
    if out.get("fidelity_load"):
        print(f"(timing measured while {out['fidelity_load']} streams ran against the gateway)")
    print("| timing error | p50 | p99 | range (signed) | n |")
    print("|---|---|---|---|---|")
    for key, label in (
        ("stall", "200 ms stall, client-side gap error"),
        ("stall_server", "200 ms stall, gateway-side (journal stamps) error"),
        ("retry_vs_client", "1 s Retry-After gap, journal vs the client's own"),
        ("retry_vs_nominal", "1 s Retry-After gap, journal vs nominal 1 s"),
    ):
        signed = fid[key]
        xs = [abs(x) for x in signed]
        print(
            f"| {label} | {statistics.median(xs):.2f} ms | {_pct(xs, 0.99):.2f} ms | "
            f"{min(signed):+.2f} to {max(signed):+.2f} ms | {len(xs)} |"
        )
    print()
    print(f"gateway RSS after the runs: {out['gateway_rss_mb']:.1f} MB")
    load = ", ".join(f"{x:.1f}" for x in (*out["loadavg_before"], *out["loadavg_after"]))
    print(f"machine load average (1, 5, 15 min) before and after: {load}")


if __name__ == "__main__":
    main()
