"""Markdown summary for a CI job summary or a pull-request comment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reports.model import SEVERITY, VERDICTS, build_report
from reports.redact import Redactor

__all__ = ["render_markdown"]

_BAD = ("ERROR", "TIMEOUT", "FAIL")


def _cell(text: str) -> str:
    # Table cells: no pipes or newlines; no raw HTML either (PR comments render it).
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def render_markdown(results: Sequence[dict[str, Any]], *, secrets: Sequence[str] = ()) -> str:
    """Return the Markdown summary for validated results documents."""
    red = Redactor(secrets)
    report = build_report([red.deep(d) for d in results])
    lines = ["# Conformance report", ""]
    if report.interrupted:
        lines += ["**Interrupted run**: results are partial.", ""]
    totals = report.totals()
    lines += ["| " + " | ".join(VERDICTS) + " |", "|" + "---|" * len(VERDICTS)]
    lines += ["| " + " | ".join(str(totals[v]) for v in VERDICTS) + " |", ""]
    for agent in report.agents:
        missing = report.must_unsupported(agent)
        unjudged = report.must_unjudged(agent)
        unsettled = report.must_unsettled(agent)
        lines.append(
            f"- `{_cell(agent.name)}`: {len(missing)} MUST criteria UNSUPPORTED"
            + (f" ({', '.join(missing)})" if missing else "")
            + f"; {len(unjudged)} MUST criteria judged by no scenario"
            + (f" ({', '.join(unjudged)})" if unjudged else "")
            + (
                f"; {len(unsettled)} judged in some scenarios but ERROR or TIMEOUT in others "
                f"({', '.join(unsettled)})"
                if unsettled
                else ""
            )
        )
    lines.append("")
    failures = []
    for agent in report.agents:
        for c in report.catalogue:
            v = agent.verdict(c["id"])
            if v in _BAD:
                failures.append((SEVERITY.index(v), agent.name, c, v))
    lines += ["## Failures", ""]
    if failures:
        for _, name, c, v in sorted(failures, key=lambda f: (f[0], f[1], f[2]["id"])):
            lines.append(f"- **{v}** `{c['id']}` ({_cell(name)}): {_cell(c['title'])}")
    else:
        lines.append("None.")
    lines.append("")
    for agent in report.agents:
        lines += [f"## Agent `{_cell(agent.name)}`", "", "| ID | level | verdict | title |"]
        lines.append("|---|---|---|---|")
        for c in report.catalogue:
            v = agent.verdict(c["id"])
            if v:
                lines.append(f"| {c['id']} | {c['level']} | {v} | {_cell(c['title'])} |")
        lines.append("")
    return red.text("\n".join(lines))
