"""Which rules judged a verdict: the catalogue's release version and the digest of its rules.

A verdict is only as meaningful as the rules that gave it, so every results file names them:
``run.catalogue_version`` (semver: a change that can move a verdict is at least a minor
release; a fix that moves none is a patch) and ``run.catalogue_sha256``, the digest of
:data:`RULES`, the files a verdict follows from: the catalogue's rows and the code that judges
evidence (the checks, the read model they share, the verdict ladder). Two results files with
different versions were judged by different rules; ``conformance report`` refuses to merge
shards of them, and comparisons warn.

Each release's rule changes are data (``conformance/releases.yaml``): ``CHANGELOG.md``
is generated from it (``conformance list --changelog``), and ``conformance rejudge`` names the
change that moved a verdict from it. ``tests/test_release.py`` pins the digest of each release:
a change to a rules file without a new release fails there, saying what to do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CATALOGUE_VERSION",
    "RULES",
    "Change",
    "Release",
    "changelog_markdown",
    "changes_between",
    "releases",
    "rules_sha256",
    "version_key",
]

# The release: the package's version too (pyproject.toml names it; a test holds them equal).
CATALOGUE_VERSION = "1.7.0"

# The rules a verdict follows from, as paths inside the installed packages (globs).
RULES = (
    "conformance/criteria/*.yaml",
    "conformance/checks/*.py",
    "conformance/run/judge.py",
    "conformance/judging/evidence.py",
    "conformance/judging/canon.py",
    "conformance/judging/wire_reply.py",
    "conformance/judging/executions.py",
    "conformance/judging/debug_formats.py",
    "conformance/verdicts.py",
    "conformance/judging/timing.py",
    "conformance/judging/reaction.py",
    "conformance/repeat.py",
    "fakes/faults.py",
    "fakes/fault_base.py",
    "fakes/compaction.py",
)


def _roots() -> Path:
    """The directory the packages are installed in (holding ``conformance/`` and ``fakes/``)."""
    return Path(str(resources.files("conformance"))).parent


def rules_files() -> list[Path]:
    root = _roots()
    found = {p for pattern in RULES for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


@cache
def rules_sha256() -> str:
    """The digest of every rules file: its path and bytes (line ends normalised), in order."""
    root = _roots()
    digest = hashlib.sha256()
    for path in rules_files():
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()


def version_key(version: str) -> tuple[int, ...]:
    """``1.2.3`` as (1, 2, 3), for ordering; ValueError for anything else."""
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        raise ValueError(f"not a release version: {version!r} (want MAJOR.MINOR.PATCH)") from None


@dataclass(frozen=True)
class Change:
    """One rule change of a release: what changed, why, and the criteria it can move."""

    what: str
    why: str
    criteria: tuple[str, ...] = ()


@dataclass(frozen=True)
class Release:
    version: str
    date: str
    changes: tuple[Change, ...]


def _load(data: Any) -> list[Release]:
    out = []
    for row in data or []:
        changes = tuple(
            Change(str(c["what"]), str(c.get("why") or ""), tuple(c.get("criteria") or ()))
            for c in row.get("changes") or []
        )
        out.append(Release(str(row["version"]), str(row.get("date") or ""), changes))
    return sorted(out, key=lambda r: version_key(r.version), reverse=True)


@cache
def releases() -> tuple[Release, ...]:
    """Every release, newest first (``conformance/releases.yaml``)."""
    text = resources.files("conformance").joinpath("releases.yaml").read_text("utf-8")
    return tuple(_load(yaml.safe_load(text)))


def changes_between(old: str, new: str = CATALOGUE_VERSION) -> list[tuple[str, Change]]:
    """The rule changes released after ``old`` up to ``new``, as (version, change)."""
    lo, hi = version_key(old), version_key(new)
    return [
        (r.version, c) for r in releases() if lo < version_key(r.version) <= hi for c in r.changes
    ]


def changelog_markdown() -> str:
    """``CHANGELOG.md``: every release's rule changes (``conformance list --changelog``)."""
    out = [
        "# Changelog",
        "",
        "The catalogue's releases: each one's rule changes, what they move and why. Generated "
        "from `conformance/releases.yaml` by `conformance list --changelog`. A results "
        "file names the release that judged it (`run.catalogue_version`, "
        "`run.catalogue_sha256`); `conformance rejudge` re-derives its verdicts under the "
        "installed one.",
    ]
    for r in releases():
        out += ["", f"## {r.version}" + (f" ({r.date})" if r.date else ""), ""]
        for c in r.changes:
            ids = f" [{', '.join(c.criteria)}]" if c.criteria else ""
            out.append(f"- {c.what}{ids}" + (f": {c.why}" if c.why else ""))
    return "\n".join(out) + "\n"
