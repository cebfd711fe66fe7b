"""The criteria scenarios load, name known criteria, and cover every implemented check."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.catalogue import by_id
from conformance.checks import CHECKS
from fakes import load_scenario

ROOT = Path(__file__).resolve().parents[2] / "scenarios" / "criteria"
FILES = sorted(ROOT.rglob("*.yaml"))


def test_there_are_scenarios() -> None:
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scenario_loads_and_names_known_criteria(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.id == path.stem
    assert sc.criteria, f"{path.name} names no criteria"
    for cid in sc.criteria:
        by_id(cid)
    assert path.parent.name in {
        "rty",
        "str",
        "trn",
        "rsn",
        "tjs",
        "tol",
        "fmt",
        "lop",
        "ctx",
        "mfb",
        "err",
        "dbg",
        "ctl",
        "mcp",
    }


def test_every_check_has_a_scenario() -> None:
    covered = {cid for p in FILES for cid in load_scenario(p).criteria}
    missing = sorted(set(CHECKS) - covered)
    assert missing == []


def test_retry_status_variants_present() -> None:
    stems = {p.stem for p in FILES}
    for st in (500, 502, 503, 504, 529):
        assert f"rty-05-status-{st}" in stems
    for st in (408, 409):
        assert f"rty-16-status-{st}" in stems
