"""The catalogue covers exactly the criteria index, with the same levels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.catalogue import AREAS, CATALOGUE, DIALECTS, LEVELS, by_id

INDEX = Path(__file__).with_name("criteria_index.md")
_ROW = re.compile(r"^\|\s*([A-Z]{3}-\d{2})\s*\|\s*(MUST|SHOULD|MAY)\s*\|")


def _index_levels() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"duplicate id in index: {m.group(1)}"
            rows[m.group(1)] = m.group(2)
    return rows


def test_index_parses_to_many_rows() -> None:
    assert len(_index_levels()) >= 89


def test_catalogue_has_exactly_the_index_ids_and_levels() -> None:
    index = _index_levels()
    ours = {c.id: c.level for c in CATALOGUE}
    assert len(ours) == len(CATALOGUE), "duplicate ids in catalogue"
    assert set(ours) - set(index) == set(), "ids not in index"
    assert set(index) - set(ours) == set(), "ids missing from catalogue"
    assert ours == index


@pytest.mark.parametrize("crit", CATALOGUE, ids=lambda c: c.id)
def test_criterion_fields(crit) -> None:
    assert crit.level in LEVELS
    assert crit.area == crit.id.split("-")[0] and crit.area in AREAS
    assert crit.title and crit.text and crit.source
    assert (
        "seed" in crit.source or "criteria.md" in crit.source or "MCP specification" in crit.source
    )
    if "seed" not in crit.source:
        assert crit.beyond_seeds, "a criterion the seeds do not state is marked beyond_seeds"
    if crit.level == "MAY":
        assert crit.capability, "a MAY criterion needs a capability to be UNSUPPORTED without"
    assert crit.dialects and set(crit.dialects) <= set(DIALECTS)
    assert len(set(crit.dialects)) == len(crit.dialects)


def test_by_id() -> None:
    assert by_id("RTY-01").level == "MUST"
    with pytest.raises(KeyError, match="NOPE-01"):
        by_id("NOPE-01")


def test_docs_page_is_in_sync() -> None:
    from conformance.criteria_page import as_markdown

    page = Path(__file__).resolve().parents[2] / "docs" / "criteria.md"
    assert page.read_text(encoding="utf-8") == as_markdown(), (
        "docs/criteria.md is out of date: run `conformance list --markdown > docs/criteria.md`"
    )


def test_list_markdown_writes_the_docs_page(capsys) -> None:
    from conformance.cli import main
    from conformance.criteria_page import as_markdown

    assert main(["list", "--markdown"]) == 0
    assert capsys.readouterr().out == as_markdown()


def test_dialect_limited_criteria() -> None:
    # The Responses terminal event is both finish marker and end of stream: no "finish without
    # [DONE]" there. Everything else is judged in every dialect.
    assert by_id("STR-13").dialects == ("openai_chat", "anthropic_messages")
    limited = {c.id for c in CATALOGUE if c.dialects != DIALECTS}
    # A failed Responses stream never carries usage (it comes with the terminal event only).
    assert limited == {"STR-13", "STR-11"}
    assert by_id("STR-11").dialects == ("openai_chat", "anthropic_messages")
    assert by_id("STR-08").dialects == DIALECTS  # a missing finish marker exists everywhere


def test_docs_page_shows_dialects() -> None:
    from conformance.criteria_page import as_markdown

    page = as_markdown()
    assert (
        "| ID | level | capability | dialects | cut short | timing | criterion | source |" in page
    )
    row = next(ln for ln in page.splitlines() if ln.startswith("| STR-13 |"))
    assert "`openai_chat`, `anthropic_messages`" in row and "openai_responses" not in row
    assert next(ln for ln in page.splitlines() if ln.startswith("| STR-08 |")).count("| all |")


def test_list_json_carries_dialects(capsys) -> None:
    import json

    from conformance.cli import main

    assert main(["list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["STR-13"]["dialects"] == ["openai_chat", "anthropic_messages"]
    assert rows["RTY-01"]["dialects"] == list(DIALECTS)


def test_docs_page_shows_what_a_turn_cut_short_still_judges() -> None:
    from conformance.checks import FINAL_ON_PARTIAL
    from conformance.criteria_page import as_markdown

    rows = {ln.split("|")[1].strip(): ln for ln in as_markdown().splitlines() if ln[:6] == "| RTY-"}
    assert "RTY-04" in FINAL_ON_PARTIAL and "| final |" in rows["RTY-04"]
    assert "RTY-08" not in FINAL_ON_PARTIAL and "| - | timing | **Jitter" in rows["RTY-08"]
    # Waits measured on the wire: RTY-03's bands; RTY-04 counts attempts.
    assert "| timing |" in rows["RTY-03"] and "| timing |" not in rows["RTY-04"]
    assert "DBG-02" in as_markdown().split("Judged on every run")[1].split(".")[0]
