"""The command line: ``conformance probe`` (:func:`main`) and the run it makes (:func:`execute`).

Exit status: 0 every habit the reference agent relies on is there, 1 some is missing, 2 bad
usage, the gateway unreachable or the key refused. The values of ``--header``, ``--header-env``
and ``--query`` are secrets like the key: only their names are written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import ssl
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from conformance.probe.client import Probe
from conformance.probe.document import probe_document
from conformance.probe.exchange import Exchange, ProbeError
from conformance.probe.probes import PROBES
from conformance.probe.record import recording
from conformance.probe.redact import scrub
from fakes.dialects import CHAT, NAMES

__all__ = ["Extras", "execute", "extras", "main", "parser"]

# An HTTP header name (a token, RFC 9110 5.1).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="conformance probe",
        description="Probe a live gateway: a small, bounded set of requests "
        "(short answer, long reasoning answer, tool call; streamed and not) and a report of its "
        "habits, each judged against what the reference agent relies on. Exit status: 0 every "
        "habit relied on is there, 1 some is missing, 2 bad usage or gateway unreachable.",
        epilog="`conformance probe failover --help`: judge a gateway's own retries and "
        "fallbacks under upstream faults instead.",
    )
    ap.add_argument("--base-url", required=True, help="the gateway's base URL, e.g. http://host/v1")
    ap.add_argument("--model", required=True, help="model name to ask for")
    ap.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the API key (default: OPENAI_API_KEY if set); "
        "the key is never printed or written",
    )
    ap.add_argument("--out", type=Path, default=Path("probe-report"), help="report directory")
    ap.add_argument(
        "--max-requests",
        type=int,
        default=len(PROBES),
        help=f"request budget (default {len(PROBES)}, all probes; fewer drops the last ones)",
    )
    ap.add_argument("--rate", type=float, default=1.0, help="at most this many requests per second")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    ap.add_argument("--max-tokens", type=int, default=256, help="max_tokens per request (x4 long)")
    ap.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE.yaml",
        help="also save what was seen as a scenario of replay steps (id = file stem)",
    )
    ap.add_argument("--ca-file", default=None, help="CA bundle for an HTTPS gateway")
    ap.add_argument(
        "--dialect",
        choices=NAMES,
        default=CHAT,
        help=f"wire dialect to speak (default {CHAT}); observations a dialect has no "
        "counterpart of are reported NOT_APPLICABLE",
    )
    ap.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an extra request header (repeatable); its value is never printed or written",
    )
    ap.add_argument(
        "--header-env",
        action="append",
        default=[],
        metavar="NAME=VAR",
        help="an extra request header whose value is the environment variable VAR (repeatable); "
        "never printed or written",
    )
    ap.add_argument(
        "--query",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a query parameter added to every request URL (repeatable); its value is never "
        "printed or written",
    )
    return ap


@dataclass(frozen=True)
class Extras:
    """The extra headers and query parameters, and every value that must never be written."""

    headers: dict[str, str]
    query: list[tuple[str, str]]

    @property
    def secrets(self) -> list[str]:
        return [*self.headers.values(), *(v for _, v in self.query)]


def extras(args: argparse.Namespace) -> Extras:
    """``--header``, ``--header-env`` and ``--query`` read; a bad one is a :class:`ProbeError`
    naming the option, its position and what is wrong (never the value)."""
    headers: dict[str, str] = {}

    def add(option: str, n: int, name: str, value: str) -> None:
        if not _HEADER_NAME.fullmatch(name):
            raise ProbeError(f"{option} #{n}: {name!r} is not a header name")
        if name.lower() in {k.lower() for k in headers}:
            raise ProbeError(f"{option} #{n}: header {name} is given twice")
        headers[name] = value

    for n, spec in enumerate(args.header, 1):
        name, colon, value = spec.partition(":")
        if not colon or not value.strip():
            raise ProbeError(f"--header #{n}: expected 'NAME: VALUE' with a value after ':'")
        add("--header", n, name.strip(), value.strip())
    for n, spec in enumerate(args.header_env, 1):
        name, eq, var = spec.partition("=")
        if not eq or not var:
            raise ProbeError(
                f"--header-env #{n}: expected NAME=VAR (a header name, '=', the name of an "
                "environment variable)"
            )
        value = os.environ.get(var, "")
        if not value:
            raise ProbeError(f"--header-env {spec}: environment variable {var} is not set or empty")
        add("--header-env", n, name.strip(), value)
    query = []
    for n, spec in enumerate(args.query, 1):
        key, eq, value = spec.partition("=")
        if not eq or not key:
            raise ProbeError(f"--query #{n}: expected KEY=VALUE with a key before '='")
        query.append((key, value))
    return Extras(headers, query)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["failover"]:  # its own mode and options (docs/probe.md, Failover)
        from conformance.probe.failover_cli import main as failover_main

        return failover_main(argv[1:])
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    var = args.api_key_env or "OPENAI_API_KEY"
    key = os.environ.get(var)
    if args.api_key_env and not key:
        print(f"conformance probe: environment variable {var} is not set or empty", file=sys.stderr)
        return 2
    if urllib.parse.urlsplit(args.base_url).scheme not in ("http", "https"):
        print(
            f"conformance probe: --base-url must be http(s)://..., got {args.base_url!r}",
            file=sys.stderr,
        )
        return 2
    if args.record is not None and not re.fullmatch(r"[a-z0-9-]+", args.record.stem):
        print(
            f"conformance probe: --record {args.record}: the file stem is the scenario id and "
            "must match [a-z0-9-]+",
            file=sys.stderr,
        )
        return 2
    return execute(args, key)[0]


def execute(args: argparse.Namespace, key: str | None) -> tuple[int, list[Exchange]]:
    """Probe, write the report (and the recording); return the exit status and the exchanges."""
    started = _now()
    error = None
    try:
        more = extras(args)
        secrets = [key, *more.secrets]
        prober = Probe(
            args.base_url,
            args.model,
            key,
            dialect=args.dialect,
            headers=more.headers,
            query=more.query,
            max_requests=args.max_requests,
            rate=args.rate,
            timeout=args.timeout,
            max_tokens=args.max_tokens,
            verify=ssl.create_default_context(cafile=args.ca_file) if args.ca_file else True,
        )
    except (ProbeError, OSError) as e:
        print(f"conformance probe: {e}", file=sys.stderr)
        return 2, []
    try:
        exchanges = prober.run()
    except ProbeError as e:
        error = scrub(str(e), secrets)
        exchanges = prober.exchanges
    doc = probe_document(
        exchanges,
        base_url=args.base_url,
        model=args.model,
        started=started,
        finished=_now(),
        max_requests=args.max_requests,
        rate=args.rate,
        secrets=secrets,
        error=error,
        dialect=args.dialect,
        header_names=list(more.headers),
        query_names=[k for k, _ in more.query],
    )
    from reports.probe import render_probe

    index = render_probe(doc, args.out, secrets=[s for s in secrets if s])
    if error:
        print(f"conformance probe: {error}", file=sys.stderr)
        print(f"conformance probe: report in {index}", file=sys.stderr)
        return 2, exchanges
    if args.record is not None:
        try:
            sc = recording(exchanges, args.record.stem, secrets, args.dialect)
        except ProbeError as e:
            print(f"conformance probe: {e}", file=sys.stderr)
            return 2, exchanges
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(
            yaml.safe_dump(sc, sort_keys=False, allow_unicode=True, width=100000),
            encoding="utf-8",
        )
    for o in doc["observations"]:
        print(f"{o['verdict']:<9} {o['id']:<18} {o['value']}")
    print(f"report: {index}")
    return (1 if doc["outcome"] == "missing" else 0), exchanges
