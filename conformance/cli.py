"""The ``conformance`` command line."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import yaml

from conformance import __version__
from conformance.options import add_cli_arguments, settings_from_cli

__all__ = ["main", "build_parser"]


# Commands whose options are their own module's (hand over the rest untouched): name, help.
_HANDED_OVER = (
    ("report", "render saved results into HTML, JUnit XML and Markdown"),
    ("probe", "probe a live gateway's habits before onboarding it (HTML + JSON report)"),
    ("fuzz", "search fault schedules for one that breaks an agent, shrink it, save it"),
    ("rejudge", "derive saved results' verdicts again from their evidence, running no agent"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Fault-injection conformance suite for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"conformance {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_list(sub)
    _add_run(sub)
    for name, what in _HANDED_OVER:
        sub.add_parser(
            name, help=what, description=f"See `conformance {name} --help`.", add_help=False
        ).add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _add_list(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lst = sub.add_parser(
        "list",
        help="print the criteria catalogue",
        description="Print the criteria catalogue: ID, level, title, and the scenarios "
        "that exercise each criterion.",
    )
    fmt = lst.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="machine-readable output")
    pages = (
        ("--markdown", "the catalogue as the Markdown page docs/criteria.md", "docs/criteria.md"),
        (
            "--changelog",
            "the catalogue's releases and their rule changes, as CHANGELOG.md",
            "CHANGELOG.md",
        ),
        (
            "--judged-on",
            "what an agent is judged on, for its author: the Markdown page docs/judged-on.md",
            "docs/judged-on.md",
        ),
    )
    for flag, what, page in pages:
        fmt.add_argument(
            flag, action="store_true", help=f"{what} (conformance list {flag} > {page})"
        )
    lst.add_argument(
        "--scenarios",
        type=Path,
        default=None,
        help="scenario directory to index (default: the bundled scenarios)",
    )


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    # The table's `agent` option (options.py); its help, naming the agents, comes from the
    # adapter registry.
    from conformance.adapters.registry import agents_help

    run.add_argument(
        "--agent",
        default="reference",
        help=agents_help() + "; default: reference",
    )
    add_cli_arguments(run)  # every other run option, from the table in options.py


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
    from conformance.criteria_page import as_markdown

    if args.markdown:
        sys.stdout.write(as_markdown())
        return 0
    if args.judged_on:
        from conformance.judged_page import as_markdown as judged_on

        sys.stdout.write(judged_on())
        return 0
    from conformance.release import CATALOGUE_VERSION, changelog_markdown, rules_sha256

    if args.changelog:
        sys.stdout.write(changelog_markdown())
        return 0
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
    print(f"catalogue {CATALOGUE_VERSION} (rules sha256 {rules_sha256()}): {len(rows)} criteria")
    for row in rows:
        n = len(row["scenarios"] or ())
        print(f"{row['id']:<8} {row['level']:<6} {row['title']}  [{n} scenario{'s' * (n != 1)}]")
    return 0


def _quiet_on_closed_pipe(
    command: Callable[[argparse.Namespace], int], args: argparse.Namespace
) -> int:
    """Run a command that writes to stdout; a reader that went away (`conformance list | head`)
    ends it quietly, as Unix tools do, with the status a SIGPIPE death would give."""
    try:
        status = command(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # Python would flush stdout again at exit and print a second error: point it at devnull.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


_NO_EXPECTATIONS = (
    "conformance: no expectations file, so every failing verdict below fails the run; "
    "{update} records today's verdicts as known (docs/ci.md)"
)


def _cmd_run(args: argparse.Namespace, words: list[str]) -> int:
    from conformance.session import RunInputError, RunSession, sigterm_as_interrupt

    settings = settings_from_cli(args)
    # The words this run was given, not the host process's argv (main may run in-process).
    command = "conformance " + shlex.join(words)
    try:
        session = RunSession(settings, command=command)
        scenarios = session.load_scenarios()
        session.open_agents(greet=True)
        with sigterm_as_interrupt():
            # (A part of a sharded run may hold no scenario: nothing for pytest to collect.)
            if (settings.processes > 1 or settings.keyword) and scenarios:
                # Through pytest: its -k selection and pytest-xdist's processes, same judging.
                from conformance.plugin import run_in_pytest

                interrupted = run_in_pytest(session, scenarios)
            else:
                interrupted = session.run_in_process(scenarios)
    except RunInputError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    doc = session.finish(interrupted=interrupted)
    gate = session.gate()
    if not doc["agents"]:
        print("conformance: no scenario ran (none selected?)", file=sys.stderr)
        return gate.status
    verdicts = [c["verdict"] for a in doc["agents"] for c in a["criteria"].values()]
    counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
    said = ", ".join(f"{n} {v}" for v, n in counts.items()) or "no scenario in this part"
    print(f"{said}; report: {session.report}")
    if session.interrupted:
        if settings.update_expectations:
            print("conformance: interrupted, expectations not updated", file=sys.stderr)
        return gate.status
    if gate.wrote is not None:
        print(f"expectations: wrote {gate.wrote}")
    from conformance.release import CATALOGUE_VERSION

    warning = session.expectations.release_warning(CATALOGUE_VERSION)
    if warning and gate.wrote is None:
        print(f"conformance: warning: {warning}", file=sys.stderr)
    if gate.comparison is not None:
        for f in gate.comparison.fixed:
            print(f"better than expected: {f.describe()}", file=sys.stderr)
        # Without an expectations file nothing regressed: the verdicts fail the run as they are.
        label = "regression" if session.expectations_file is not None else "failing"
        if gate.comparison.regressions and session.expectations_file is None:
            print(
                _NO_EXPECTATIONS.format(update=settings.flag_of("update_expectations")),
                file=sys.stderr,
            )
        for f in gate.comparison.regressions:
            print(f"{label}: {f.describe()}", file=sys.stderr)
    for line in gate.certify:
        print(f"certify: {line}", file=sys.stderr)
    if settings.certify:
        runs = session.repeat
        print(
            f"certify: the verdicts rest on {runs} run{'s' * (runs != 1)} of each scenario"
            + ("" if runs > 1 else " (--repeat N shows which verdicts vary between runs)"),
            file=sys.stderr,
        )
    if settings.certify and settings.shard is not None:
        print(
            "certify: one shard cannot tell which MUST criteria the run judged: certify the "
            "merged results with `conformance report --certify`",
            file=sys.stderr,
        )
    return gate.status


def _cmd_report(words: list[str]) -> int:
    """The reports package's command line, plus certification of the merged results."""
    from reports.cli import build_parser as report_parser
    from reports.cli import run as render_report

    parser = report_parser(prog="conformance report")
    parser.add_argument(
        "--certify",
        action="store_true",
        help="exit 1 when a guarded agent tried an outside connection, a shard of a run is "
        "missing, or a MUST criterion that applies was judged by no scenario (as conformance "
        "run --certify, on the merged shards)",
    )
    args = parser.parse_args(words)
    status, docs = render_report(args)
    if status or not args.certify:
        return status
    from conformance.session import EXIT_REGRESSION, certify_problems

    problems = [line for doc in docs for line in certify_problems(doc)]
    for line in problems:
        print(f"certify: {line}", file=sys.stderr)
    return EXIT_REGRESSION if problems else 0


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
        return _cmd_report(words[1:])
    if words[:1] == ["rejudge"]:
        from conformance.rejudge import main as rejudge_main

        return rejudge_main(words[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        return _quiet_on_closed_pipe(_cmd_list, args)
    if args.command == "run":
        return _cmd_run(args, list(sys.argv[1:] if argv is None else argv))
    if args.command == "report":
        return _cmd_report(args.rest)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
