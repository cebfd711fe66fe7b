"""``python -m reports RESULTS... --out DIR``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.errors import ResultsError
from reports.html import catalogue_versions
from reports.merge import merge_shards
from reports.render import render
from reports.schema import validate_results

__all__ = ["build_parser", "load_results", "main", "run"]


def load_results(path: Path) -> dict[str, Any]:
    """Read and validate one results file; ResultsError names the file on any problem."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not valid JSON: {exc}") from exc
    validate_results(doc, source=str(path))
    results: dict[str, Any] = doc  # the schema's top level is an object
    return results


def build_parser(prog: str = "python -m reports") -> argparse.ArgumentParser:
    """The report command line (``conformance report`` adds its own options to it)."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Render results JSON files into HTML, JUnit XML and Markdown. Several "
        "files: agents side by side; the shards of one run (conformance run --shard K/N) are "
        "merged into that run.",
    )
    p.add_argument("results", nargs="+", type=Path, help="results JSON file(s)")
    p.add_argument("--out", required=True, type=Path, help="output directory (replaced)")
    p.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="VAR",
        help="environment variable whose value must be redacted (repeatable)",
    )
    return p


def run(args: argparse.Namespace) -> tuple[int, list[dict[str, Any]]]:
    """Render the report ``args`` ask for; return the exit status (0 rendered, 2 bad input)
    and the results documents rendered, shards merged."""
    secrets = [os.environ[v] for v in args.secret_env if os.environ.get(v)]
    try:
        docs = merge_shards(
            [load_results(path) for path in args.results], [str(p) for p in args.results]
        )
        index = render(docs, args.out, secrets=secrets, validated=True)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, []
    versions = catalogue_versions([d["run"] for d in docs])
    if len(versions) > 1:
        print(
            "warning: these results were judged by different catalogue releases "
            f"({', '.join(versions)}): a verdict may differ between them by the rules alone",
            file=sys.stderr,
        )
    print(index)
    return 0, docs


def main(argv: Sequence[str] | None = None) -> int:
    """Render a report; exit 0 on success, 2 on bad input."""
    return run(build_parser().parse_args(argv))[0]
