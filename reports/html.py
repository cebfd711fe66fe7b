"""HTML pages: ``index.html`` and ``criteria/<ID>.html`` rendered with autoescaping jinja2.

Theory of operation: data is redacted before it reaches the templates, and the environment's
``finalize`` hook redacts every printed value again (covers strings built here, such as pretty
JSON). Agent-controlled text only ever appears as escaped element text, never in attributes
that load or run anything.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2

from reports.model import VERDICTS, AgentView, Report
from reports.pictures import matrix, timeline
from reports.redact import Redactor

__all__ = ["environment", "render_html"]


def environment(redactor: Redactor) -> jinja2.Environment:
    """The template environment: package templates, autoescape always on, redacting finalize."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        finalize=redactor,
        undefined=jinja2.StrictUndefined,
    )


def _anchor(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def _timeline(entries: list[dict[str, Any]], t0: int | None) -> list[dict[str, Any]]:
    if not entries or t0 is None:
        return []
    ends = [
        max(e["t_arrival_ns"], (e.get("response") or {}).get("t_end_ns") or e["t_arrival_ns"])
        for e in entries
    ]
    span = max(max(ends) - t0, 1)
    rows, prev = [], None
    for e, end in zip(entries, ends, strict=True):
        r = e.get("response") or {}
        at = e["t_arrival_ns"]
        rows.append(
            {
                "seq": e["seq"],
                "kind": e["kind"],
                "at_ms": (at - t0) / 1e6,
                "gap_ms": None if prev is None else (at - prev) / 1e6,
                "fault": e.get("fault"),
                "status": r.get("status"),
                "end": r.get("end"),
                "left": 100.0 * (at - t0) / span,
                "width": max(100.0 * (end - at) / span, 0.3),
            }
        )
        prev = at
    return rows


def _scenario_view(agent: AgentView, cited: dict[str, Any], cid: str) -> dict[str, Any]:
    sc = agent.scenarios.get(cited["id"], {"id": cited["id"], "status": "unknown"})
    journal = sc.get("journal") or {}
    entries = sorted(journal.get("entries") or [], key=lambda e: e["seq"])
    events = sc.get("events") or []
    times = [e["t_arrival_ns"] for e in entries] + [
        ev["t_ns"] for ev in events if isinstance(ev.get("t_ns"), int)
    ]
    t0 = min(times) if times else None
    removed_ids = {ev.get("id") for ev in events if ev.get("type") == "removed"}
    ev_rows = []
    for ev in events:
        is_meta = bool(ev.get("meta")) or bool(ev.get("hidden"))
        is_removed = ev.get("type") == "removed" or (
            ev.get("type") == "message" and ev.get("id") in removed_ids
        )
        css = " ".join(c for c, on in (("meta", is_meta), ("removed", is_removed)) if on)
        t = ev.get("t_ns")
        ev_rows.append(
            {
                "type": str(ev.get("type")),
                "meta": is_meta,
                "removed": is_removed,
                "css": css,
                "at_ms": (t - t0) / 1e6 if isinstance(t, int) and t0 is not None else None,
                "json": _pretty({k: v for k, v in ev.items() if k != "t_ns"}),
            }
        )
    entry_rows = []
    for e in entries:
        entry_rows.append(
            {
                # Keys the schema leaves optional, for the strict templates.
                **dict.fromkeys(("method", "path", "fault", "body_error", "harness_error")),
                **e,
                "tool": e.get("tool"),
                "headers_json": _pretty(e.get("headers") or {}),
                "body_json": _pretty(e.get("body") if "body" in e else e.get("arguments")),
                "sent": (e.get("response") or {}).get("sent") or "",
                "response": e.get("response"),
            }
        )
    anchor = f"{_anchor(agent.name)}--{_anchor(cited['id'])}"
    picture = timeline(
        entries,
        sc.get("waits") or [],
        t0=min((e["t_arrival_ns"] for e in entries), default=None),
        time_scale=journal.get("time_scale") or agent.run.get("time_scale"),
        anchor=anchor,
        title=f"Timeline of scenario {cited['id']} ({agent.name})",
    )
    return {
        "id": cited["id"],
        "anchor": anchor,
        "picture": picture,
        "verdict": cited["verdict"],
        "expected": cited.get("expected"),
        "observed": cited.get("observed"),
        "partial": bool(cited.get("partial")),
        "runs": cited.get("runs") if cited.get("flaky") else None,  # --verify: it differed
        "status": sc.get("status"),
        "duration_s": sc.get("duration_s"),
        "file": sc.get("file"),
        "error": sc.get("error"),
        "rerun": sc.get("rerun"),
        "clock": _clock(sc.get("clock")),
        "driven": _driven(sc.get("events")),
        "timeline": _timeline(entries, t0),
        "entries": entry_rows,
        "events": ev_rows,
        "agent_log": sc.get("agent_log"),
    }


def _driven(events: Any) -> str | None:
    """How a shipped agent's own features were driven in the run, and how the scenario's config
    was carried to it (its hello's ``driven`` and ``config_carried``)."""
    hello = next((e for e in events or [] if isinstance(e, dict) and e.get("type") == "hello"), {})
    parts = []
    for field, label in (("driven", ""), ("config_carried", "config ")):
        got = hello.get(field)
        if isinstance(got, dict):
            parts += [f"{label}{k}: {how}" for k, how in sorted(got.items())]
    return "; ".join(parts) or None


def _clock(clock: Any) -> str | None:
    """One line on the clock a scenario ran on (an agent on a fast clock), or None."""
    if not isinstance(clock, dict):
        return None
    note = str(clock.get("note") or "")
    if clock.get("time_warp") is None:
        return f"real time; {note}" if note else "real time"
    return (
        f"time warp x{clock['time_warp']:g} (effective x{clock.get('effective_speed')}); "
        f"overhead {clock.get('overhead_ms')} ms, spread {clock.get('spread_ms')} ms real per "
        f"wait; {clock.get('judged') or ''}"
    )


def _common(report: Report) -> dict[str, Any]:
    return {
        "interrupted": report.interrupted,
        "incomplete": report.incomplete(),
        "agents": report.agents,
        "runs": report.runs,
    }


def render_html(report: Report, out_dir: Path, redactor: Redactor) -> Path:
    """Write index.html and one page per catalogue criterion into ``out_dir``."""
    env = environment(redactor)
    index = out_dir / "index.html"
    index.write_text(
        env.get_template("index.html.j2").render(
            **_common(report),
            verdicts=VERDICTS,
            totals=report.totals(),
            must_unsupported={a.name: report.must_unsupported(a) for a in report.agents},
            must_unjudged={a.name: report.must_unjudged(a) for a in report.agents},
            areas=report.areas(),
            matrix=matrix(report, _anchor),
        ),
        encoding="utf-8",
    )
    crit_dir = out_dir / "criteria"
    crit_dir.mkdir(exist_ok=True)
    page = env.get_template("criterion.html.j2")
    for c in report.catalogue:
        per_agent: list[dict[str, Any]] = []
        for a in report.agents:
            res = a.data["criteria"].get(c["id"])
            per_agent.append(
                {
                    "name": a.name,
                    "anchor": _anchor(a.name),
                    "verdict": res["verdict"] if res else None,
                    "scenarios": [
                        _scenario_view(a, s, c["id"]) for s in (res or {}).get("scenarios", [])
                    ],
                }
            )
        pictures = [s["picture"] for a in per_agent for s in a["scenarios"] if s["picture"]]
        for later in pictures[1:]:
            later["legend"] = False  # one legend per page, on its first picture
        (crit_dir / f"{c['id']}.html").write_text(
            page.render(**_common(report), c=c, per_agent=per_agent), encoding="utf-8"
        )
    return index
