"""End to end: the reference agent over real scenarios, judged from the gateway's wire."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.adapters.interface import AdapterBase, AgentTraits, RunOutcome
from conformance.adapters.reference import ReferenceAdapter
from conformance.catalogue import by_id
from conformance.cli import main
from conformance.reference import Behaviours
from conformance.runner import run_scenario
from fakes import Gateway, load_scenario
from reports import validate_results

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def test_run_writes_valid_results_and_a_report(tmp_path):
    results = tmp_path / "results.json"
    rc = main(
        [
            "run",
            "-q",
            "--scenario",
            str(CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml"),
            "--scenario",
            str(CRITERIA / "str" / "str-01-cut-mid-text-reset.yaml"),
            "--results",
            str(results),
            "--report-dir",
            str(tmp_path / "report"),
        ]
    )
    doc = json.loads(results.read_text(encoding="utf-8"))
    validate_results(doc)
    agent = doc["agents"][0]
    assert agent["criteria"]["RTY-01"]["verdict"] == "PASS"
    assert agent["criteria"]["STR-01"]["verdict"] == "PASS"
    assert rc == 0
    assert (tmp_path / "report" / "criteria" / "RTY-01.html").is_file()
    # The run's secret API key reached the gateway, yet no artifact holds any sk- key.
    for path in [results, *(tmp_path / "report").rglob("*")]:
        if path.is_file():
            assert "sk-conformance-" not in path.read_text(encoding="utf-8", errors="replace")


def test_bad_scenario_path_is_a_clear_error(capsys):
    assert main(["run", "--scenario", "no/such.yaml"]) == 2
    assert "no/such.yaml" in capsys.readouterr().err


# Broken copies of the reference agent: one behaviour off fails the criterion it serves.
BROKEN = [
    ("honour_retry_after", "rty/rty-01-retry-after-seconds.yaml", "RTY-01"),
    ("retry_after_on_time", "rty/rty-01-retry-after-seconds.yaml", "RTY-01"),
    ("backoff", "rty/rty-03-backoff-429.yaml", "RTY-03"),
    ("retry_5xx", "rty/rty-05-status-503.yaml", "RTY-05"),
    ("stream_fallback", "str/str-01-cut-mid-text-reset.yaml", "STR-01"),
    ("continuation", "trn/trn-01-length-continuation.yaml", "TRN-01"),
    ("remove_partial_messages", "str/str-02-partial-text-in-band-error.yaml", "STR-02"),
    ("reasoning_preservation", "rsn/rsn-01-reasoning-only-length.yaml", "RSN-01"),
    ("withhold_errors", "str/str-01-cut-mid-text-reset.yaml", "ERR-02"),
    ("history_repair", "ctx/ctx-03-one-of-two-unanswered.yaml", "CTX-03"),
    ("loop_detection", "tol/lop-01-same-failing-call.yaml", "LOP-01"),
    ("stop_on_abort", "ctl/ctl-01-abort-mid-stream.yaml", "CTL-01"),
    ("bound_continuations", "trn/trn-04-four-truncations.yaml", "TRN-04"),
    ("retry_connection_errors", "rty/rty-06-reset-before-headers.yaml", "RTY-06"),
    ("retry_connection_errors", "rty/rty-06-request-timeout.yaml", "RTY-06"),
    ("discard_failed_tool_calls", "str/str-03-complete-call-no-finish.yaml", "STR-03"),
    # One attempt too many is on the wire: the gateway repeats the last fault past the script.
    ("retry_budget", "rty/rty-04-eleven-failures.yaml", "RTY-04"),
    ("retry_budget", "rty/rty-05-budget-503.yaml", "RTY-05"),
    # Never giving up: the turn never ends, yet the twelfth attempt already decides RTY-04.
    ("give_up_when_exhausted", "rty/rty-04-eleven-failures.yaml", "RTY-04"),
    ("backoff_cap", "rty/rty-04-eleven-failures.yaml", "RTY-03"),
    ("fallback_after_first_cut", "str/str-01-cut-mid-text-reset.yaml", "STR-01"),
    ("fallback_after_first_cut", "str/str-07-cut-after-role-chunk.yaml", "STR-07"),
    ("strict_truncated_json", "tjs/tjs-04-dangling-key.yaml", "TJS-04"),
    ("redact_own_key", "dbg/dbg-02-echoed-key.yaml", "DBG-02"),
    ("final_client_errors", "rty/rty-07-status-404.yaml", "RTY-07"),
    ("final_client_errors", "rty/rty-07-status-400.yaml", "RTY-07"),
    ("aux_single_attempt", "rty/rty-09-background-title-429.yaml", "RTY-09"),
    # Asleep on the hour: the run is cut at its deadline, and the silence already decides.
    ("bound_retry_after", "rty/rty-14-retry-after-one-hour.yaml", "RTY-14"),
    ("should_retry_header", "rty/rty-15-should-retry-true-400.yaml", "RTY-15"),
    ("should_retry_header", "rty/rty-15-should-retry-false-503.yaml", "RTY-15"),
    ("fallback_on_overload_only", "mfb/mfb-02-404-model-not-found.yaml", "MFB-02"),
    ("fallback_on_overload_only", "mfb/mfb-02-403-model-access.yaml", "MFB-02"),
    ("overloads_before_fallback", "mfb/mfb-03-single-529.yaml", "MFB-03"),
    ("strip_private_on_fallback", "mfb/mfb-04-signature-stripped.yaml", "MFB-04"),
    ("drop_empty_turns", "rsn/rsn-03-empty-length-reply.yaml", "RSN-03"),
    ("drop_empty_turns", "rsn/rsn-03-empty-assistant-in-history.yaml", "RSN-03"),
    ("debug_dump", "dbg/dbg-01-http-400-dump.yaml", "DBG-01"),
    ("hide_continuation", "trn/trn-01-length-continuation.yaml", "TRN-02"),
    ("tool_calls_reset_count", "trn/trn-05-reset-after-two.yaml", "TRN-05"),
    ("free_tool_truncation", "trn/trn-06-tool-truncation-after-three.yaml", "TRN-06"),
    ("keep_partial_output", "trn/trn-08-cut-text-kept.yaml", "TRN-08"),
    ("one_compaction_per_turn", "ctx/ctx-02-second-overflow.yaml", "CTX-02"),
    ("training_mode_refusal", "ctx/ctx-04-training-mode-refuses.yaml", "CTX-04"),
    ("placeholder_repair", "ctx/ctx-03-one-of-two-unanswered.yaml", "CTX-03"),
    ("hook_block_final", "ctl/ctl-02-stop-hook-block.yaml", "CTL-02"),
    ("no_hook_after_error", "err/err-03-no-stop-hook-after-401.yaml", "ERR-03"),
    ("no_hook_after_error", "err/err-03-no-stop-hook-after-exhausted-429.yaml", "ERR-03"),
    ("successful_usage_only", "str/str-11-usage-in-band-error.yaml", "STR-11"),
    ("fallback_switch", "str/str-12-fallback-off.yaml", "STR-12"),
    ("finish_completes", "str/str-13-finish-without-done.yaml", "STR-13"),
    ("tool_call_log", "dbg/dbg-03-tool-call-log.yaml", "DBG-03"),
    ("typed_errors", "err/err-01-401-auth.yaml", "ERR-01"),
    ("name_recovery_tried", "err/err-04-after-model-fallback.yaml", "ERR-04"),
    ("identical_retries", "rty/rty-05-status-503.yaml", "RTY-12"),
    # It dies mid-turn: ERR-05 FAIL, every other criterion of the run an ERROR.
    ("contain_crashes", "str/str-14-malformed-event.yaml", "ERR-05"),
    # The tool layer: each copy has one classic bug of its own.
    ("reject_unknown_tools", "tol/tol-01-unknown-tool.yaml", "TOL-01"),
    # Listing every tool names the closest too: only a suggestion passes TOL-01.
    ("suggest_closest_tool", "tol/tol-01-unknown-tool.yaml", "TOL-01"),
    ("validate_arguments", "tol/tol-02-wrong-type.yaml", "TOL-02"),
    ("capture_tool_errors", "tol/tol-03-tool-raises.yaml", "TOL-03"),
    ("tool_time_limit", "tol/tol-04-tool-timeout.yaml", "TOL-04"),
    # Stopped at twice the limit it states: the hang is longer still, so only the moment tells.
    ("exact_tool_limit", "tol/tol-04-tool-timeout.yaml", "TOL-04"),
    ("keep_tool_errors_local", "tol/tol-08-failures-not-resent.yaml", "TOL-08"),
    ("recover_truncated_arguments", "tjs/tjs-02-missing-brace.yaml", "TJS-02"),
    ("refuse_unclosed_array", "tjs/tjs-03-unclosed-array.yaml", "TJS-03"),
    ("cap_tool_output", "fmt/fmt-01-large-output-cut.yaml", "FMT-01"),
    ("verbatim_tool_output", "fmt/fmt-03-short-output-verbatim.yaml", "FMT-03"),
    ("tool_call_cap", "lop/lop-03-cap-sequential.yaml", "LOP-03"),
    # Each read parsed as whole events: the spaced, cut events are lost (every dialect below).
    ("sse_across_reads", "str/str-09-rechunked-stream.yaml", "STR-09"),
]


@pytest.mark.parametrize(("switch", "scenario", "criterion"), BROKEN)
def test_broken_copy_fails_its_criterion(gateway, switch, scenario, criterion):
    sc = load_scenario(CRITERIA / scenario)
    # Ten capped backoffs take 4 s at the default scale; a smaller one keeps the test short and
    # its fixed real slack wide for a busy machine (an uncapped 64 s wait stays far outside the
    # 40 s edge, and these copies fail by their count of attempts).
    scale = 0.005 if scenario.startswith(("rty/rty-04", "rty/rty-05-budget")) else 0.02
    _, healthy = run_scenario(gateway, ReferenceAdapter(), sc, time_scale=scale)
    assert healthy[criterion]["verdict"] == "PASS", healthy[criterion]
    broken = ReferenceAdapter(Behaviours(**{switch: False}))
    _, verdicts = run_scenario(gateway, broken, sc, time_scale=scale)
    # A MUST broken is a FAIL; a SHOULD or MAY, NON-STRICT.
    failing = "FAIL" if by_id(criterion).level == "MUST" else "NON-STRICT"
    assert verdicts[criterion]["verdict"] == failing, verdicts[criterion]


def test_an_outside_agent_that_dies_mid_turn_fails_never_crash_and_nothing_else(gateway):
    import sys

    from conformance.adapters import make_adapter

    sc = load_scenario(CRITERIA / "str" / "str-14-malformed-event.yaml")
    cmd = f"cmd:{sys.executable} -m conformance.reference adapter --off contain_crashes"
    entry, verdicts = run_scenario(gateway, make_adapter(cmd), sc)
    assert entry["status"] == "error" and "exited with status 1 before turn_end" in entry["error"]
    assert verdicts["ERR-05"]["verdict"] == "FAIL"
    assert {v["verdict"] for k, v in verdicts.items() if k != "ERR-05"} == {"ERROR"}


def test_a_copy_that_exits_89_after_its_turn_is_an_error_not_unsupported(gateway):
    # Exit 89 after the wire holds evidence would hide a failure behind UNSUPPORTED (and let
    # another scenario's PASS stand for the criterion): it is an ERROR of the scenario.
    sc = load_scenario(CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml")
    entry, verdicts = run_scenario(gateway, ReferenceAdapter(Behaviours(honest_exit=False)), sc)
    assert entry["status"] == "error", entry["error"]
    assert "exit 89" in entry["error"]
    assert verdicts["RTY-01"]["verdict"] == "ERROR"


@pytest.mark.parametrize("dialect", ["anthropic_messages", "openai_responses"])
def test_a_copy_that_parses_each_read_alone_fails_str09_in_every_dialect(gateway, dialect):
    # split_events cuts each event's data: line, not the event: line before it, so a client
    # that reads only data: lines loses the payload here too.
    sc = load_scenario(CRITERIA / "str" / "str-09-rechunked-stream.yaml")
    _, healthy = run_scenario(gateway, ReferenceAdapter(), sc, dialect=dialect)
    assert healthy["STR-09"]["verdict"] == "PASS", healthy["STR-09"]
    broken = ReferenceAdapter(Behaviours(sse_across_reads=False))
    _, verdicts = run_scenario(gateway, broken, sc, dialect=dialect)
    assert verdicts["STR-09"]["verdict"] == "FAIL", verdicts["STR-09"]


@pytest.mark.parametrize(
    "scenario", ["rty/rty-01-retry-after-seconds.yaml", "str/str-01-cut-mid-text-reset.yaml"]
)
def test_protocol_front_end_gets_the_in_process_verdicts(gateway, scenario):
    import sys

    from conformance.adapters import make_adapter

    sc = load_scenario(CRITERIA / scenario)
    _, in_process = run_scenario(gateway, ReferenceAdapter(), sc)
    command = make_adapter(f"cmd:{sys.executable} -m conformance.reference adapter")
    _, outside = run_scenario(gateway, command, sc)
    assert {k: v["verdict"] for k, v in outside.items()} == {
        k: v["verdict"] for k, v in in_process.items()
    }


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signalled_run_leaves_a_valid_report_of_what_ran(tmp_path, signame):
    import signal
    import subprocess
    import sys

    results, report = tmp_path / "results.json", tmp_path / "report"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conformance",
            "run",
            "--scenario",
            str(CRITERIA / "rty"),
            "--results",
            str(results),
            "--report-dir",
            str(report),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    first = proc.stderr.readline()  # the first progress line: one scenario has run
    while first.startswith("[reaction]"):  # the agent's reaction, measured before its scenarios
        first = proc.stderr.readline()
    assert first.startswith("[1/"), first
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(results.read_text(encoding="utf-8"))
    validate_results(doc)
    assert doc["run"]["interrupted"] is True
    ran = [s["id"] for s in doc["agents"][0]["scenarios"]]
    assert 1 <= len(ran) < len(list((CRITERIA / "rty").glob("*.yaml")))
    index = (report / "index.html").read_text(encoding="utf-8")
    assert "Interrupted run" in index and ran[0] in index


def test_results_record_the_command_that_ran(tmp_path):
    results = tmp_path / "r.json"
    words = [
        "run",
        "-q",
        "--scenario",
        str(CRITERIA / "str" / "str-09-healthy-stream.yaml"),
        "--results",
        str(results),
        "--report-dir",
        str(tmp_path / "rep"),
    ]
    assert main(words) == 0
    command = json.loads(results.read_text(encoding="utf-8"))["run"]["command"]
    assert command.startswith("conformance run -q --scenario ")
    assert command.endswith(
        "str-09-healthy-stream.yaml --results "
        + str(results)
        + " --report-dir "
        + str(tmp_path / "rep")
    )


class _RecordingAdapter(AdapterBase):
    """An agent that ends its turn at once and remembers the request it was given."""

    name = "recorder"

    def __init__(self, caps: set[str]) -> None:
        self.caps = caps
        self.requests: list = []

    def capabilities(self) -> set[str]:
        return self.caps

    def run(self, req):
        from conformance.adapters.base import RunOutcome

        self.requests.append(req)
        return RunOutcome(
            "ran", [{"type": "turn_end", "reason": "completed", "t_ns": 0}], None, "", None
        )


@pytest.mark.parametrize(
    ("deadline", "caps", "scale", "expected"),
    [
        (10, {"time_scale"}, 0.02, 10 * 0.02 + 5.0),  # no floor on small scales any more
        (10, {"time_scale"}, 0.001, 10 * 0.001 + 5.0),
        (None, {"time_scale"}, 0.5, 30 * 0.5 + 5.0),  # the default deadline
        (10, set(), 0.02, 10 * 1.0 + 5.0),  # an agent that cannot scale time runs at 1.0
    ],
)
def test_deadline_is_scaled_deadline_plus_grace(gateway, deadline, caps, scale, expected):
    from conformance.judging.deadlines import (
        ATTEMPT_OVERHEAD_S,
        DEADLINE_GRACE_S,
        DEFAULT_DEADLINE_S,
    )
    from conformance.runner import deadline_s

    assert DEADLINE_GRACE_S == 5.0 and DEFAULT_DEADLINE_S == 30.0
    import dataclasses

    sc = load_scenario(CRITERIA / "str" / "str-09-healthy-stream.yaml")
    sc = dataclasses.replace(sc, deadline=deadline)
    expected += ATTEMPT_OVERHEAD_S * sum(st.times for st in sc.script)  # per model request
    agent = _RecordingAdapter(caps)
    run_scenario(gateway, agent, sc, time_scale=scale)
    assert agent.requests[0].deadline_s == pytest.approx(expected, abs=1e-9)
    assert deadline_s(sc, 1.0 if not caps else scale) == pytest.approx(expected, abs=1e-9)


def test_the_agent_version_is_the_agents_own(gateway):
    from conformance.reference.agent import HELLO
    from conformance.runner import agent_results

    sc = load_scenario(CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml")
    run = run_scenario(gateway, ReferenceAdapter(), sc)
    agent = agent_results("reference", "reference", {"tools"}, [run])
    assert agent["version"] == HELLO["version"]
    assert agent_results("x", "x", set(), [({"events": []}, {})])["version"] is None


# --- wire dialects ----------------------------------------------------------------------------

DIALECT_SCENARIOS = [
    CRITERIA / "str" / "str-01-cut-mid-text-reset.yaml",
    CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml",
    CRITERIA / "str" / "str-15-in-band-error.yaml",
    CRITERIA / "rsn" / "rsn-01-reasoning-only-length.yaml",
]


@pytest.mark.parametrize("dialect", ["anthropic_messages", "openai_responses"])
def test_run_with_dialect_passes_and_records_it(tmp_path, dialect):
    results = tmp_path / "results.json"
    words = ["run", "-q", "--dialect", dialect, "--results", str(results)]
    for path in DIALECT_SCENARIOS:
        words += ["--scenario", str(path)]
    rc = main([*words, "--report-dir", str(tmp_path / "report")])
    doc = json.loads(results.read_text(encoding="utf-8"))
    validate_results(doc)
    assert doc["run"]["dialect"] == dialect
    agent = doc["agents"][0]
    for cid in ("STR-01", "RTY-01", "STR-15", "RSN-01"):
        assert agent["criteria"][cid]["verdict"] == "PASS", (cid, agent["criteria"][cid])
    assert rc == 0
    # Every request went to this dialect's endpoint, and the rerun line names the dialect.
    for sc in agent["scenarios"]:
        assert {e.get("dialect") for e in sc["journal"]["entries"]} == {dialect}
        assert f"--dialect {dialect} " in sc["rerun"]


def test_the_start_message_carries_the_dialect_only_when_not_chat(gateway):
    sc = load_scenario(CRITERIA / "str" / "str-09-healthy-stream.yaml")
    agent = _RecordingAdapter({"dialect:openai_responses"})
    run_scenario(gateway, agent, sc, dialect="openai_responses")
    run_scenario(gateway, agent, sc)
    assert agent.requests[0].start["dialect"] == "openai_responses"
    assert "dialect" not in agent.requests[1].start  # absent means openai_chat


def test_an_agent_without_the_dialect_capability_is_unsupported(gateway):
    sc = load_scenario(CRITERIA / "str" / "str-09-healthy-stream.yaml")
    agent = _RecordingAdapter({"tools", "time_scale"})
    entry, verdicts = run_scenario(gateway, agent, sc, dialect="anthropic_messages")
    assert not agent.requests  # never started
    assert entry["status"] == "unsupported"
    assert "dialect:anthropic_messages" in entry["error"]
    assert verdicts and {v["verdict"] for v in verdicts.values()} == {"UNSUPPORTED"}
    v = next(iter(verdicts.values()))
    assert v["expected"] == "capability dialect:anthropic_messages"
    assert "anthropic_messages dialect" in v["observed"]
    # The same agent in the default dialect is run.
    run_scenario(gateway, agent, sc)
    assert len(agent.requests) == 1


def test_a_criterion_limited_to_other_dialects_is_informational(gateway, monkeypatch):
    import dataclasses

    from conformance.run import judge

    real = judge.by_id

    def limited(cid):
        # As the catalogue marks a criterion that applies only in some dialects.
        crit = real(cid)
        return dataclasses.replace(crit, dialects=("openai_chat",)) if cid == "STR-09" else crit

    monkeypatch.setattr(judge, "by_id", limited)
    sc = load_scenario(CRITERIA / "str" / "str-09-healthy-stream.yaml")
    _, verdicts = run_scenario(gateway, ReferenceAdapter(), sc, dialect="openai_responses")
    assert verdicts["STR-09"]["verdict"] == "INFORMATIONAL"
    assert "not applicable in this dialect" in verdicts["STR-09"]["observed"]
    _, chat = run_scenario(gateway, ReferenceAdapter(), sc)
    assert chat["STR-09"]["verdict"] == "PASS"


# SHOULD / MAY behaviours: switched off, their criterion is NON-STRICT (a SHOULD/MAY failure).
BROKEN_NON_STRICT = [
    ("credential_refresh", "rty/rty-10-expired-token-refreshed.yaml", "RTY-10"),
    ("fresh_credentials", "rty/rty-10-expired-token-refreshed.yaml", "RTY-10"),
    ("background_tools", "trn/trn-10-backgrounded-tool.yaml", "TRN-10"),
    ("media_stripping", "ctx/ctx-05-image-too-large.yaml", "CTX-05"),
    ("compaction_breaker", "lop/lop-05-compaction-fails-proactive.yaml", "LOP-05"),
    ("window_correction", "rty/rty-11-default-limit-overflow.yaml", "RTY-11"),
    ("context_recovery", "ctx/ctx-01-prompt-too-long.yaml", "CTX-01"),
    # STR-14 is a SHOULD: streaming resends before the fallback miss it.
    ("fallback_after_first_cut", "str/str-14-malformed-event.yaml", "STR-14"),
    ("final_denials", "tol/tol-05-permission-denied.yaml", "TOL-05"),
    ("retry_transient_tools", "tol/tol-07-transient-then-ok.yaml", "TOL-07"),
    ("report_skipped_items", "tol/tol-09-batch-partial.yaml", "TOL-09"),
    ("hint_only_on_length", "tjs/tjs-05-malformed-no-truncation.yaml", "TJS-05"),
    ("decode_string_arguments", "tjs/tjs-06-field-as-string.yaml", "TJS-06"),
    ("keep_output_tail", "fmt/fmt-01-large-output-cut.yaml", "FMT-02"),
    ("block_ignored_tool", "lop/lop-02-reminder-ignored.yaml", "LOP-02"),
]


@pytest.mark.parametrize(("switch", "scenario", "criterion"), BROKEN_NON_STRICT)
def test_broken_copy_of_a_should_or_may_behaviour(gateway, switch, scenario, criterion):
    sc = load_scenario(CRITERIA / scenario)
    _, healthy = run_scenario(gateway, ReferenceAdapter(), sc)
    assert healthy[criterion]["verdict"] == "PASS", healthy[criterion]
    _, verdicts = run_scenario(gateway, ReferenceAdapter(Behaviours(**{switch: False})), sc)
    assert verdicts[criterion]["verdict"] == "NON-STRICT", verdicts[criterion]


class _Untold(ReferenceAdapter):
    """The reference agent, saying it cannot be given some config keys (as a shipped profile's
    ``config_ignored`` does)."""

    def __init__(self, *keys: str) -> None:
        super().__init__()
        self.traits = AgentTraits(config_ignored=frozenset(keys))


def test_a_criterion_judged_against_config_the_agent_cannot_be_given_is_unsupported(gateway):
    # A shipped agent's profile names the scenario config it cannot be given (no flag carries
    # it): a check judging against that limit would fail an agent for a rule it never knew.
    sc = load_scenario(CRITERIA / "lop" / "lop-03-cap-sequential.yaml")
    _, told = run_scenario(gateway, ReferenceAdapter(), sc)
    _, untold = run_scenario(gateway, _Untold("max_tool_calls"), sc)
    assert told["LOP-03"]["verdict"] == "PASS"
    assert untold["LOP-03"]["verdict"] == "UNSUPPORTED"
    assert "cannot be given config max_tool_calls" in untold["LOP-03"]["observed"]
    # The scenario's other criteria are judged as before.
    assert {k: v["verdict"] for k, v in untold.items() if k != "LOP-03"} == {
        k: v["verdict"] for k, v in told.items() if k != "LOP-03"
    }


def test_mcp01_against_a_tool_time_limit_the_agent_cannot_be_given_is_unsupported(gateway):
    # Qwen Code and opencode are run with no tool time limit: waiting for a late answer is
    # then no failure to keep the limit (release 1.6.0). Their MCP-01 rests on the other
    # scenarios, which set no limit.
    slow = load_scenario(CRITERIA / "mcp" / "mcp-01-call-too-slow.yaml")
    _, told = run_scenario(gateway, ReferenceAdapter(), slow, tool_transport="mcp")
    _, untold = run_scenario(gateway, _Untold("tool_timeout_s"), slow, tool_transport="mcp")
    assert told["MCP-01"]["verdict"] == "PASS", told["MCP-01"]
    assert untold["MCP-01"]["verdict"] == "UNSUPPORTED", untold["MCP-01"]
    assert "cannot be given config tool_timeout_s" in untold["MCP-01"]["observed"]
    rpc = load_scenario(CRITERIA / "mcp" / "mcp-01-rpc-error.yaml")
    _, judged = run_scenario(gateway, _Untold("tool_timeout_s"), rpc, tool_transport="mcp")
    assert judged["MCP-01"]["verdict"] == "PASS", judged["MCP-01"]


def test_a_scenario_whose_history_the_agent_cannot_be_given_is_unsupported(gateway):
    # A CLI run as it ships starts a new conversation: a history check would judge a setup it
    # never had (an unpaired call it never saw, passed or failed for nothing).
    class Fresh(ReferenceAdapter):
        traits = AgentTraits(takes_history=False)

    sc = load_scenario(CRITERIA / "ctx" / "ctx-03-one-of-two-unanswered.yaml")
    entry, verdicts = run_scenario(gateway, Fresh(), sc)
    assert entry["status"] == "unsupported"
    assert {v["verdict"] for v in verdicts.values()} == {"UNSUPPORTED"}
    assert "cannot be given a history" in verdicts["CTX-03"]["observed"]
    _, healthy = run_scenario(gateway, ReferenceAdapter(), sc)
    assert healthy["CTX-03"]["verdict"] == "PASS"
    # Without a history the same agent is run and judged.
    plain = load_scenario(CRITERIA / "lop" / "lop-03-cap-sequential.yaml")
    _, judged = run_scenario(gateway, Fresh(), plain)
    assert judged["LOP-03"]["verdict"] == "PASS"


def test_trn07_against_a_user_limit_the_agent_cannot_be_given_is_unsupported(gateway):
    kept = load_scenario(CRITERIA / "trn" / "trn-07-user-limit-kept.yaml")
    _, untold = run_scenario(gateway, _Untold("max_output_tokens"), kept)
    assert untold["TRN-07"]["verdict"] == "UNSUPPORTED", untold["TRN-07"]
    # At the default limit (max_output_tokens null) there is no limit to be told: judged.
    default = load_scenario(CRITERIA / "trn" / "trn-07-raise-default-limit.yaml")
    _, judged = run_scenario(gateway, _Untold("max_output_tokens"), default)
    assert judged["TRN-07"]["verdict"] == "PASS", judged["TRN-07"]


def test_an_unsupported_scenario_names_what_the_agent_lacks_not_what_it_declared(gateway):
    # The agent declares tools but not hooks: TOL-06 (capability tools, judged on every run)
    # is UNSUPPORTED because the scenario needs hooks, and says so; it once said "capability
    # tools ... not declared by the agent", which the agent had declared.
    agent = _RecordingAdapter({"tools"})
    sc = load_scenario(CRITERIA / "ctl" / "ctl-02-block-after-tool-turn.yaml")
    entry, verdicts = run_scenario(gateway, agent, sc)
    assert entry["status"] == "unsupported" and agent.requests == []
    tol06 = verdicts["TOL-06"]
    assert tol06["verdict"] == "UNSUPPORTED"
    assert tol06["expected"] == "capability hooks", tol06
    assert tol06["observed"] == "not declared by the agent"
    # An agent that declines a scenario itself (exit 89) is said to have declined it.
    declining = _RecordingAdapter({"tools", "hooks"})
    declining.run = lambda req: RunOutcome("unsupported", [], None, "", "no stop hook here")  # type: ignore[method-assign]
    _, verdicts = run_scenario(gateway, declining, sc)
    assert verdicts["TOL-06"]["observed"] == (
        "the agent reported the scenario unsupported (exit 89): no stop hook here"
    )
