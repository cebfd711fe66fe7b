"""``python -m reports RESULTS... --out DIR``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from reports.errors import ResultsError
from reports.render import render
from reports.schema import validate_results

__all__ = ["load_results", "main"]


def load_results(path: Path) -> dict:
    """Read and validate one results file; ResultsError names the file on any problem."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not valid JSON: {exc}") from exc
    validate_results(doc, source=str(path))
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    """Render a report; exit 0 on success, 2 on bad input."""
    p = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    p.add_argument("results", nargs="+", type=Path, help="results JSON file(s)")
    p.add_argument("--out", required=True, type=Path, help="output directory (replaced)")
    p.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="VAR",
        help="environment variable whose value must be redacted (repeatable)",
    )
    args = p.parse_args(argv)
    secrets = [os.environ[v] for v in args.secret_env if os.environ.get(v)]
    try:
        docs = [load_results(path) for path in args.results]
        index = render(docs, args.out, secrets=secrets)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(index)
    return 0
