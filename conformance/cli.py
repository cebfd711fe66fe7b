"""The ``conformance`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from conformance import __version__

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Fault-injection conformance suite for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"conformance {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    lst = sub.add_parser(
        "list",
        help="print the criteria catalogue",
        description="Print the criteria catalogue: ID, level, title, and the scenarios "
        "that exercise each criterion.",
    )
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.add_argument(
        "--scenarios",
        type=Path,
        default=None,
        help="scenario directory to index (default: the bundled scenarios)",
    )
    rep = sub.add_parser(
        "report",
        help="render saved results into HTML, JUnit XML and Markdown",
        description="Render one or more results JSON files (several: agents side by side).",
        add_help=False,
    )
    rep.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _scenarios_by_criterion(directory: Path) -> dict[str, list[str]]:
    """Index scenario ids by the criteria they name (the files' own `criteria` lists)."""
    index: dict[str, list[str]] = defaultdict(list)
    for path in sorted(directory.rglob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise SystemExit(f"conformance: {path}: not valid YAML: {exc}") from exc
        if not isinstance(doc, dict):
            continue
        for cid in doc.get("criteria") or []:
            index[str(cid)].append(str(doc.get("id", path.stem)))
    return index


def _cmd_list(args: argparse.Namespace) -> int:
    from conformance.catalogue import CATALOGUE
    from scenarios import SCENARIO_DIR

    index = _scenarios_by_criterion(args.scenarios or SCENARIO_DIR)
    rows = [
        {
            "id": c.id,
            "level": c.level,
            "area": c.area,
            "title": c.title,
            "source": c.source,
            "capability": c.capability,
            "scenarios": index.get(c.id, []),
        }
        for c in CATALOGUE
    ]
    if args.json:
        json.dump(rows, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return 0
    for row in rows:
        n = len(row["scenarios"])
        print(f"{row['id']:<8} {row['level']:<6} {row['title']}  [{n} scenario{'s' * (n != 1)}]")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        return _cmd_list(args)
    if args.command == "report":
        # One implementation of the report CLI: the reports package's own.
        from reports.cli import main as report_main

        return report_main(args.rest)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
