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
    "1.0.0": "439710d391d9f2f626649d807405fd4493330d4b9cf184157c4398d8dec9adec",
    "1.1.0": "90a61e9de721c2c7acfe21d9ba8b2ca41bc781df5df4f495d889e8dcd18eb33a",
    "1.2.0": "bcac101b04cc85a3db1a7356d2a8ab0311e659ddfb5cdc41c35fb61d018d63cb",
    "1.3.0": "455e618ff16557dbc694988f99fc7ebd522bb6abd79dea0eb09783be584f6436",
    "1.4.0": "40cdf3f21cc2b1baef8d7ac63f603e04293b72cf9574393254bc0d177acae202",
    "1.5.0": "40cdf3f21cc2b1baef8d7ac63f603e04293b72cf9574393254bc0d177acae202",
    "1.6.0": "d746a2f668482c3ae1c27724b0cb7b30ec5237221bc189f1ec35d28c07298c01",
    "1.7.0": "d746a2f668482c3ae1c27724b0cb7b30ec5237221bc189f1ec35d28c07298c01",
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


def test_the_report_and_junit_name_the_release_and_warn_when_runs_differ(tmp_path, capsys):
    import copy
    import json

    from conformance.cli import main
    from conformance.release import rules_sha256

    sample = Path(__file__).parent / "reports" / "sample_results.json"
    doc = json.loads(sample.read_text("utf-8"))
    doc["run"]["catalogue_version"], doc["run"]["catalogue_sha256"] = "1.0.0", rules_sha256()
    other = copy.deepcopy(doc)
    other["run"]["catalogue_version"] = "1.1.0"
    for agent in other["agents"]:
        agent["name"] += "-next"
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    for f, d in zip(files, (doc, other), strict=True):
        f.write_text(json.dumps(d), encoding="utf-8")
    assert main(["report", str(files[0]), "--out", str(tmp_path / "one")]) == 0
    index = (tmp_path / "one" / "index.html").read_text("utf-8")
    assert "judged by the catalogue" in index and rules_sha256()[:12] in index
    junit = (tmp_path / "one" / "junit.xml").read_text("utf-8")
    assert '<property name="catalogue_version" value="1.0.0"' in junit
    assert f'<property name="catalogue_sha256" value="{rules_sha256()}"' in junit
    capsys.readouterr()
    assert main(["report", *map(str, files), "--out", str(tmp_path / "two")]) == 0
    assert "judged by different catalogue releases (1.0.0, 1.1.0)" in capsys.readouterr().err
    assert "different catalogue releases" in (tmp_path / "two" / "index.html").read_text("utf-8")
