"""Command line: ``python -m fakes serve PATH`` serves scenarios until Ctrl-C;
``python -m fakes write-schema`` regenerates its generated parts (faults, dialect names)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from fakes.errors import FakesError
from fakes.gateway import Gateway
from fakes.retention import Retention
from fakes.scenario import load_scenarios
from fakes.schemas import write_schema

__all__ = ["main"]

# A gateway left serving keeps a bounded journal: flat memory under any load.
JOURNAL_ENTRIES = 1000
JOURNAL_BODY_BYTES = 64 * 1024


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fakes",
        description="Fake OpenAI-compatible gateway that replays fault scenarios. "
        "Each scenario gets its own session URL; point an OpenAI client's base_url at it "
        "(with one scenario, at the root /v1 too). GET / lists the sessions.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve a scenario file or a directory of scenarios")
    s.add_argument("path", help="scenario YAML file, or a directory searched for *.yaml")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    s.add_argument("--tls", action="store_true", help="serve HTTPS with a throwaway CA")
    s.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name or address requests may name in Host and Origin besides localhost, "
        "127.0.0.1, [::1] and the --host address (repeatable; '*': any host, which gives up "
        "the protection against DNS rebinding)",
    )
    s.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every scenario duration by this (default 1.0)",
    )
    s.add_argument(
        "--journal-entries",
        type=int,
        default=JOURNAL_ENTRIES,
        metavar="N",
        help=f"keep the last N journal entries of each session (default {JOURNAL_ENTRIES}; "
        "0: keep every entry)",
    )
    s.add_argument(
        "--journal-body-bytes",
        type=int,
        default=JOURNAL_BODY_BYTES,
        metavar="BYTES",
        help="keep a request or reply body larger than this as its SHA-256, size, head and "
        f"tail (default {JOURNAL_BODY_BYTES}; 0: keep every body whole)",
    )
    sub.add_parser(
        "write-schema",
        help="rewrite the generated parts of scenarios/schema.json (faults, dialect names)",
    )
    return p


def _retention(args: argparse.Namespace) -> Retention:
    return Retention(args.journal_entries or None, args.journal_body_bytes or None)


async def _serve(args: argparse.Namespace) -> None:
    scenarios = load_scenarios(args.path)
    keep = _retention(args)
    async with Gateway(
        args.host, args.port, tls=args.tls, retention=keep, allowed_hosts=args.allow_host
    ) as gw:
        sessions = [gw.create_session(sc, time_scale=args.time_scale) for sc in scenarios]
        index = f"{gw.base_url}/"
        # The first URL printed is one a client can use as is: with one scenario the root /v1
        # serves it (unless it refuses connections, which only its own port can do).
        if len(scenarios) == 1 and scenarios[0].refuse_connections is None:
            root = gw.serve_at_root(sessions[0].id)
            print(f"base_url: {root}  (scenario {scenarios[0].id})", flush=True)
            print(f"index: {index}", flush=True)
        else:
            print(f"index: {index}  (every session and its base_url, listed below)", flush=True)
        if gw.ca_file:
            print(f"ca_file: {gw.ca_file}", flush=True)
        for sc, s in zip(scenarios, sessions, strict=True):
            print(
                f"{sc.id}: {s.base_url}  tools: {s.tool_endpoint}  mcp: {s.mcp_endpoint}",
                flush=True,
            )
        ring = f"the last {keep.entries} entries" if keep.entries else "every entry"
        cap = (
            f"bodies over {keep.body_bytes} bytes as digests" if keep.body_bytes else "bodies whole"
        )
        print(
            f"journal: {ring} of each session, {cap} (--journal-entries, --journal-body-bytes)",
            file=sys.stderr,
            flush=True,
        )
        print(
            f"restart a scenario: POST {gw.base_url}/_control/sessions/<session>/restart "
            "(the session id follows /s/ in its URLs)",
            file=sys.stderr,
            flush=True,
        )
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    if args.command == "write-schema":
        print(f"wrote {write_schema()}", file=sys.stderr)
        return 0
    if args.time_scale <= 0:
        print("error: --time-scale must be > 0", file=sys.stderr)
        return 2
    for flag in ("journal_entries", "journal_body_bytes"):
        if getattr(args, flag) < 0:
            print(f"error: --{flag.replace('_', '-')} must be >= 0", file=sys.stderr)
            return 2
    try:
        load_scenarios(args.path)  # fail fast, before binding a port
        asyncio.run(_serve(args))
    except FakesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
