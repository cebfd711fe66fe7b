"""The README's counts and usage, held to the tree: a scenario or criterion added, or a run
option, makes this fail until the README says so."""

from __future__ import annotations

import re
from pathlib import Path

from conformance.catalogue import CATALOGUE
from conformance.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _scenarios(area: str | None = None) -> int:
    folder = ROOT / "scenarios" / "criteria"
    return len(list((folder / area if area else folder).rglob("*.yaml")))


def _figures() -> str:
    return README.split("## Figures", 1)[1]


def test_the_suite_counts_are_the_trees() -> None:
    must = sum(c.level == "MUST" for c in CATALOGUE)
    mcp = sum(c.area == "MCP" for c in CATALOGUE)
    said = re.search(
        r"The suite holds (\d+) scenarios .*? and (\d+) criteria, (\d+) of them MUST; (\d+)\s+"
        r"are judged over the default tool transport \(the (\d+) MCP criteria",
        _figures(),
        re.S,
    )
    assert said is not None, "the README's sentence on what the suite holds is gone"
    assert [int(x) for x in said.groups()] == [
        _scenarios(),
        len(CATALOGUE),
        must,
        len(CATALOGUE) - mcp,
        mcp,
    ]


def test_the_rows_that_count_the_whole_suite_match_it() -> None:
    figures = _figures()
    mcp_row = next(ln for ln in figures.splitlines() if ln.startswith("| tools over MCP"))
    total, mcp = len(CATALOGUE), sum(c.area == "MCP" for c in CATALOGUE)
    assert f"{_scenarios()} scenarios" in mcp_row
    assert f"{total} of {total} criteria PASS" in mcp_row
    assert f"of the {_scenarios() - _scenarios('mcp')} other scenarios" in mcp_row
    assert f"the {mcp} MCP criteria are UNSUPPORTED" in mcp_row
    # A row measured on a smaller suite says so, or it counts the suite as it is.
    for line in figures.splitlines():
        for n in re.findall(r"(\d+) scenarios\b", line):
            assert int(n) == _scenarios() or "(the suite then)" in line, line


def test_usage_names_every_run_option() -> None:
    usage = README.split("## Usage", 1)[1].split("```", 2)[1]
    run = next(
        a.choices["run"]
        for a in build_parser()._actions
        if getattr(a, "choices", None) and "run" in a.choices
    )

    def said(flag: str) -> bool:
        return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", usage) is not None

    options = [a.option_strings for a in run._actions if a.option_strings and a.dest != "help"]
    missing = [o[-1] for o in options if not any(said(f) for f in o)]
    assert not missing, f"README usage lacks {missing}"
