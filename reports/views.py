"""What the HTML pages show, shaped from the report model: a scenario's evidence, a criterion's
scenarios.

Theory of operation: a scenario's evidence (its timeline, requests and replies, the agent's
events and log) is shaped once, for its own page (:func:`scenario_page`); bodies are cut to a
page budget (``reports.evidence.cut``) and the whole is in the scenario's evidence file. A
criterion page (:func:`criterion_agents`) lists, per agent, the scenarios that judged it: the
ones that failed (:data:`PROBLEMS`) first, worst first, the first :data:`FEATURED` of them (or
every scenario, when there are few) with their verdict texts and timeline picture, the rest as
table rows; the passing ones, then those that judged nothing (UNSUPPORTED, INFORMATIONAL), in
collapsed tables. Each links to its scenario page. Times are scenario seconds
with real time beside them (``reports.units``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from reports.evidence import EVIDENCE_SUFFIX, cut
from reports.model import AgentView
from reports.pictures import timeline
from reports.units import annotate, scenario_from_real
from reports.verdicts import SEVERITY

__all__ = [
    "FEATURED",
    "SMALL",
    "Paths",
    "anchor",
    "criterion_agents",
    "scenario_page",
    "scenario_scale",
    "slug",
]

FEATURED = 8  # scenarios shown with their picture on a criterion page, per agent
SMALL = 4  # an agent with at most this many scenarios for a criterion has them all shown
MAX_ROWS = 200  # requests (and events) drawn in full on a scenario page; the rest counted
PAGE_TEXT = 50_000  # characters of bodies on one scenario page, shared among its bodies
FIELD_MIN, FIELD_MAX = 300, 6000  # the cut of one body, whatever the share
# Verdicts a reader of a criterion looks for first; UNSUPPORTED and INFORMATIONAL say why a
# scenario judged nothing, and are listed, collapsed, after the passing ones.
PROBLEMS = ("FAIL", "NON-STRICT", "ERROR", "TIMEOUT")
OBSERVED_ROW = 240  # characters of a verdict text in a table row (the whole on the page)


def anchor(text: str) -> str:
    """An id-safe form of ``text`` (for anchors within a page)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def slug(text: str) -> str:
    """A file-name-safe form of ``text``, unique: a name changed by the cleaning gets a short
    hash of the original, so two names never share a file."""
    clean = re.sub(r"[^A-Za-z0-9_-]+", "_", text)[:80] or "_"
    if clean == text:
        return clean
    return f"{clean}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


@dataclass(frozen=True)
class Paths:
    """Where an agent's scenario lives in the report, relative to the report's root."""

    agent: str  # the agent's directory name
    scenario: str  # the scenario's file stem

    @property
    def page(self) -> str:
        return f"scenarios/{self.agent}/{self.scenario}.html"

    @property
    def evidence(self) -> str:
        return f"evidence/{self.agent}/{self.scenario}{EVIDENCE_SUFFIX}"


PRETTY_MAX = 50_000  # a value this long as compact JSON is shown compact (and cut)


def _pretty(value: Any) -> str:
    """``value`` as indented JSON; compact when long (it is cut on the page anyway, and the
    indenting encoder is pure Python: minutes on a shipped agent's hundreds of MB)."""
    compact = json.dumps(value, ensure_ascii=False)
    if len(compact) > PRETTY_MAX:
        return compact
    return json.dumps(value, indent=1, ensure_ascii=False)


def _header_lines(headers: Any) -> str:
    """Request headers as the wire has them, one ``name: value`` a line."""
    if not isinstance(headers, dict):
        return _pretty(headers)
    return "\n".join(f"{k}: {v}" for k, v in headers.items()) or "(none recorded)"


def scenario_scale(agent: AgentView, sc: dict[str, Any]) -> float | None:
    """The time scale a scenario ran at (its journal's, else its run's)."""
    scale = (sc.get("journal") or {}).get("time_scale") or agent.run.get("time_scale")
    return float(scale) if scale else None


