"""How long each scenario took an agent in its earlier runs: the order of its next run.

A run's scenarios go longest first, dealt over its processes (``conformance.plugin.dealt``;
in one process, ``RunSession.longest_first``, once every scenario's time is known), so that the
long ones do not start last. Without an earlier run, "longest" is the deadline floor
(``conformance.judging.deadlines.floor_s``): what a correct agent may need, an upper bound that
is far off for some agents (the reference agent ends a 390 s stall at its own 60 s idle limit).
A run that ends writes the time each scenario took (its confirmations and reruns included) to a
file per agent, dialect, tool transport and time scale, in the cache folder
(``conformance.cache``); the next such run orders its scenarios by those times when it knows
every one of them.

Nothing here changes a verdict: a missing, unreadable or stale file only orders a run less
well, and a file that cannot be written is passed over. ``conformance run`` reads the file once
and hands the times to its processes (``conformance.share``), so that they all order the
scenarios alike while another run rewrites it.
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance.cache import read_entry, write_entry

__all__ = ["DurationsKey", "read_durations", "write_durations"]

DurationsKey = tuple[str, str, str, float]  # agent, dialect, tool transport, time scale
_KIND = "durations"


def read_durations(key: DurationsKey) -> dict[str, float]:
    """{scenario id: seconds} of the agent's earlier runs under ``key`` (empty: none known)."""
    found = (read_entry(_KIND, list(key)) or {}).get("seconds")
    if not isinstance(found, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in found.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    }


def write_durations(key: DurationsKey, seconds: Mapping[str, float]) -> None:
    """Add ``seconds`` ({scenario id: seconds} of this run) to the file under ``key``: the
    scenarios this run did not run keep their earlier times. Passed over when it cannot be
    written."""
    if not seconds:
        return
    known = read_durations(key)
    known.update({k: round(v, 3) for k, v in seconds.items()})
    write_entry(_KIND, list(key), {"seconds": dict(sorted(known.items()))})
