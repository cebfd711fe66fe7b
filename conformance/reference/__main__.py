"""Front end: ``python -m conformance.reference adapter`` speaks the adapter protocol on stdio.

Reads the ``start`` line from stdin, runs :func:`run_protocol` (base URL and key from
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, CA bundle from ``SSL_CERT_FILE``), writes one JSON
event per line to stdout, and treats a later ``{"type": "abort"}`` line as the user's abort.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from .agent import HELLO, run_protocol

__all__ = ["main"]


async def _adapter() -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def emit(event: dict) -> None:
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
        )
    finally:
        watcher.cancel()
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry; only the ``adapter`` command is provided."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["adapter"]:
        print("usage: python -m conformance.reference adapter", file=sys.stderr)
        return 2
    return asyncio.run(_adapter())


if __name__ == "__main__":
    sys.exit(main())
