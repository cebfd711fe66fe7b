"""The options of a run: one table, spelled for ``conformance run`` and for the pytest plugin.

Theory of operation: each field of :class:`RunSettings` is one option, declared once with its
type, default and help, and with how each front end spells it (``cli``: ``conformance run``'s
argparse flags; ``plugin``: the pytest plugin's ``--conformance-...`` flags; ``None`` where a
front end has no such option, e.g. ``-n`` is pytest's own). :func:`add_cli_arguments` and
:func:`add_pytest_options` generate both parsers from the table; :func:`settings_from_cli` and
:func:`settings_from_pytest` read either command line back into the same settings, and
:func:`plugin_words` writes settings as plugin flags (how ``conformance run -n N`` hands a run to
pytest-xdist's workers). A new option is one field here; what it does belongs to
``conformance/session.py``.

This module is imported whenever pytest loads the plugin, so it imports nothing heavy.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from conformance.catalogue import DIALECTS

__all__ = [
    "DEFAULT_EXPECTATIONS",
    "Flag",
    "RUN_OPTIONS",
    "RunOption",
    "RunSettings",
    "add_cli_arguments",
    "flag",
    "add_pytest_options",
    "parse_shard",
    "plugin_words",
    "settings_from_cli",
    "settings_from_pytest",
]

DEFAULT_EXPECTATIONS = Path("conformance-expectations.yaml")

Front = Literal["cli", "plugin"]
_INHERIT: Any = object()  # a Flag's default: what its action implies
_KEY = "conformance.option"  # where a RunSettings field keeps its RunOption


@dataclass(frozen=True)
class Flag:
    """How one front end spells an option: its flag names and what differs there."""

    names: tuple[str, ...]
    help: str | None = None  # None: the option's own help
    action: str | None = None  # None: the option's own action
    default: Any = _INHERIT  # the value when the flag is absent; by default the setting's
    # default (None for a repeatable flag), False for store_true, True for store_false
    own: bool = False  # the front end declares this flag itself (see conformance/cli.py)


def flag(*names: str, **spelling: Any) -> Flag:
    """A front end's spelling of an option: ``flag("-q", "--quiet", action="store_false")``."""
    return Flag(names, **spelling)


@dataclass(frozen=True)
class RunOption:
    """One row of the table: a setting and its spellings."""

    name: str
    help: str
    default: Any
    action: str = "store"  # argparse's: store, store_true, store_false, append
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    many: bool = False  # the setting is a tuple: a repeatable flag, or one value as a 1-tuple
    cli: Flag | None = None
    plugin: Flag | None = None

    def spelling(self, front: Front) -> Flag | None:
        return self.cli if front == "cli" else self.plugin


