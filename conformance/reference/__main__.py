"""Front ends of the reference agent.

``python -m conformance.reference run "TASK"`` runs one task against a real endpoint and prints
the conversation (see :mod:`conformance.reference.console`).

``python -m conformance.reference adapter`` speaks the adapter protocol on stdio: reads the
``start`` line from stdin, runs :func:`run_protocol` (base URL and key from ``OPENAI_BASE_URL`` /
``OPENAI_API_KEY``, CA bundle from ``SSL_CERT_FILE``), writes one JSON event per line to stdout,
and treats a later ``{"type": "abort"}`` line as the user's abort. ``--off SWITCH`` (repeatable)
turns one :class:`~conformance.reference.core.Behaviours` switch off, for a broken copy run as a
command.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

from .agent import HELLO, Behaviours, run_protocol

__all__ = ["UNSUPPORTED_EXIT", "main"]

UNSUPPORTED_EXIT = 89  # the adapter protocol's "this scenario is not supported"


async def _adapter(behaviours: Behaviours) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    # hello first, before the start line: a harness may probe capabilities without a turn.
    emit(dict(HELLO))
    line = await reader.readline()
    if not line:
        return 0  # stdin closed after the probe: nothing to run
    try:
        start = json.loads(line)
    except json.JSONDecodeError as exc:
        print(f"adapter: the first stdin line is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(start, dict) or start.get("type") != "start":
        print("adapter: the first stdin line must be a start message", file=sys.stderr)
        return 2
    base_url = os.environ.get("OPENAI_BASE_URL", "")
    if not base_url:
        print("adapter: OPENAI_BASE_URL is not set", file=sys.stderr)
        return 2
    abort = asyncio.Event()

    async def watch() -> None:
        while raw := await reader.readline():
            try:
                msg = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(msg, dict) and msg.get("type") == "abort":
                abort.set()

    watcher = asyncio.ensure_future(watch())
    try:
        await run_protocol(
            start,
            lambda event: None if event.get("type") == "hello" else emit(event),
            abort,
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY", ""),
            ca_file=os.environ.get("SSL_CERT_FILE") or None,
            behaviours=behaviours,
        )
    finally:
        watcher.cancel()
    if not behaviours.honest_exit:
        # Broken copy: claims "unsupported" although the turn ran and turn_end is written.
        return UNSUPPORTED_EXIT
    return 0


def _adapter_options(args: list[str]) -> Behaviours:
    p = argparse.ArgumentParser(prog="python -m conformance.reference adapter")
    p.add_argument(
        "--off",
        action="append",
        default=[],
        metavar="SWITCH",
        choices=[f.name for f in dataclasses.fields(Behaviours)],
        help="turn this behaviour off (a deliberately broken copy); repeatable",
    )
    return Behaviours(**{name: False for name in p.parse_args(args).off})


USAGE = """\
usage: python -m conformance.reference run TASK [--model M] [--workdir DIR] [options]
       python -m conformance.reference adapter [--off SWITCH ...]

  run      run TASK against OPENAI_BASE_URL (key from OPENAI_API_KEY) with local tools
           confined to --workdir, printing the conversation as its user sees it;
           'run --help' lists the options
  adapter  speak the adapter protocol on stdin/stdout (the conformance harness's side);
           --off SWITCH builds a broken copy with that behaviour off
"""


def main(argv: list[str] | None = None) -> int:
    """CLI entry: ``run`` (interactive console) or ``adapter`` (protocol on stdio)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["adapter"]:
        try:
            behaviours = _adapter_options(args[1:])
        except SystemExit as exc:  # argparse: --help is 0, bad usage 2
            return int(exc.code or 0)
        return asyncio.run(_adapter(behaviours))
    if args[:1] == ["run"]:
        from .console import main as console_main

        return console_main(args)
    if args[:1] in (["-h"], ["--help"], ["help"]):
        print(USAGE, end="")
        return 0
    print(USAGE, end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
