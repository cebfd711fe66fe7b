"""The criteria catalogue as a Markdown page: ``docs/criteria.md``, written by ``conformance list
--markdown`` from the catalogue's rows and what the checks declare of them (which criteria are
judged on every run, which stand when a turn is cut short)."""

from __future__ import annotations

from conformance.catalogue import AREAS, CATALOGUE, DIALECTS
from conformance.checks import FINAL_ON_PARTIAL, INVARIANTS

__all__ = ["as_markdown"]


def as_markdown() -> str:
    """The catalogue as a Markdown page: docs/criteria.md (`conformance list --markdown`)."""
    out = [
        "# Criteria catalogue",
        "",
        "Generated from `conformance/criteria/*.yaml` by `conformance list --markdown`. MUST "
        "failures are FAIL; SHOULD and MAY failures are NON-STRICT; a criterion whose capability "
        "the agent does not declare is UNSUPPORTED. A criterion limited to some wire dialects "
        "(column *dialects*; `all` = "
        + ", ".join(f"`{d}`" for d in DIALECTS)
        + ") is INFORMATIONAL when the scenario is run in another.",
        "",
        "Judged on every run, whatever criteria the scenario lists: "
        + ", ".join(sorted(INVARIANTS))
        + ". When the turn never ends (TIMEOUT, or an ERROR before `turn_end`), only the "
        "criteria marked *final* in the column *cut short* are judged, on what the wire already "
        "shows: a violation of theirs (one attempt too many, a request that must not be sent) "
        "stands whatever would have come after. The others, which need the end of the turn, "
        "stay TIMEOUT or ERROR. A criterion marked *timing* rests on waits measured on the "
        "wire: an agent run on a fast clock whose own time between attempts is too uneven runs "
        "its scenarios in real time (docs/agents/README.md, time warp). A source marked "
        "*beyond the seeds* names where a criterion the seeds do not state comes from: the "
        "code of production clients, or the MCP specification (the MCP criteria, judged on "
        "the MCP wire of an agent run with `--tool-transport mcp`).",
    ]
    for area, name in AREAS.items():
        out += [
            "",
            f"## {area}: {name}",
            "",
            "| ID | level | capability | dialects | cut short | timing | criterion | source |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in CATALOGUE:
            if c.area == area:
                text = f"**{c.title}.** {c.text}".replace("|", "\\|")
                only = "all" if c.dialects == DIALECTS else ", ".join(f"`{d}`" for d in c.dialects)
                final = "final" if c.id in FINAL_ON_PARTIAL else "-"
                out.append(
                    f"| {c.id} | {c.level} | {c.capability or '-'} | {only} | {final} "
                    f"| {'timing' if c.timing else '-'} | {text} "
                    f"| {'*beyond the seeds:* ' if c.beyond_seeds else ''}{c.source} |"
                )
    return "\n".join(out) + "\n"
