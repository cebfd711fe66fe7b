"""The full report, written atomically.

Theory of operation: everything is rendered into a fresh temporary directory beside
``out_dir``; then an existing ``out_dir`` is renamed aside, the new one renamed into place,
and the old one removed. An interrupted render leaves either the old report or the new one,
never a mixture (plus, at worst, a stray temporary directory).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.html import render_html
from reports.junit import render_junit
from reports.markdown import render_markdown
from reports.model import build_report
from reports.redact import Redactor
from reports.schema import validate_results

__all__ = ["render"]


_EVIDENCE = ("journal", "events", "agent_log", "reruns")


def _verdicts_only(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without its scenarios' evidence (journals, events, logs)."""
    agents = [
        {
            **a,
            "scenarios": [
                {k: v for k, v in s.items() if k not in _EVIDENCE} for s in a["scenarios"]
            ],
        }
        for a in doc["agents"]
    ]
    return {**doc, "agents": agents}


def render(
    results: list[dict[str, Any]],
    out_dir: Path,
    *,
    secrets: Sequence[str] = (),
    validated: bool = False,
) -> Path:
    """Validate ``results`` (unless ``validated``: the caller did), write the report into
    ``out_dir``, return the index.html path.

    Writes ``index.html``, ``criteria/<ID>.html``, ``scenarios/<agent>/<scenario>.html``,
    ``evidence/<agent>/<scenario>.json.xz``, ``report.css``, ``junit.xml`` and ``summary.md``.
    """
    if not results:
        raise ValueError("render: no results documents given")
    for i, doc in enumerate(results):
        if not validated:  # the command line validated each file as it read it
            validate_results(doc, source=f"results[{i}]")
    out_dir = Path(out_dir).absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    red = Redactor(secrets)
    clean = [red.deep(d) for d in results]
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        render_html(build_report(clean), tmp, red)
        light = [_verdicts_only(d) for d in clean]  # the text reports show no evidence
        (tmp / "junit.xml").write_text(render_junit(light, secrets=secrets), encoding="utf-8")
        (tmp / "summary.md").write_text(render_markdown(light, secrets=secrets), encoding="utf-8")
        old = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            old.rmdir()
            out_dir.rename(old)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out_dir / "index.html"
