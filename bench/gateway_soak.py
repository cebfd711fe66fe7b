"""Soak of the fake gateway (not a test): its memory while it streams for minutes.

    python bench/gateway_soak.py [--minutes 10] [--concurrency 4] [--every 30] [-- SERVE_FLAGS]

Runs ``python -m fakes serve`` as users do (its default, bounded journal; flags after ``--`` go
to it, e.g. ``-- --journal-entries 0 --journal-body-bytes 0`` to keep everything) and the load
client (``bench/load_client.py``) in a process of its own, streaming the benchmark's 503-event
reply back to back for the given time, loopback only. Samples the gateway's resident memory
(``VmRSS``) every ``--every`` seconds and prints the samples and the growth: from the first
sample (the journal's ring is full by then) to the last.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.gateway_bench import CLIENT, ROOT, _env, _process, rss_mb  # noqa: E402
from bench.load_client import REPLY  # noqa: E402


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="bench/gateway_soak.py")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--every", type=float, default=30.0)
    p.add_argument("--json", type=Path)
    p.add_argument("serve_flags", nargs="*", help="after --: flags for `fakes serve`")
    args = p.parse_args(argv)
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gateway-soak-") as t:
        sc = Path(t) / "soak.yaml"
        sc.write_text(
            json.dumps(
                {
                    "id": "soak",
                    "criteria": ["STR-01"],
                    "prompt": "p",
                    "script": [{"times": 10**9, "reply": REPLY}],
                }
            )
        )
        serve = [sys.executable, "-m", "fakes", "serve", str(sc), *args.serve_flags]
        with _process(serve, "base_url: ") as (pid, (line,)):
            url = line.split()[1]
            start = {"t": 0.0, "requests": 0, "rss_mb": rss_mb(pid)}
            samples.append(start)
            load = subprocess.Popen(
                [
                    sys.executable,
                    str(CLIENT),
                    "stream",
                    url,
                    "--concurrency",
                    str(args.concurrency),
                    "--seconds",
                    str(args.minutes * 60),
                    "--every",
                    str(args.every),
                ],
                cwd=ROOT,
                env=_env(),
                stdout=subprocess.PIPE,
                text=True,
            )
            assert load.stdout is not None
            totals: dict[str, Any] = {}
            for raw in load.stdout:
                got = json.loads(raw)
                if "totals" in got:
                    totals = got["totals"]
                    continue
                samples.append({**got, "rss_mb": rss_mb(pid)})
                s = samples[-1]
                print(
                    f"{s['t']:>7.0f} s  {s['requests']:>8} requests  {s['rss_mb']:7.1f} MB",
                    flush=True,
                )
            if load.wait() != 0:
                raise SystemExit("the load client failed")
    first, last = samples[1], samples[-1]
    out = {
        "serve_flags": args.serve_flags,
        "concurrency": args.concurrency,
        "requests": totals.get("requests"),
        "seconds": totals.get("seconds"),
        "rss_start_mb": start["rss_mb"],
        "rss_first_sample_mb": first["rss_mb"],
        "rss_last_mb": last["rss_mb"],
        "rss_max_mb": max(s["rss_mb"] for s in samples),
        "growth_mb": last["rss_mb"] - first["rss_mb"],
        "samples": samples,
    }
    print(
        f"{out['requests']} streamed requests in {out['seconds']:.0f} s "
        f"({args.concurrency} at a time, flags {args.serve_flags or 'none'}): RSS "
        f"{start['rss_mb']:.1f} MB idle, {first['rss_mb']:.1f} MB at {first['t']:.0f} s, "
        f"{last['rss_mb']:.1f} MB at the end (max {out['rss_max_mb']:.1f}); growth from the "
        f"first sample {out['growth_mb']:+.1f} MB"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
