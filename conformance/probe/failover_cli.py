"""``conformance probe failover``: judge a gateway's own retries and fallbacks under faults.

The fake gateway runs in this process on 127.0.0.1 (two upstream sessions per case); the gateway
under test is started by ``--gateway-command`` with the config this writes. Exit status: 0 every
case passed, 1 some case has another verdict, 2 bad usage or the probe could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.probe.exchange import ProbeError
from conformance.probe.failover import run_failover
from conformance.probe.failover_cases import CASES, TRANSIENT, Policy
from conformance.probe.failover_command import KINDS, CommandTarget

__all__ = ["main", "parser"]


def _statuses(text: str) -> tuple[int, ...]:
    try:
        codes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected HTTP statuses separated by commas, got {text!r}"
        ) from None
    if any(not 100 <= c <= 599 for c in codes):
        raise argparse.ArgumentTypeError(f"not an HTTP status in {text!r}")
    return codes


def parser() -> argparse.ArgumentParser:
    default = ",".join(map(str, TRANSIENT))
    ap = argparse.ArgumentParser(
        prog="conformance probe failover",
        description="Judge a gateway's own retries and fallbacks: per case the primary upstream "
        "throws a fault, the secondary is healthy, the gateway is configured from the policy "
        "below (docs/probe.md, Failover). Exit status: 0 every case PASS, 1 some other verdict, "
        "2 bad usage or could not run.",
    )
    ap.add_argument("--kind", required=True, choices=KINDS, help="which config to write")
    ap.add_argument(
        "--gateway-command",
        required=True,
        metavar="CMD",
        help="starts the gateway; {config} is replaced by the config file's path, {port} by "
        "the 127.0.0.1 port it must listen on",
    )
    ap.add_argument("--name", default=None, help="the gateway's name in the report")
    ap.add_argument("--gateway-version", default="", help="its version, for the report")
    ap.add_argument("--out", type=Path, default=Path("failover-report"), help="report directory")
    ap.add_argument("--retries", type=int, default=1, help="retries on the same upstream")
    ap.add_argument("--no-fallback", action="store_true", help="configure no secondary")
    ap.add_argument("--retry-on", type=_statuses, default=TRANSIENT, metavar=default)
    ap.add_argument("--fallback-on", type=_statuses, default=TRANSIENT, metavar=default)
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds per attempt (default 3)")
    ap.add_argument(
        "--ignore-retry-after",
        action="store_true",
        help="do not ask the gateway to honour Retry-After (where it has such a switch)",
    )
    ap.add_argument(
        "--cases",
        default=None,
        metavar="ID,ID",
        help="only these cases (default all: " + ", ".join(c.id for c in CASES) + ")",
    )
    ap.add_argument(
        "--client-timeout", type=float, default=25.0, help="seconds the client waits per case"
    )
    ap.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="scale of the upstreams' clock (stalls, and the Retry-After a retry is judged by); "
        "for a gateway that scales its own time alike, as test doubles do",
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    by_id = {c.id: c for c in CASES}
    wanted = [w.strip() for w in args.cases.split(",")] if args.cases else list(by_id)
    unknown = [w for w in wanted if w not in by_id]
    if unknown or args.retries < 0 or not args.timeout > 0 or not args.time_scale > 0:
        why = f"unknown case(s) {', '.join(unknown)}" if unknown else "retries >= 0, timeouts > 0"
        print(f"conformance probe failover: {why}", file=sys.stderr)
        return 2
    policy = Policy(
        retries=args.retries,
        fallback=not args.no_fallback,
        retry_on=args.retry_on,
        fallback_on=args.fallback_on,
        timeout_s=args.timeout,
        honour_retry_after=not args.ignore_retry_after,
    )
    from fakes import Gateway
    from reports.probe_failover import render_failover

    try:
        target = CommandTarget(
            args.kind,
            args.gateway_command,
            policy,
            name=args.name,
            version=args.gateway_version,
            log=args.out / "gateway.log",
        )
    except ProbeError as e:
        print(f"conformance probe failover: {e}", file=sys.stderr)
        return 2
    with Gateway.running() as gw:
        doc = run_failover(
            gw,
            target,
            policy,
            cases=[by_id[w] for w in wanted],
            time_scale=args.time_scale,
            client_timeout=args.client_timeout,
        )
    page = render_failover([doc], args.out, secrets=[target.key or ""])
    for c in doc["cases"]:
        print(f"{c['verdict']:<15} {c['id']:<28} {c['value']}")
    print(f"report: {page}")
    if doc["error"]:
        print(f"conformance probe failover: {doc['error']}", file=sys.stderr)
        return 2
    return 0 if doc["outcome"] == "pass" else 1
