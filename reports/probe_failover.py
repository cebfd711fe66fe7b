"""Render failover probe documents (``conformance.probe.failover``) as ``failover.html``.

One page for one or more gateways: per gateway a table of case x verdict, then per case the
timeline of the requests each upstream received and the client's reply, drawn to one scale.
Each document is validated (``schemas/probe-failover.schema.json``) and written as
``failover-<gateway>.json`` beside the page; the page reuses the conformance report's look.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.html import environment
from reports.redact import Redactor
from reports.schema import load_named_schema, validate_against

__all__ = [
    "FAILOVER_VERDICTS",
    "load_failover_schema",
    "render_failover",
    "timeline",
    "validate_failover",
]

# Worst first (docs/probe.md, "Failover").
FAILOVER_VERDICTS = ("UNSAFE", "TRUNCATED", "RETRY-TOO-SOON", "NO-RECOVERY", "NOT-REACHED", "PASS")

# The conformance report's verdict colours, borrowed.
_CSS = {
    "UNSAFE": "ERROR",
    "TRUNCATED": "FAIL",
    "RETRY-TOO-SOON": "NON-STRICT",
    "NO-RECOVERY": "FAIL",
    "NOT-REACHED": "UNSUPPORTED",
    "PASS": "PASS",
}


def load_failover_schema() -> dict[str, Any]:
    """Return the probe-failover JSON Schema (draft 2020-12)."""
    return load_named_schema("probe-failover")


def validate_failover(doc: Any, *, source: str = "<failover>") -> None:
    """Raise ResultsError naming ``source``, the JSON path and the problem if ``doc`` is invalid."""
    validate_against("probe-failover", doc, source)


def timeline(case: dict[str, Any]) -> dict[str, Any]:
    """Rows of bars (left, width in % of the case's span) for the client and each attempt."""
    client = case["client"]
    ends = [client["elapsed_ms"]]
    for a in case["attempts"]:
        ends += [t for t in (a["t_arrival_ms"], a["t_headers_ms"], a["t_end_ms"]) if t is not None]
    span = max(max(ends), 1.0)

    def bar(start: float, end: float | None) -> dict[str, float]:
        end = span if end is None else end
        return {
            "left": round(100 * max(start, 0) / span, 2),
            "width": round(max(100 * (end - start) / span, 0.4), 2),
        }

    rows = [
        {
            "who": "client",
            "label": f"{client['status'] if client['status'] is not None else '-'} "
            f"{client['outcome']}",
            "fault": client["outcome"] not in ("complete",),
            "at": 0.0,
            "end": client["elapsed_ms"],
            **bar(0.0, client["elapsed_ms"]),
        }
    ]
    for a in case["attempts"]:
        label = str(a["status"]) if a["status"] is not None else "no status"
        if a["fault"]:
            label += f" {a['fault']}"
        rows.append(
            {
                "who": a["upstream"],
                "label": label,
                "fault": bool(a["fault"]),
                "at": a["t_arrival_ms"],
                "end": a["t_end_ms"],
                **bar(a["t_arrival_ms"] or 0.0, a["t_end_ms"]),
            }
        )
    return {"span_ms": span, "rows": rows}


def _anchor(gateway: str, case: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", f"{gateway}-{case}")


def render_failover(
    docs: Sequence[dict[str, Any]], out_dir: Path, *, secrets: Sequence[str] = ()
) -> Path:
    """Validate each document, write them and ``failover.html`` into ``out_dir``; the page."""
    red = Redactor(secrets)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    views = []
    for doc in docs:
        validate_failover(doc, source=f"failover document of {doc.get('probe', {})}")
        gw = doc["probe"]["gateway"]
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", gw)
        (out_dir / f"failover-{name}.json").write_text(
            json.dumps(red.deep(doc, keys=False), indent=2, ensure_ascii=False) + "\n", "utf-8"
        )
        cases = [
            {
                **c,
                "anchor": _anchor(gw, c["id"]),
                "timeline": timeline(c),
                "client_summary": {k: v for k, v in c["client"].items() if k != "body"},
            }
            for c in doc["cases"]
        ]
        views.append({**doc, "cases": cases})
    html = (
        environment(red)
        .get_template("probe_failover.html.j2")
        .render(
            interrupted=False,
            agents=[],
            gateways=views,
            verdicts=FAILOVER_VERDICTS,
            css=_CSS,
            pretty=lambda v: json.dumps(v, indent=2, ensure_ascii=False),
        )
    )
    page = out_dir / "failover.html"
    page.write_text(html, encoding="utf-8")
    return page