def _option(default: Any, help: str, **row: Any) -> Any:
    """A RunSettings field that is an option (its name is the field's)."""
    return field(default=default, metadata={_KEY: RunOption("", help, default, **row)})


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N, as (K, N); argparse reports the error with the flag."""
    k, sep, n = text.partition("/")
    try:
        shard = (int(k), int(n)) if sep else None
    except ValueError:
        shard = None
    if shard is None or not 1 <= shard[0] <= shard[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return shard


@dataclass(frozen=True)
class RunSettings:
    """What one run is asked to do, whichever front end was asked."""

    # --conformance: the plugin stays inert without it (or --conformance-agent).
    active: bool = _option(
        False,
        "collect scenario YAML files (default: the bundled criteria scenarios) as tests",
        action="store_true",
        plugin=flag("--conformance"),
    )
    agent: tuple[str, ...] = _option(
        ("reference",),
        "agent under test: 'reference', 'openai-sdk' or 'cmd:COMMAND' "
        "(repeatable: one item per scenario and agent; default: reference)",
        many=True,
        metavar="SPEC",
        # Its help names the agents the adapter registry knows; cli.py declares it there.
        cli=flag("--agent", own=True),
        plugin=flag("--conformance-agent", action="append"),
    )
    scenario: tuple[Path, ...] = _option(
        (),
        "a scenario file or directory (repeatable; default: the bundled criteria scenarios)",
        many=True,
        type=Path,
        action="append",
        cli=flag("--scenario"),  # under pytest, scenarios are the paths it is given
    )
    dialect: str = _option(
        "openai_chat",
        "the wire dialect the agents are served in (the start message carries it; an agent "
        "that does not declare dialect:<name> is UNSUPPORTED); default: openai_chat",
        choices=DIALECTS,
        cli=flag("--dialect"),
        plugin=flag("--conformance-dialect"),
    )
    tool_transport: str = _option(
        "http",
        "how the agents reach the hosted tools: http (POST {tool_endpoint}/NAME) or mcp (the "
        "session's MCP server; an agent that does not declare mcp_tools is UNSUPPORTED); "
        "default: http",
        choices=("http", "mcp"),
        cli=flag("--tool-transport"),
        plugin=flag("--conformance-tool-transport"),
    )
    report_dir: Path | None = _option(
        None,
        "write the HTML, JUnit and Markdown report here",
        type=Path,
        metavar="DIR",
        cli=flag(
            "--report-dir",
            default=Path("conformance-report"),
            help="write the HTML, JUnit and Markdown report here (default: conformance-report)",
        ),
        plugin=flag("--conformance-report-dir"),
    )
    results: Path | None = _option(
        None,
        "write the results JSON here",
        type=Path,
        metavar="FILE",
        cli=flag("--results"),
        plugin=flag("--conformance-results"),
    )
    bundle: Path | None = _option(
        None,
        "write a certificate bundle here: one zip file with the results (every scenario's "
        "evidence with its sha256), the catalogue release and the digest of its rules, the "
        "run's timing allowances and the agents' identity; `conformance rejudge FILE` checks it",
        type=Path,
        metavar="FILE",
        cli=flag("--bundle"),
        plugin=flag("--conformance-bundle"),
    )
    time_scale: float | None = _option(
        None,  # the runner's default
        "multiply every scenario duration by S, in (0, 1] (default 0.02)",
        type=float,
        metavar="S",
        cli=flag("--time-scale"),
        plugin=flag("--conformance-time-scale"),
    )
    strict: bool = _option(
        False,
        "NON-STRICT verdicts fail the run",
        action="store_true",
        cli=flag("--strict"),
        plugin=flag("--conformance-strict", help="NON-STRICT verdicts fail their scenario"),
    )
    certify: bool = _option(
        False,
        "certification mode: the run fails (exit 1) when a guarded agent (shipped:PROFILE) "
        "tried an outside connection, or when a MUST criterion that applies was judged by no "
        "scenario (not run, only n/a, ERROR or TIMEOUT)",
        action="store_true",
        cli=flag("--certify"),
    )
    progress: bool = _option(
        False,  # under pytest, pytest's own output
        "no progress lines",
        cli=flag("-q", "--quiet", action="store_false"),
    )
    processes: int = _option(
        1,
        "run scenarios in N processes (pytest-xdist); default 1",
        type=int,
        metavar="N",
        cli=flag("-n"),  # under pytest, pytest-xdist's own -n
    )
    verify: int | None = _option(
        None,  # no rerun
        "rerun a scenario whose timing verdict (a wait, a silence) came out FAIL or NON-STRICT "
        "up to N times: a failing verdict stands only when it reproduces, one that differs "
        "between runs is reported flaky with every run's evidence; default 0 (no rerun)",
        type=int,
        metavar="N",
        cli=flag("--verify"),
        plugin=flag("--conformance-verify"),
    )
    recalibrate: bool = _option(
        False,
        "calibrate a shipped agent's fast clock anew rather than take the calibration an "
        "earlier run of the same agent kept on this machine (kept for 7 days)",
        action="store_true",
        cli=flag("--recalibrate"),
        plugin=flag("--conformance-recalibrate"),
    )
    repeat: int | None = _option(
        None,  # one run
        "run every scenario N times (spread over -n processes): a criterion whose runs all "
        "agree keeps their verdict, one whose runs disagree is UNSTABLE with how many of the N "
        "passed; default 1",
        type=int,
        metavar="N",
        cli=flag("--repeat"),
        plugin=flag("--conformance-repeat"),
    )
    keyword: str | None = _option(
        None,
        "only scenarios whose name '<scenario-id>[<agent>]' matches this pytest -k expression",
        metavar="EXPR",
        cli=flag("-k"),  # under pytest, pytest's own -k
    )
    expectations: Path | None = _option(
        None,
        "YAML list of expected verdicts (criterion, verdict, reason, optional agent); only "
        "verdicts worse than expected fail the run",
        type=Path,
        metavar="FILE",
        cli=flag("--expectations"),
        plugin=flag("--conformance-expectations"),
    )
    update_expectations: bool = _option(
        False,
        f"write the expectations file (--expectations, default {DEFAULT_EXPECTATIONS}) from "
        "this run, keeping existing reasons",
        action="store_true",
        cli=flag("--update-expectations"),
    )
    shard: tuple[int, int] | None = _option(
        None,
        "run only part K of N of the selected scenarios: the scenarios sorted by id, every N-th "
        "from the K-th; `conformance report` merges the parts' results into the whole run's",
        type=parse_shard,
        metavar="K/N",
        cli=flag("--shard"),  # under pytest, the paths it is given are the selection
    )
    junit: Path | None = _option(
        None,
        "also write the JUnit XML here",
        type=Path,
        metavar="FILE",
        cli=flag("--junit"),  # under pytest, pytest's own --junitxml
    )

    # Not an option: whose flags the messages name.
    front: Front = "cli"

    def flag_of(self, name: str) -> str:
        """The flag that sets ``name`` on this front end's command line (for messages)."""
        opt = _BY_NAME[name]
        spelled = opt.spelling(self.front) or opt.cli or opt.plugin
        return spelled.names[0] if spelled else name


