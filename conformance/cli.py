"""The ``conformance`` command line."""

from __future__ import annotations

import argparse
import json
import shlex
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
    run = sub.add_parser(
        "run",
        help="run an agent over the scenarios and judge every criterion",
        description="Run an agent against the scenarios on a local fake gateway and give a "
        "verdict per criterion. With no arguments: every bundled scenario against the "
        "reference agent. Exit status: 0 when no criterion is FAIL, ERROR or TIMEOUT "
        "(nor NON-STRICT with --strict), 1 otherwise, 2 for bad input, 130 when interrupted.",
    )
    run.add_argument(
        "--agent",
        default="reference",
        help="'reference' (in-process) or 'cmd:COMMAND' (a command speaking the adapter "
        "protocol); default: reference",
    )
    run.add_argument(
        "--scenario",
        action="append",
        type=Path,
        default=None,
        help="a scenario file or directory (repeatable; default: the bundled criteria scenarios)",
    )
    run.add_argument("--report-dir", type=Path, default=Path("conformance-report"))
    run.add_argument("--results", type=Path, default=None, help="write the results JSON here")
    run.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="multiply every scenario duration by this (default 0.02)",
    )
    run.add_argument("--strict", action="store_true", help="NON-STRICT verdicts fail the run")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

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


FAILING = {"FAIL", "ERROR", "TIMEOUT"}


def _cmd_run(args: argparse.Namespace, words: list[str]) -> int:
    import signal
    import threading
    import time

    from conformance.adapters.base import make_adapter
    from conformance.runner import DEFAULT_TIME_SCALE, results_document, run_suite
    from fakes import FakesError, Gateway, load_scenarios
    from reports import render
    from scenarios import SCENARIO_DIR

    scale = args.time_scale if args.time_scale is not None else DEFAULT_TIME_SCALE
    if not 0 < scale <= 1:
        print(f"conformance: --time-scale must be in (0, 1], got {scale}", file=sys.stderr)
        return 2
    try:
        scenarios = []
        for path in args.scenario or [SCENARIO_DIR / "criteria"]:
            if not path.exists():
                raise FakesError(f"{path}: no such scenario file or directory")
            scenarios += load_scenarios(path)
        adapter = make_adapter(args.agent)
    except (FakesError, ValueError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    if not scenarios:
        print("conformance: no scenarios found", file=sys.stderr)
        return 2

    def on_term(signum, frame):  # SIGTERM is handled like Ctrl-C: keep what ran
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    stop = threading.Event()
    started = time.time()
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        with Gateway.running() as gw:
            agent = run_suite(
                gw, adapter, scenarios, time_scale=scale, progress=progress, stop=stop
            )
    finally:
        signal.signal(signal.SIGTERM, previous)
    # The words this run was given, not the host process's argv (main may run in-process).
    command = "conformance " + shlex.join(words)
    doc = results_document(
        [agent], started=started, time_scale=scale, interrupted=stop.is_set(), command=command
    )
    if args.results:
        tmp = args.results.with_name(args.results.name + ".tmp")
        tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(args.results)  # atomic: a reader never sees half a file
    index = render([doc], args.report_dir)
    verdicts = [c["verdict"] for c in agent["criteria"].values()]
    counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
    print(", ".join(f"{n} {v}" for v, n in counts.items()) + f"; report: {index}")
    if stop.is_set():
        return 130
    failing = FAILING | ({"NON-STRICT"} if args.strict else set())
    return 1 if failing & set(verdicts) else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        return _cmd_list(args)
    if args.command == "run":
        return _cmd_run(args, list(sys.argv[1:] if argv is None else argv))
    if args.command == "report":
        # One implementation of the report CLI: the reports package's own.
        from reports.cli import main as report_main

        return report_main(args.rest)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
