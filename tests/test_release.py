"""The catalogue's release: a change to the rules is a new release, recorded and pinned."""

from __future__ import annotations

import tomllib
from pathlib import Path

from conformance import __version__
from conformance.release import (
    CATALOGUE_VERSION,
    changelog_markdown,
    changes_between,
    releases,
    rules_files,
    rules_sha256,
)

ROOT = Path(__file__).resolve().parents[1]

# The digest of each release's rules (conformance.release.RULES). A change to any rules file
# fails here: if it can move a verdict, release it (a minor version at least: pyproject.toml,
# conformance/__init__.py, an entry in conformance/releases.yaml naming the criteria it can
# move, CHANGELOG.md regenerated); if it moves none (a comment, a refactor), a patch release.
# Then pin the new digest here. Results of different releases are never merged or compared
# silently, so an unreleased change would pass for the old rules.
PINNED = {
    "1.0.0": "569d0a244c6dd31d45d8111b555978befb9914d91db0ecaab5c71bff3f78f9fc",
}


def test_the_rules_of_this_release_are_the_ones_pinned_for_it():
    assert CATALOGUE_VERSION in PINNED, f"release {CATALOGUE_VERSION} has no pinned digest"
    assert rules_sha256() == PINNED[CATALOGUE_VERSION], (
        f"the rules changed (sha256 {rules_sha256()}) but the release is still "
        f"{CATALOGUE_VERSION}: release them (see the comment above PINNED)"
    )


def test_the_package_the_catalogue_and_the_changelog_name_one_release():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["version"] == __version__ == CATALOGUE_VERSION
    assert releases()[0].version == CATALOGUE_VERSION
    assert (ROOT / "CHANGELOG.md").read_text("utf-8") == changelog_markdown(), (
        "CHANGELOG.md is stale: conformance list --changelog > CHANGELOG.md"
    )


def test_the_rules_cover_the_catalogue_and_the_checks():
    names = [p.as_posix() for p in rules_files()]
    for needed in (
        "conformance/criteria/rty.yaml",
        "conformance/checks/rty.py",
        "conformance/run/judge.py",
    ):
        assert any(n.endswith(needed) for n in names), needed


def test_changes_between_releases_are_those_after_the_older_one():
    assert changes_between(CATALOGUE_VERSION) == []
    assert [v for v, _ in changes_between("0.0.0")] == [
        r.version for r in releases() for _ in r.changes
    ]
