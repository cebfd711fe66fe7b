"""Render a gateway probe document (``conformance probe``) as ``probe.html`` and ``probe.json``.

The document is plain JSON (schema ``schemas/probe.schema.json``), validated here; the page
reuses the conformance report's look (``base.html.j2``) and its redaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.html import environment
from reports.redact import Redactor
from reports.schema import load_named_schema, validate_against

__all__ = [
    "PROBE_VERDICTS",
    "keep_vocabulary",
    "load_probe_schema",
    "render_probe",
    "validate_probe",
]

PROBE_VERDICTS = ("OK", "MISSING", "NOTE", "NOT_SEEN", "NOT_APPLICABLE")


def load_probe_schema() -> dict[str, Any]:
    """Return the probe JSON Schema (draft 2020-12)."""
    return load_named_schema("probe")


def validate_probe(doc: Any, *, source: str = "<probe>") -> None:
    """Raise ResultsError naming ``source``, the JSON path and the problem if ``doc`` is invalid."""
    validate_against("probe", doc, source)


def keep_vocabulary(doc: dict[str, Any], clean: dict[str, Any]) -> dict[str, Any]:
    """``clean`` with the probe's own vocabulary put back: the dialect, header and query names,
    observation ids, titles, verdicts and evidence, exchange names (keys are not scrubbed at
    all). They come from fixed lists, never from a gateway or a secret; a short secret (a
    routing header's ``openai``) would otherwise garble them and the written document would not
    be valid. ``conformance.probe`` puts them back with this function too."""
    for k in ("dialect", "headers", "query"):
        if k in doc["probe"]:
            clean["probe"][k] = doc["probe"][k]
    for o, c in zip(doc["observations"], clean["observations"], strict=True):
        c.update({k: o[k] for k in ("id", "title", "verdict", "evidence")})
    for x, c in zip(doc["exchanges"], clean["exchanges"], strict=True):
        c["name"] = x["name"]
    return clean


def render_probe(doc: dict[str, Any], out_dir: Path, *, secrets: Sequence[str] = ()) -> Path:
    """Validate ``doc``, write ``probe.json`` and ``probe.html`` into ``out_dir``; return the page."""
    validate_probe(doc)
    red = Redactor(secrets)
    clean = keep_vocabulary(doc, red.deep(doc, keys=False))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    obs = clean["observations"]
    html = (
        environment(red)
        .get_template("probe.html.j2")
        .render(
            interrupted=False,
            agents=[],
            probe=clean["probe"],
            error=clean["error"],
            outcome=clean["outcome"],
            observations=obs,
            exchanges=clean["exchanges"],
            verdicts=PROBE_VERDICTS,
            totals={v: sum(o["verdict"] == v for o in obs) for v in PROBE_VERDICTS},
            missing=[o["id"] for o in obs if o["verdict"] == "MISSING"],
            pretty=lambda v: json.dumps(v, indent=2, ensure_ascii=False),
        )
    )
    (out_dir / "probe.json").write_text(
        json.dumps(clean, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    page = out_dir / "probe.html"
    page.write_text(html, encoding="utf-8")
    return page
