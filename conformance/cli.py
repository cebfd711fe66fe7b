"""The ``conformance`` command line."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from conformance import __version__

__all__ = ["main", "build_parser"]

DEFAULT_EXPECTATIONS = Path("conformance-expectations.yaml")
_NO_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


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
        "reference agent. With -n N (N > 1) or -k the run goes through pytest and "
        "pytest-xdist: same judging, same results and report.",
        epilog="exit status: 0 no regression (no criterion FAIL, ERROR or TIMEOUT, nor "
        "NON-STRICT with --strict, unless the expectations file expects it); 1 a regression; "
        "2 usage error or bad input (scenario, agent, expectations file); 130 interrupted "
        "(SIGINT or SIGTERM: the results and report then hold the scenarios that ran).",
    )
    from conformance.adapters.registry import agents_help

    run.add_argument(
        "--agent",
        default="reference",
        help=agents_help() + "; default: reference",
    )
    run.add_argument(
        "--scenario",
        action="append",
        type=Path,
        default=None,
        help="a scenario file or directory (repeatable; default: the bundled criteria scenarios)",
    )
    run.add_argument(
        "--dialect",
        choices=("openai_chat", "anthropic_messages", "openai_responses"),
        default="openai_chat",
        help="the wire dialect the agent is served in (the start message carries it; an agent "
        "that does not declare dialect:<name> is UNSUPPORTED); default: openai_chat",
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
    run.add_argument(
        "--certify",
        action="store_true",
        help="certification mode: the run fails (exit 1) when a guarded agent "
        "(shipped:PROFILE) tried an outside connection, or when a MUST criterion that applies "
        "was judged by no scenario (not run, only n/a, ERROR or TIMEOUT)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.add_argument(
        "-n",
        dest="processes",
        type=int,
        default=1,
        metavar="N",
        help="run scenarios in N processes (pytest-xdist); default 1",
    )
    run.add_argument(
        "-k",
        dest="keyword",
        default=None,
        metavar="EXPR",
        help="only scenarios whose name '<scenario-id>[<agent>]' matches this pytest -k expression",
    )
    run.add_argument(
        "--expectations",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML list of expected verdicts (criterion, verdict, reason, optional agent); "
        "only verdicts worse than expected fail the run",
    )
    run.add_argument(
        "--update-expectations",
        action="store_true",
        help="write the expectations file (--expectations, default "
        f"{DEFAULT_EXPECTATIONS}) from this run, keeping existing reasons",
    )
    run.add_argument(
        "--junit", type=Path, default=None, metavar="FILE", help="also write the JUnit XML here"
    )

    rep = sub.add_parser(
        "report",
        help="render saved results into HTML, JUnit XML and Markdown",
        description="Render one or more results JSON files (several: agents side by side).",
        add_help=False,
    )
    rep.add_argument("rest", nargs=argparse.REMAINDER)

    sub.add_parser(
        "probe",
        help="probe a live gateway's habits before onboarding it (HTML + JSON report)",
        description="Bounded probe requests; see `conformance probe --help`.",
        add_help=False,
    ).add_argument("rest", nargs=argparse.REMAINDER)

    fz = sub.add_parser(
        "fuzz",
        help="search fault schedules for one that breaks an agent, shrink it, save it",
        description="Hypothesis-generated fault schedules; see `conformance fuzz --help`.",
        add_help=False,
    )
    fz.add_argument("rest", nargs=argparse.REMAINDER)
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
            "dialects": list(c.dialects),
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


def _run_via_pytest(
    args: argparse.Namespace, files: list[Path], scale: float, command: str, tmp: Path
) -> dict | None:
    """Run the scenarios through pytest and the conformance plugin; return the results doc.

    The plugin judges exactly as ``run_suite`` does (both call ``runner.run_scenario``); this
    path adds pytest's -k selection and pytest-xdist's processes.
    """
    import pytest

    ini = tmp / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")  # the user's pytest config does not apply
    results = tmp / "results.json"
    words = [*map(str, files)]
    # Test ids relative to the scenarios' common directory, wherever they are installed.
    root = os.path.commonpath([str(f.resolve().parent) for f in files])
    words += ["-c", str(ini), "--rootdir", root, "--noconftest"]
    # Only the plugins this run needs, loaded once each: no third-party plugin autoloading
    # (the user's pytest plugins and settings are not part of a conformance run).
    words += ["-p", "no:cacheprovider", "-p", "no:terminal", "-p", "conformance.plugin"]
    words += ["--conformance", "--conformance-agent", args.agent]
    words += ["--conformance-time-scale", repr(scale), "--conformance-results", str(results)]
    words += ["--conformance-command", command, "--conformance-dialect", args.dialect]
    if args.strict:
        words.append("--conformance-strict")
    if args.expectations and args.expectations.exists() and not args.update_expectations:
        words += ["--conformance-expectations", str(args.expectations)]
    if not args.quiet:
        words.append("--conformance-progress")
    if args.keyword:
        words += ["-k", args.keyword]
    if args.processes > 1:
        words += ["-p", "xdist.plugin", "-n", str(args.processes)]
    saved = os.environ.get(_NO_AUTOLOAD)
    os.environ[_NO_AUTOLOAD] = "1"  # inherited by the xdist workers
    try:
        rc = pytest.main(words)
    finally:
        if saved is None:
            os.environ.pop(_NO_AUTOLOAD, None)
        else:
            os.environ[_NO_AUTOLOAD] = saved
    if not results.exists():
        print(
            f"conformance: the pytest run ended without results (exit {int(rc)})", file=sys.stderr
        )
        return None
    return json.loads(results.read_text(encoding="utf-8"))


def _cmd_run(args: argparse.Namespace, words: list[str]) -> int:
    import shutil
    import signal
    import tempfile
    import threading
    import time

    from conformance.adapters.base import make_adapter
    from conformance.expectations import (
        Expectations,
        ExpectationsError,
        compare_results,
        load_expectations,
        updated_expectations,
        write_expectations,
    )
    from conformance.guard import certify_problems
    from conformance.runner import (
        DEFAULT_TIME_SCALE,
        rerun_command,
        results_document,
        run_suite,
    )
    from fakes import FakesError, Gateway, load_scenarios
    from reports import render
    from scenarios import SCENARIO_DIR

    scale = args.time_scale if args.time_scale is not None else DEFAULT_TIME_SCALE
    if not 0 < scale <= 1:
        print(f"conformance: --time-scale must be in (0, 1], got {scale}", file=sys.stderr)
        return 2
    if args.processes < 1:
        print(f"conformance: -n must be at least 1, got {args.processes}", file=sys.stderr)
        return 2
    exp_path = args.expectations
    if args.update_expectations and exp_path is None:
        exp_path = args.expectations = DEFAULT_EXPECTATIONS
    try:
        if exp_path is not None and (exp_path.exists() or not args.update_expectations):
            expectations = load_expectations(exp_path)
        else:
            expectations = Expectations([], str(exp_path or ""))
    except ExpectationsError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    try:
        scenarios = []
        for path in args.scenario or [SCENARIO_DIR / "criteria"]:
            if not path.exists():
                raise FakesError(f"{path}: no such scenario file or directory")
            scenarios += load_scenarios(path)
        adapter = make_adapter(args.agent)
        adapter.capabilities()  # a command agent that cannot say hello is bad input, not a run
    except (FakesError, ValueError, RuntimeError) as exc:
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
    # The words this run was given, not the host process's argv (main may run in-process).
    command = "conformance " + shlex.join(words)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        if args.processes > 1 or args.keyword:
            with tempfile.TemporaryDirectory(prefix="conformance-run-") as tmp:
                files = [Path(s.source) for s in scenarios]
                found = _run_via_pytest(args, files, scale, command, Path(tmp))
            if found is None:
                return 2
            doc = found
            if doc["run"]["interrupted"]:
                stop.set()
        else:
            with Gateway.running() as gw:
                agent = run_suite(
                    gw,
                    adapter,
                    scenarios,
                    time_scale=scale,
                    rerun=lambda s: rerun_command(s, args.agent, args.dialect),
                    progress=progress,
                    stop=stop,
                    dialect=args.dialect,
                )
            doc = results_document(
                [agent],
                started=started,
                time_scale=scale,
                interrupted=stop.is_set(),
                command=command,
                dialect=args.dialect,
            )
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.results:
        tmp = args.results.with_name(args.results.name + ".tmp")
        tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(args.results)  # atomic: a reader never sees half a file
    if not doc["agents"]:
        print("conformance: no scenario ran (none selected?)", file=sys.stderr)
        return 130 if stop.is_set() else 2
    index = render([doc], args.report_dir)
    if args.junit:
        shutil.copyfile(index.parent / "junit.xml", args.junit)
    verdicts = [c["verdict"] for a in doc["agents"] for c in a["criteria"].values()]
    counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
    print(", ".join(f"{n} {v}" for v, n in counts.items()) + f"; report: {index}")
    if stop.is_set():
        if args.update_expectations:
            print("conformance: interrupted, expectations not updated", file=sys.stderr)
        return 130
    if args.update_expectations:
        write_expectations(exp_path, updated_expectations(doc, expectations, strict=args.strict))
        print(f"expectations: wrote {exp_path}")
        return 0
    cmp = compare_results(doc, expectations, strict=args.strict)
    for f in cmp.fixed:
        print(f"better than expected: {f.describe()}", file=sys.stderr)
    for f in cmp.regressions:
        print(f"regression: {f.describe()}", file=sys.stderr)
    leaks = certify_problems(doc) + _unjudged_musts(doc) if args.certify else []
    for line in leaks:
        print(f"certify: {line}", file=sys.stderr)
    return 1 if cmp.regressions or leaks else 0


def _unjudged_musts(doc: dict) -> list[str]:
    """Certification lines for MUST criteria no scenario judged (UNSUPPORTED is reported apart:
    the report counts it; a certificate states it)."""
    from reports.model import build_report

    report = build_report([doc])
    lines = []
    for agent in report.agents:
        unjudged = report.must_unjudged(agent)
        if unjudged:
            lines.append(
                f"{agent.name}: {len(unjudged)} MUST criteria judged by no scenario "
                f"(not run, only n/a, ERROR or TIMEOUT): {', '.join(unjudged)}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["fuzz"]:
        # Its options are its own: hand them over untouched (argparse would claim --help).
        from conformance.fuzz import main as fuzz_main

        return fuzz_main(words[1:])
    if words[:1] == ["probe"]:
        from conformance.probe import main as probe_main

        return probe_main(words[1:])
    if words[:1] == ["report"]:
        # One implementation of the report CLI: the reports package's own.
        from reports.cli import main as report_main

        return report_main(words[1:])
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