def _cited_view(cited: dict[str, Any], scale: float | None) -> dict[str, Any]:
    return {
        "verdict": cited["verdict"],
        "expected": annotate(cited.get("expected") or "", scale),
        "observed": annotate(cited.get("observed") or "", scale),
        "partial": bool(cited.get("partial")),
        "runs": cited.get("runs") if cited.get("flaky") else None,  # --verify: it differed
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


def _at(t_ns: int, t0: int, scale: float | None) -> str:
    return scenario_from_real((t_ns - t0) / 1e9, scale)


def _picture(
    entries: list[dict[str, Any]],
    sc: dict[str, Any],
    scale: float | None,
    *,
    pic_id: str,
    link: str,
    title: str,
) -> dict[str, Any] | None:
    return timeline(
        entries,
        sc.get("waits") or [],
        t0=entries_t0(entries),
        time_scale=scale,
        anchor=pic_id,
        link=link,
        title=title,
    )


def entries_t0(entries: list[dict[str, Any]]) -> int | None:
    """When the first request arrived: time 0 of a scenario's times."""
    return min((e["t_arrival_ns"] for e in entries), default=None)


def _entries(sc: dict[str, Any]) -> list[dict[str, Any]]:
    journal = sc.get("journal") or {}
    return sorted(journal.get("entries") or [], key=lambda e: e["seq"])


def _sent(response: dict[str, Any] | None, limit: int) -> dict[str, Any] | None:
    """What a reply's bytes look like on the page: the text as sent (cut), or a sentence saying
    why there is none, never an empty box."""
    if not response:
        return None
    sent = response.get("sent")
    digest = response.get("sent_digest")
    if isinstance(sent, str) and sent:
        return {"cut": cut(sent, limit), "note": None}
    if isinstance(digest, dict):
        text = f"{digest.get('head', '')}\n[…]\n{digest.get('tail', '')}"
        note = (
            f"the journal kept a digest of these {digest.get('bytes')} bytes (sha256 "
            f"{digest.get('sha256')}): their head and tail"
        )
        return {"cut": cut(text, limit), "note": note}
    if response.get("sent_bytes"):
        note = f"the journal holds none of the {response.get('sent_bytes')} bytes sent"
    else:
        note = "no bytes were sent"
    return {"cut": None, "note": note}


def scenario_page(
    agent: AgentView,
    sc: dict[str, Any],
    cited_by: list[tuple[dict[str, Any], dict[str, Any]]],
    paths: Paths,
) -> dict[str, Any]:
    """Everything the scenario's own page shows. ``cited_by``: (criterion, the criterion
    result's entry for this scenario) for each criterion it judged."""
    scale = scenario_scale(agent, sc)
    entries = _entries(sc)
    events = sc.get("events") or []
    # Time 0 is the first request, as in the picture; an event before it has a negative time.
    ev_times = [ev["t_ns"] for ev in events if isinstance(ev.get("t_ns"), int)]
    t0 = entries_t0(entries) if entries else min(ev_times, default=None)
    shown = entries[:MAX_ROWS]
    shown_events = events[:MAX_ROWS]
    fields = 3 * len(shown) + len(shown_events) + 1
    limit = max(FIELD_MIN, min(FIELD_MAX, PAGE_TEXT // max(fields, 1)))

    rows = _timeline_rows(shown, t0, scale)
    entry_rows = [_entry_row(e, limit) for e in shown]
    ev_rows = _event_rows(events, shown_events, t0, scale, limit)

    log = sc.get("agent_log") or ""
    verdicts = []
    for c, cited in cited_by:
        verdicts.append({"c": c, **_cited_view(cited, scale)})
    verdicts.sort(key=lambda v: (SEVERITY.index(v["verdict"]), v["c"]["id"]))
    duration = sc.get("duration_s")
    return {
        "id": sc["id"],
        "agent": agent.name,
        "agent_anchor": anchor(agent.name),
        "paths": paths,
        "verdicts": verdicts,
        "status": sc.get("status"),
        "duration": None if duration is None else scenario_from_real(float(duration), scale),
        "file": sc.get("file"),
        "error": sc.get("error"),
        "rerun": sc.get("rerun"),
        "clock": _clock(sc.get("clock")),
        "driven": _driven(events),
        "scale": scale,
        "picture": _picture(
            entries,
            sc,
            scale,
            pic_id="scenario",
            link="#req-",
            title=f"Timeline of scenario {sc['id']} ({agent.name})",
        ),
        "timeline": rows,
        "entries": entry_rows,
        "entries_omitted": len(entries) - len(shown),
        "events": ev_rows,
        "events_omitted": len(events) - len(shown_events),
        "agent_log": cut(log, max(limit, 8000)) if log else None,
        "limit": limit,
    }


def _timeline_rows(
    shown: list[dict[str, Any]], t0: int | None, scale: float | None
) -> list[dict[str, Any]]:
    """The scenario page's timeline table: each request's time, the gap since the one before,
    and its bar (left and width in percent of the span from ``t0`` to the last response)."""
    rows, prev = [], None
    span_end = [
        max(e["t_arrival_ns"], (e.get("response") or {}).get("t_end_ns") or e["t_arrival_ns"])
        for e in shown
    ]
    span = max(max(span_end, default=0) - (t0 or 0), 1)
    for e, end in zip(shown, span_end, strict=True):
        r = e.get("response") or {}
        at = e["t_arrival_ns"]
        rows.append(
            {
                "seq": e["seq"],
                "kind": e["kind"],
                "at": _at(at, t0, scale) if t0 is not None else "",
                "gap": None if prev is None else _at(at, prev, scale),
                "fault": e.get("fault"),
                "status": r.get("status"),
                "end": r.get("end"),
                "left": 100.0 * (at - (t0 or at)) / span,
                "width": max(100.0 * (end - at) / span, 0.3),
            }
        )
        prev = at
    return rows


def _entry_row(e: dict[str, Any], limit: int) -> dict[str, Any]:
    """One journal entry as the scenario page lists it, its texts cut to ``limit``."""
    body = e.get("body") if "body" in e else e.get("arguments")
    body_cut = cut(_pretty(body), limit)
    if body is None and isinstance(e.get("body_digest"), dict):
        d = e["body_digest"]
        body_cut = cut(f"{d.get('head', '')}\n[…]\n{d.get('tail', '')}", limit)
    return {
        "seq": e["seq"],
        "kind": e.get("kind"),
        "method": e.get("method"),
        "path": e.get("path"),
        "fault": e.get("fault"),
        "tool": e.get("tool"),
        "body_error": e.get("body_error"),
        "harness_error": e.get("harness_error"),
        "response": e.get("response"),
        "headers": cut(_header_lines(e.get("headers")), limit),
        "body": body_cut,
        "body_digest": e.get("body_digest") if body is None else None,
        "sent": _sent(e.get("response"), limit),
    }


def _event_rows(
    events: list[dict[str, Any]],
    shown: list[dict[str, Any]],
    t0: int | None,
    scale: float | None,
    limit: int,
) -> list[dict[str, Any]]:
    """The agent's events as the scenario page lists them (``shown``: the first of
    ``events``), hidden and removed messages marked."""
    removed_ids = {ev.get("id") for ev in events if ev.get("type") == "removed"}
    ev_rows = []
    for ev in shown:
        is_meta = bool(ev.get("meta")) or bool(ev.get("hidden"))
        is_removed = ev.get("type") == "removed" or (
            ev.get("type") == "message" and ev.get("id") in removed_ids
        )
        t = ev.get("t_ns")
        ev_rows.append(
            {
                "type": str(ev.get("type")),
                "meta": is_meta,
                "removed": is_removed,
                "css": " ".join(c for c, on in (("meta", is_meta), ("removed", is_removed)) if on),
                "at": _at(t, t0, scale) if isinstance(t, int) and t0 is not None else None,
                "json": cut(
                    json.dumps({k: v for k, v in ev.items() if k != "t_ns"}, ensure_ascii=False),
                    limit,
                ),
            }
        )
    return ev_rows


def _row(agent: AgentView, cited: dict[str, Any], paths: dict[str, Paths]) -> dict[str, Any]:
    sc = agent.scenarios.get(cited["id"])
    scale = scenario_scale(agent, sc) if sc else agent.run.get("time_scale")
    view = _cited_view(cited, scale)
    p = paths.get(cited["id"])
    long = len(view["observed"]) > OBSERVED_ROW
    return {
        "id": cited["id"],
        **view,
        # A table row shows the start of a long verdict text; its page shows the whole.
        "observed_short": view["observed"][: OBSERVED_ROW - 1] + "…" if long else view["observed"],
        "observed_cut": long,
        "page": f"../{p.page}" if p else None,
        "status": (sc or {}).get("status", "unknown"),
        "rerun": (sc or {}).get("rerun"),
        "error": (sc or {}).get("error"),
        "sc": sc,
        "scale": scale,
        "anchor": f"{anchor(agent.name)}--{anchor(cited['id'])}",
    }


def criterion_agents(
    c: dict[str, Any], agents: list[AgentView], paths: dict[str, dict[str, Paths]]
) -> list[dict[str, Any]]:
    """Per agent, the scenarios that judged criterion ``c``: featured (with their pictures),
    other failing rows, passing rows (collapsed)."""
    out = []
    for a in agents:
        res = a.data["criteria"].get(c["id"])
        cited = (res or {}).get("scenarios", [])
        rows = [_row(a, s, paths.get(a.name, {})) for s in cited]
        order = sorted(
            range(len(rows)), key=lambda i: (SEVERITY.index(rows[i]["verdict"]), i)
        )  # worst first, the results' order within a verdict
        rows = [rows[i] for i in order]
        bad = [r for r in rows if r["verdict"] in PROBLEMS]
        good = [r for r in rows if r["verdict"] == "PASS"]
        unjudged = [r for r in rows if r["verdict"] not in PROBLEMS + ("PASS",)]
        featured = rows if len(rows) <= SMALL else bad[:FEATURED]
        for r in featured:
            sc = r["sc"]
            p = paths.get(a.name, {}).get(r["id"])
            r["picture"] = (
                _picture(
                    _entries(sc),
                    sc,
                    r["scale"],
                    pic_id=r["anchor"],
                    link=f"../{p.page}#req-" if p else "#",
                    title=f"Timeline of scenario {r['id']} ({a.name})",
                )
                if sc and p
                else None
            )
        shown = {id(r) for r in featured}
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        out.append(
            {
                "name": a.name,
                "anchor": anchor(a.name),
                "verdict": res["verdict"] if res else None,
                "counts": sorted(counts.items(), key=lambda kv: SEVERITY.index(kv[0])),
                "featured": featured,
                "failing": [r for r in bad if id(r) not in shown],
                "passing": [r for r in good if id(r) not in shown],
                "unjudged": [r for r in unjudged if id(r) not in shown],
                "total": len(rows),
            }
        )
    return out