RUN_OPTIONS: tuple[RunOption, ...] = tuple(
    dataclasses.replace(f.metadata[_KEY], name=f.name)
    for f in fields(RunSettings)
    if _KEY in f.metadata
)
_BY_NAME = {opt.name: opt for opt in RUN_OPTIONS}


def _pytest_dest(spelled: Flag) -> str:
    """The attribute pytest stores a flag under (as its parser names it)."""
    long = next(n for n in spelled.names if n.startswith("--"))
    return long[2:].replace("-", "_")


def _argparse_kwargs(opt: RunOption, spelled: Flag) -> dict[str, Any]:
    action = spelled.action or opt.action
    kwargs: dict[str, Any] = {"action": action, "help": spelled.help or opt.help}
    if spelled.default is not _INHERIT:
        kwargs["default"] = spelled.default
    elif action in ("store_true", "store_false"):
        kwargs["default"] = action == "store_false"
    else:  # argparse appends to a default list: a repeatable flag starts from None
        kwargs["default"] = None if opt.many else opt.default
    if action in ("store", "append"):
        for key in ("type", "choices", "metavar"):
            if getattr(opt, key) is not None:
                kwargs[key] = getattr(opt, key)
    return kwargs


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare every option ``conformance run`` spells (and does not declare itself)."""
    for opt in RUN_OPTIONS:
        if opt.cli is not None and not opt.cli.own:
            parser.add_argument(*opt.cli.names, dest=opt.name, **_argparse_kwargs(opt, opt.cli))


def add_pytest_options(group: Any) -> None:
    """Declare every option the plugin spells, in a pytest option group."""
    for opt in RUN_OPTIONS:
        if opt.plugin is not None:
            group.addoption(*opt.plugin.names, **_argparse_kwargs(opt, opt.plugin))


def _settings(front: Front, read: Callable[[RunOption, Flag], Any]) -> RunSettings:
    values: dict[str, Any] = {}
    for opt in RUN_OPTIONS:
        spelled = opt.spelling(front)
        if spelled is None:
            continue
        value = read(opt, spelled)
        if value is None:
            continue  # absent: the setting's default
        if opt.many:
            value = tuple(value) if isinstance(value, list | tuple) else (value,)
        values[opt.name] = value
    return RunSettings(front=front, **values)


def settings_from_cli(args: argparse.Namespace) -> RunSettings:
    """The settings of a parsed ``conformance run`` command line."""
    return _settings("cli", lambda opt, _: getattr(args, opt.name))


def settings_from_pytest(config: Any) -> RunSettings:
    """The settings of a pytest command line (``config``: a ``pytest.Config``)."""
    return _settings("plugin", lambda _, spelled: config.getoption(_pytest_dest(spelled)))


def plugin_words(settings: RunSettings) -> list[str]:
    """The plugin flags that give a pytest process ``settings`` (where the plugin has them)."""
    words: list[str] = []
    for opt in RUN_OPTIONS:
        if opt.plugin is None:
            continue
        value = getattr(settings, opt.name)
        name = opt.plugin.names[0]
        action = opt.plugin.action or opt.action
        if action in ("store_true", "store_false"):
            words += [name] if value == (action == "store_true") else []
        elif value is not None:
            values: Iterable[Any] = value if opt.many else (value,)
            for one in values:
                words += [name, str(one)]
    return words
