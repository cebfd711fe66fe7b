"""The agent author's pages: docs/judged-on.md (generated), docs/adapter-protocol.md (its
capability list and links), and `conformance list` as a Unix tool (a closed pipe)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE, by_id
from conformance.checks.seed_strings import CONTINUATION_TEXT, TRUNCATION_HINT
from conformance.cli import main
from conformance.judged_page import CAPABILITIES, CONFIG_KEYS, as_markdown, capabilities

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_judged_on_page_is_in_sync() -> None:
    page = DOCS / "judged-on.md"
    assert page.read_text(encoding="utf-8") == as_markdown(), (
        "docs/judged-on.md is out of date: run `conformance list --judged-on > docs/judged-on.md`"
    )


def test_list_judged_on_writes_the_page(capsys) -> None:
    assert main(["list", "--judged-on"]) == 0
    assert capsys.readouterr().out == as_markdown()


def test_judged_on_page_carries_the_checks_numbers_and_strings() -> None:
    page = as_markdown()
    backoff = by_id("RTY-03").numbers
    assert f"min({backoff['cap_s']:g}, {backoff['base_s']:g} x 2^(n-1)) s" in page
    assert f"[{backoff['jitter_low']:g}, {backoff['jitter_high']:g}]" in page
    assert f"{int(by_id('RTY-04').numbers['retries'])} retries" in page
    assert f"At most {int(by_id('TRN-04').numbers['recoveries'])} consecutive" in page
    assert f"```text\n{CONTINUATION_TEXT}\n```" in page
    assert f"```text\n{TRUNCATION_HINT}\n```" in page
    for kind in ("rate_limit", "connection", "prompt_too_long", "overloaded"):
        assert f"`{kind}`" in page


def test_every_capability_and_config_key_is_described() -> None:
    caps = capabilities()
    assert {c.capability for c in CATALOGUE if c.capability} <= set(caps)
    assert set(caps) <= set(CAPABILITIES)
    for key, (ids, _) in CONFIG_KEYS.items():
        assert all(by_id(cid) for cid in ids.split(", ")), key
    page = as_markdown()
    for cap in caps:
        assert f"| `{cap}` |" in page


def test_an_undescribed_capability_stops_the_page(monkeypatch) -> None:
    import conformance.judged_page as judged

    monkeypatch.setattr(
        judged, "CAPABILITIES", {k: v for k, v in CAPABILITIES.items() if k != "media"}
    )
    with pytest.raises(ValueError, match="no description for media"):
        judged.as_markdown()


def _protocol() -> str:
    return (DOCS / "adapter-protocol.md").read_text(encoding="utf-8")


def test_protocol_doc_lists_every_capability() -> None:
    section = _protocol().split("## Capabilities", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([a-z_]+(?::[a-z_]+)?)`", section))
    assert set(capabilities()) <= listed, sorted(set(capabilities()) - listed)


def test_protocol_doc_links_the_authors_pages() -> None:
    doc = _protocol()
    head = doc[: doc.index("## One scenario")]
    assert "(judged-on.md)" in head and "(criteria.md)" in head
    assert "docs/contracts.md" in doc and "section 5" in doc
    for page in ("judged-on.md", "criteria.md", "contracts.md"):
        assert (DOCS / page).is_file()


def test_list_into_a_closed_pipe_ends_quietly(capsys) -> None:
    # `conformance list | head`: before, a BrokenPipeError traceback.
    read, write = os.pipe()
    os.close(read)
    saved_fd = os.dup(1)
    saved = sys.stdout
    try:
        os.dup2(write, 1)
        sys.stdout = os.fdopen(os.dup(1), "w", encoding="utf-8")
        status = main(["list", "--json"])
    finally:
        sys.stdout.close() if sys.stdout is not saved else None
        sys.stdout = saved
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        os.close(write)
    assert status == 141  # 128 + SIGPIPE, as a tool killed by the signal reports
    assert "Traceback" not in capsys.readouterr().err
