"""The criteria catalogue: every certified behaviour, in our own words, with its source.

The rows are data, one YAML file per area in ``conformance/criteria/`` (shipped as package
data); this module reads and validates them once, at import. A row's fields:

- ``id`` (``AREA-NN``), ``level``, ``title``, ``text``, ``source``: what is certified and where
  it comes from. Levels: MUST (stated outright by the seeds), SHOULD (recommended; a failure is
  NON-STRICT), MAY (optional; needs a declared capability).
- ``capability`` (optional): the adapter capability the criterion needs; an agent that does not
  declare it gets UNSUPPORTED for that criterion.
- ``dialects`` (optional, all three when absent): the wire dialects the criterion makes sense
  in; run in another, it is INFORMATIONAL. The file says why next to the list.
- ``numbers`` (optional): the criterion's own numbers (a retry budget, a cap, a band), by name;
  its check reads them from here (``by_id("RTY-04").numbers["retries"]``), not from a literal.
- ``beyond_seeds`` (optional, false when absent): the criterion is not in the seeds; its
  ``source`` names where it comes from (production clients' code, the MCP specification).
- ``timing`` (optional, false when absent): the verdict rests on how long the agent waited,
  measured on the wire (a wait against its band, a recovery before a silence ends). An agent on
  a fast clock whose own timing is too loose runs the scenarios of such criteria in real time
  (``conformance.calibration``).

Which criteria have a check, and which are judged on every run or on a run cut short, is
declared next to the checks (``conformance.checks.registry``), not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

import yaml

from conformance.errors import ConformanceError
from fakes.dialects import NAMES
from fakes.scenario import FAST_LOADER

__all__ = [
    "Criterion",
    "CatalogueError",
    "CATALOGUE",
    "AREAS",
    "by_id",
    "LEVELS",
    "DIALECTS",
]

LEVELS = ("MUST", "SHOULD", "MAY")

# The wire dialects the gateway speaks (the journal's names).
DIALECTS = NAMES  # the registry's names (fakes.dialects)

# The area files in catalogue order (the order of docs/criteria.md and of `conformance list`).
_AREA_ORDER = (
    "RTY", "STR", "TRN", "RSN", "TJS", "TOL", "FMT", "LOP", "CTX", "MFB", "ERR", "DBG", "CTL",
    "MCP",
)  # fmt: skip

_ID = re.compile(r"^([A-Z]{3})-\d{2}$")
_REQUIRED = ("id", "level", "title", "text", "source")
_OPTIONAL = ("capability", "dialects", "numbers", "timing", "beyond_seeds", "config_keys")


class CatalogueError(ConformanceError, ValueError):
    """A criteria file that cannot be read: names the file, the row and what is wrong."""


@dataclass(frozen=True)
class Criterion:
    """One certified behaviour."""

    id: str
    level: str
    area: str
    title: str
    text: str
    source: str
    capability: str | None = None
    dialects: tuple[str, ...] = DIALECTS
    beyond_seeds: bool = False  # not in the seeds: ``source`` says where it comes from
    # Keys of the scenario's ``config`` the check judges against (the agent must be told them).
    config_keys: tuple[str, ...] = ()

    @property
    def numbers(self) -> Mapping[str, float]:
        """The criterion's own numbers, by name (read-only; empty when it has none).

        Not a field: the fields are what the results document carries of a criterion
        (``dataclasses.asdict``), and the numbers are the checks' business.
        """
        return _NUMBERS.get(self.id, _NO_NUMBERS)

    @property
    def timing(self) -> bool:
        """Whether the verdict rests on waits measured on the wire (not a field, as numbers)."""
        return self.id in _TIMING


_NUMBERS: dict[str, Mapping[str, float]] = {}
_TIMING: set[str] = set()
_NO_NUMBERS: Mapping[str, float] = MappingProxyType({})


def _criterion(area: str, row: Any, where: str) -> tuple[Criterion, Mapping[str, float]]:
    """One row of an area file, checked field by field, and its numbers."""
    if not isinstance(row, dict):
        raise CatalogueError(f"{where}: a row is a mapping of fields, not {type(row).__name__}")
    unknown = sorted(set(row) - set(_REQUIRED) - set(_OPTIONAL))
    missing = [k for k in _REQUIRED if not isinstance(row.get(k), str) or not row[k].strip()]
    if unknown or missing:
        raise CatalogueError(
            f"{where}: unknown field(s) {unknown}, missing or empty text field(s) {missing}"
        )
    cid = row["id"]
    m = _ID.match(cid)
    if m is None or m.group(1) != area:
        raise CatalogueError(f"{where}: id {cid!r} is not {area}-NN")
    if row["level"] not in LEVELS:
        raise CatalogueError(f"{where}: level {row['level']!r} is not one of {LEVELS}")
    capability = row.get("capability")
    if capability is not None and not (isinstance(capability, str) and capability):
        raise CatalogueError(f"{where}: capability {capability!r} is not a name")
    if row["level"] == "MAY" and capability is None:
        # A MAY criterion is optional: without a capability it could never be UNSUPPORTED.
        raise CatalogueError(f"{where}: a MAY criterion needs a capability")
    dialects = row.get("dialects", list(DIALECTS))
    if (
        not isinstance(dialects, list)
        or not dialects
        or not set(dialects) <= set(DIALECTS)
        or len(set(dialects)) != len(dialects)
    ):
        raise CatalogueError(f"{where}: dialects {dialects!r} are not distinct names of {DIALECTS}")
    numbers = row.get("numbers", {})
    if not isinstance(numbers, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
        for k, v in numbers.items()
    ):
        raise CatalogueError(f"{where}: numbers {numbers!r} are not a mapping of name to number")
    config_keys = row.get("config_keys", [])
    if not isinstance(config_keys, list) or not all(isinstance(k, str) for k in config_keys):
        raise CatalogueError(f"{where}: config_keys {config_keys!r} is not a list of names")
    for flag in ("timing", "beyond_seeds"):
        if not isinstance(row.get(flag, False), bool):
            raise CatalogueError(f"{where}: {flag} {row[flag]!r} is not true or false")
    criterion = Criterion(
        id=cid,
        level=row["level"],
        area=area,
        title=row["title"],
        text=row["text"],
        source=row["source"],
        capability=capability,
        dialects=tuple(dialects),
        beyond_seeds=bool(row.get("beyond_seeds", False)),
        config_keys=tuple(config_keys),
    )
    return criterion, MappingProxyType(dict(numbers))


def _load() -> tuple[dict[str, str], tuple[Criterion, ...]]:
    """Read every area file, in catalogue order."""
    folder = resources.files("conformance").joinpath("criteria")
    present = {p.name for p in folder.iterdir() if p.name.endswith(".yaml")}
    expected = {f"{a.lower()}.yaml" for a in _AREA_ORDER}
    if present != expected:
        raise CatalogueError(
            f"conformance/criteria/: files {sorted(present - expected)} are not areas of "
            f"_AREA_ORDER, files {sorted(expected - present)} are missing"
        )
    areas: dict[str, str] = {}
    rows: list[Criterion] = []
    for area in _AREA_ORDER:
        name = f"conformance/criteria/{area.lower()}.yaml"
        text = folder.joinpath(f"{area.lower()}.yaml").read_text(encoding="utf-8")
        doc = yaml.load(text, Loader=FAST_LOADER)
        if not isinstance(doc, dict) or set(doc) != {"area", "name", "criteria"}:
            raise CatalogueError(f"{name}: the file holds exactly area, name and criteria")
        if doc["area"] != area or not isinstance(doc["name"], str):
            raise CatalogueError(f"{name}: area {doc['area']!r} is not {area!r}, or has no name")
        if not isinstance(doc["criteria"], list) or not doc["criteria"]:
            raise CatalogueError(f"{name}: criteria is not a non-empty list of rows")
        areas[area] = doc["name"]
        for n, row in enumerate(doc["criteria"], 1):
            cid = row.get("id") if isinstance(row, dict) else None
            criterion, numbers = _criterion(area, row, f"{name}, row {n} ({cid or 'no id'})")
            rows.append(criterion)
            if numbers:
                _NUMBERS[criterion.id] = numbers
            if row.get("timing"):
                _TIMING.add(criterion.id)
    seen: set[str] = set()
    for c in rows:
        if c.id in seen:
            raise CatalogueError(f"conformance/criteria/: {c.id} is defined twice")
        seen.add(c.id)
    return areas, tuple(rows)


AREAS: dict[str, str]
CATALOGUE: tuple[Criterion, ...]
AREAS, CATALOGUE = _load()

_BY_ID: dict[str, Criterion] = {c.id: c for c in CATALOGUE}


def by_id(criterion_id: str) -> Criterion:
    """The criterion with that ID; KeyError naming the ID when unknown."""
    try:
        return _BY_ID[criterion_id]
    except KeyError:
        raise KeyError(f"unknown criterion id: {criterion_id!r}") from None
