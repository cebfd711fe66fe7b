"""A scenario run's results entry: what the drive recorded, redacted, with the inputs the judge
used, so that the verdicts can be derived again from the entry alone (``conformance rejudge``).

The entry keeps the scenario as loaded (``scenario``), the journal, the agent's events, log and
debug files with the run's API key replaced by ``[REDACTED]`` everywhere, how the turn ended,
and ``judged_with``: the timing allowances and the agent's own time per wait that the timing
checks judged with, and when the agent stopped. ``evidence_sha256`` is the digest of all of that
(:func:`evidence_digest`): a saved entry whose evidence was changed afterwards no longer matches
it. :func:`drive_of` turns an entry back into the :class:`~conformance.run.drive.Drive` and
:class:`~conformance.run.judge.Allowances` the judge takes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, cast

from conformance.adapters.interface import REDACTED, Status, key_marker, redact, redact_obj
from conformance.judging.timing import DEFAULT_TIMING, Timing
from conformance.run.drive import Drive
from conformance.run.judge import Allowances
from fakes.journal import Journal

__all__ = ["EVIDENCE_FIELDS", "drive_of", "evidence_digest", "judged_with", "recorded"]

# The entry's fields the digest covers: everything the judge reads.
EVIDENCE_FIELDS = (
    "scenario",
    "status",
    "error",
    "crashed",
    "journal",
    "events",
    "agent_log",
    "debug_files",
    "judged_with",
)


def judged_with(drive: Drive, allowances: Allowances) -> dict[str, Any]:
    timing = allowances.timing
    return {
        "timing": {
            "early_slack_s": timing.early_slack_s,
            "late_slack_s": timing.late_slack_s,
            "noise_s": timing.noise_s,
            "wakeup_s": timing.wakeup_s,
        },
        "overhead_s": allowances.overhead_s,
        "overhead_spread_s": allowances.overhead_spread_s,
        "stopped_ns": drive.stopped_ns,
        "time_scale": drive.time_scale,
    }


def recorded(raw_scenario: dict[str, Any], drive: Drive, allowances: Allowances) -> dict[str, Any]:
    """The evidence fields of a results entry for ``drive``, redacted, with their digest."""
    key = drive.api_key
    mark = key_marker(key) if key else REDACTED
    fields: dict[str, Any] = {
        "scenario": raw_scenario,
        "status": drive.status,
        "error": redact(drive.error, key, mark) if drive.error else None,
        "crashed": drive.crashed,
        # Adapters hand over what the agent really wrote (DBG-02 is judged on it); nothing of it
        # leaves the runner unredacted.
        "journal": redact_obj(drive.journal, key, mark),
        "events": redact_obj(drive.events, key, mark),
        "agent_log": redact(drive.agent_log, key, mark),
        "debug_files": redact_obj(drive.debug_files, key, mark),
        "judged_with": {**judged_with(drive, allowances), "key_marker": mark if key else None},
    }
    if drive.debug_format:
        fields["debug_format"] = drive.debug_format
    fields["evidence_sha256"] = evidence_digest(fields)
    return fields


def evidence_digest(entry: Mapping[str, Any]) -> str:
    """The sha256 of an entry's evidence fields, as canonical JSON (sorted keys, no spaces)."""
    evidence = {k: entry.get(k) for k in EVIDENCE_FIELDS}
    if entry.get("debug_format"):
        # Covered only when named: the digests of entries without one stay as they were.
        evidence["debug_format"] = entry["debug_format"]
    text = json.dumps(evidence, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def drive_of(entry: Mapping[str, Any]) -> tuple[Drive, Allowances]:
    """The drive record and allowances a saved entry was judged on. Its key is the entry's key
    marker (``key_marker``): the judge is handed that as the secret DBG-02 looks for."""
    used = entry.get("judged_with") or {}
    journal = cast(Journal, entry.get("journal") or {"entries": []})
    scale = float(used.get("time_scale") or journal.get("time_scale") or 1.0)
    drive = Drive(
        status=cast(Status, entry.get("status") or "error"),
        error=entry.get("error"),
        crashed=bool(entry.get("crashed")),
        journal=journal,
        events=list(entry.get("events") or []),
        agent_log=str(entry.get("agent_log") or ""),
        time_scale=scale,
        api_key=str(used.get("key_marker") or ""),
        debug_files=dict(entry.get("debug_files") or {}),
        debug_format=entry.get("debug_format") or None,
        stopped_ns=used.get("stopped_ns"),
        duration_s=float(entry.get("duration_s") or 0.0),
    )
    saved = used.get("timing") or {}
    timing = Timing(
        early_slack_s=float(saved.get("early_slack_s", DEFAULT_TIMING.early_slack_s)),
        late_slack_s=float(saved.get("late_slack_s", DEFAULT_TIMING.late_slack_s)),
        noise_s=float(saved.get("noise_s", DEFAULT_TIMING.noise_s)),
        wakeup_s=float(saved.get("wakeup_s", DEFAULT_TIMING.wakeup_s)),
    )
    allowances = Allowances(
        timing=timing,
        overhead_s=float(used.get("overhead_s") or 0.0),
        overhead_spread_s=float(used.get("overhead_spread_s") or 0.0),
    )
    return drive, allowances
