"""The agent author's pages: docs/judged-on.md (generated), docs/adapter-protocol.md (its
capability list and links), and `conformance list` as a Unix tool (a closed pipe)."""

from __future__ import annotations

import json
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


# --- Acceptance: what the starter agent needed is in the pages the protocol doc links --------
AGENT = ROOT / "examples" / "node-agent" / "agent.mjs"


def _linked_pages() -> str:
    """docs/adapter-protocol.md and the pages of docs/ it links."""
    doc = _protocol()
    names = set(re.findall(r"\]\(([a-z-]+\.md)(?:#[^)]*)?\)", doc))
    return "\n".join([doc, *((DOCS / n).read_text(encoding="utf-8") for n in sorted(names))])


def _judged_block(source: str) -> str:
    start = source.index("// --- What the agent is judged on")
    return source[start : source.index("// --- The agent's own choices")]


def _js_strings(expr: str) -> str:
    """A JS expression of double-quoted literals joined by +, as one string (JSON escapes)."""
    return "".join(json.loads(lit) for lit in re.findall(r'"(?:[^"\\]|\\.)*"', expr))


def test_every_number_and_string_the_starter_agent_uses_is_in_the_linked_pages() -> None:
    pages = _linked_pages()
    block = _judged_block(AGENT.read_text(encoding="utf-8"))
    numbers = dict(re.findall(r"^const (\w+) = (\d+(?:\.\d+)?);", block, re.M))
    assert {"BACKOFF_BASE_S", "BACKOFF_CAP_S", "JITTER", "RETRY_BUDGET"} <= set(numbers)
    for name, literal in numbers.items():
        value = float(literal)
        spelled = {literal, f"{value:g}", f"{value * 100:g} %"}
        assert any(s in pages for s in spelled), f"{name} = {literal} is in none of the pages"
    strings = re.findall(
        r"^const (\w+) =(?: //[^\n]*)?\s*((?:\"(?:[^\"\\]|\\.)*\"\s*\+?\s*)+);", block, re.M
    )
    assert {n for n, _ in strings} == {"CONTINUATION_TEXT", "TRUNCATION_HINT"}
    for name, expr in strings:
        assert _js_strings(expr) in pages, f"{name} is in none of the pages"
    assert _js_strings(dict(strings)["CONTINUATION_TEXT"]) == CONTINUATION_TEXT
    retryable = re.search(r"RETRYABLE = new Set\(\[([\d, ]+)\]\)", block)
    assert retryable is not None
    retry_section = pages.split("## 3. Retry a failed model request", 1)[1].split("\n## ", 1)[0]
    for status in retryable.group(1).split(", "):
        assert status in retry_section, status


def test_the_starter_agents_kinds_capabilities_and_config_keys_are_documented() -> None:
    from conformance.checks.err import TYPED_KINDS

    source = AGENT.read_text(encoding="utf-8")
    pages = _linked_pages()
    hello = re.search(r"capabilities: (\[[^\]]*\])", source)
    assert hello is not None
    for cap in json.loads(hello.group(1)):
        assert f"`{cap}`" in _protocol() and cap in CAPABILITIES
    for key in set(re.findall(r"cfg\.(\w+)", source)) | set(re.findall(r"config\?\.(\w+)", source)):
        assert key in CONFIG_KEYS and f"`{key}`" in pages, key
    table = re.search(r"function kindOf[\s\S]*?\n}\n", source)
    assert table is not None
    kinds = set(re.findall(r'"([a-z_]+)"', table.group(0)))
    assert kinds and kinds <= TYPED_KINDS, kinds - TYPED_KINDS
    for kind in kinds:
        assert f"`{kind}`" in pages, kind


def test_each_starter_agent_is_one_short_file() -> None:
    agents = [p for p in (ROOT / "examples").rglob("agent.*") if p.suffix in (".mjs", ".ts", ".go")]
    assert agents
    for path in agents:
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines < 500, f"{path.relative_to(ROOT)}: {lines} lines"
