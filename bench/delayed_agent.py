"""The reference agent as an outside program that spends a fixed real time before every
request, as a slow runtime would (not a test; `bench/timing_stability.py --delays` uses it).

``python bench/delayed_agent.py --delay-ms N [--off SWITCH ...]`` speaks the adapter protocol
exactly as ``python -m conformance.reference adapter`` does, with every HTTP request it makes
(model requests, hosted tools, MCP) held ``N`` real milliseconds before it is sent: a correct
agent on a heavier runtime. Its waits are as correct as the reference agent's; a verdict that
differs from the undelayed agent's is the harness judging the runtime's speed.

Run it as: ``conformance run --agent "cmd:python bench/delayed_agent.py --delay-ms 30"``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402


def _delayed(delay_s: float) -> None:
    real = aiohttp.ClientSession._request

    async def request(self: aiohttp.ClientSession, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(delay_s)  # the runtime's own time, before the request leaves
        return await real(self, *args, **kwargs)

    aiohttp.ClientSession._request = request  # type: ignore[method-assign]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--delay-ms", type=float, required=True, help="real ms before every request")
    args, rest = p.parse_known_args()
    _delayed(args.delay_ms / 1000.0)
    from conformance.reference.__main__ import main as reference_main

    return reference_main(["adapter", *rest])


if __name__ == "__main__":
    raise SystemExit(main())
