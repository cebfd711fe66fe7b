"""``--repeat N``: a criterion whose runs disagree is UNSTABLE, with its rate; one whose runs
agree keeps their verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import rejudge as rj
from conformance.adapters.interface import RunOutcome, RunRequest
from conformance.adapters.reference import ReferenceAdapter
from conformance.cli import main
from conformance.expectations import Expectation, Expectations, compare_results
from conformance.reference import Behaviours
from conformance.repeat import combine, rate_of
from conformance.runner import agent_results, results_document, run_suite
from fakes import Gateway, load_scenario

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"
# A stream cut after the role chunk: STR-07 needs the non-streaming fallback (not timing).
FALLBACK = CRITERIA / "str" / "str-07-cut-after-role-chunk.yaml"


class _Alternating(ReferenceAdapter):
    """The reference agent on odd runs, a copy without the non-streaming fallback on even ones:
    an agent whose behaviour varies from run to run."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.broken = ReferenceAdapter(Behaviours(stream_fallback=False))

    def run(self, req: RunRequest) -> RunOutcome:
        self.calls += 1
        return self.broken.run(req) if self.calls % 2 == 0 else super().run(req)


def _v(verdict: str, observed: str = "") -> dict:
    return {"id": "s", "verdict": verdict, "expected": "e", "observed": observed}


def test_runs_that_agree_keep_their_verdict_and_runs_that_disagree_are_unstable():
    runs = [
        ({"id": "s"}, {"A": _v("PASS"), "B": _v("FAIL", "x")}),
        ({"id": "s"}, {"A": _v("PASS"), "B": _v("PASS")}),
        ({"id": "s"}, {"A": _v("PASS"), "B": _v("FAIL", "y")}),
    ]
    entry, verdicts = combine(runs)
    assert verdicts["A"]["verdict"] == "PASS"
    b = verdicts["B"]
    assert b["verdict"] == "UNSTABLE" and b["observed"].startswith("1 of 3 runs passed")
    assert b["repeat"]["verdicts"] == ["FAIL", "PASS", "FAIL"]
    assert (b["repeat"]["passing_run"], b["repeat"]["failing_run"]) == (1, 0)
    assert rate_of(b) == pytest.approx(1 / 3)
    assert len(entry["repeats"]) == 2
    assert combine(runs[:1]) == runs[0]


def test_runs_that_never_pass_and_fail_both_keep_the_worst_with_every_run_shown():
    runs = [
        ({"id": "s"}, {"A": _v("INFORMATIONAL", "nothing to judge"), "B": _v("FAIL", "x")}),
        ({"id": "s"}, {"A": _v("PASS", "ok"), "B": _v("INFORMATIONAL", "n/a")}),
        ({"id": "s"}, {"A": _v("PASS", "ok"), "B": _v("NON-STRICT", "y")}),
    ]
    _, verdicts = combine(runs)
    # Passed whenever there was something to judge: PASS, not UNSTABLE.
    a = verdicts["A"]
    assert a["verdict"] == "PASS" and "repeat" not in a
    assert a["observed"] == "ok [runs: run 1: INFORMATIONAL; run 2: PASS; run 3: PASS]"
    # Failed whenever judged: the worst, never "2 of 3 runs passed".
    b = verdicts["B"]
    assert b["verdict"] == "FAIL" and rate_of(b) is None
    assert b["observed"].startswith("x [runs: run 1: FAIL (x); run 2: INFORMATIONAL; run 3:")


def test_a_run_that_found_nothing_to_judge_is_not_counted_as_passed():
    runs = [
        ({"id": "s"}, {"A": _v("PASS")}),
        ({"id": "s"}, {"A": _v("INFORMATIONAL")}),
        ({"id": "s"}, {"A": _v("FAIL", "x")}),
    ]
    a = combine(runs)[1]["A"]
    assert a["verdict"] == "UNSTABLE" and a["observed"].startswith("1 of 3 runs passed")
    assert (a["repeat"]["passing_run"], a["repeat"]["failing_run"]) == (0, 2)


def test_a_run_without_a_verdict_for_a_criterion_is_its_error_not_a_crash():
    runs = [
        ({"id": "s"}, {"A": _v("PASS"), "B": _v("PASS")}),
        ({"id": "s"}, {"A": _v("PASS")}),  # B: no verdict in this run
    ]
    b = combine(runs)[1]["B"]
    assert b["verdict"] == "UNSTABLE" and b["repeat"]["verdicts"] == ["PASS", "ERROR"]
    assert "run 2: ERROR (this run gave no verdict for it)" in b["observed"]
    (_, only) = combine([({"id": "s"}, {"B": _v("FAIL", "x")}), ({"id": "s"}, {})])
    assert only["B"]["verdict"] == "FAIL" and "run 2: ERROR" in only["B"]["observed"]


@pytest.fixture(scope="module")
def gateway():
    with Gateway.running() as gw:
        yield gw


def test_an_agent_that_varies_between_runs_is_unstable_with_its_rate(gateway):
    sc = load_scenario(FALLBACK)
    steady = run_suite(gateway, ReferenceAdapter(), [sc], repeat=3)
    assert "UNSTABLE" not in {c["verdict"] for c in steady["criteria"].values()}
    agent = run_suite(gateway, _Alternating(), [sc], repeat=3)
    unstable = {c for c, r in agent["criteria"].items() if r["verdict"] == "UNSTABLE"}
    assert unstable == {"STR-01", "STR-07"}  # the criteria the fallback decides
    str07 = agent["criteria"]["STR-07"]
    assert str07["scenarios"][0]["repeat"]["passed"] == 2  # runs 1 and 3 healthy
    doc = results_document(
        [agent], started=0.0, time_scale=0.02, interrupted=False, command="t", repeat=3
    )
    # Gated: unexpected UNSTABLE fails; expected with a rate it meets passes; a higher rate fails.
    assert [f.criterion for f in compare_results(doc).regressions] == ["STR-01", "STR-07"]
    ok = Expectations([Expectation(c, "UNSTABLE", "varies", rate=0.6) for c in unstable])
    assert compare_results(doc, ok).regressions == []
    strict = Expectations(
        [Expectation("STR-01", "UNSTABLE", "varies", rate=0.6)]
        + [Expectation("STR-07", "UNSTABLE", "varies", rate=0.9)]
    )
    (reg,) = compare_results(doc, strict).regressions
    assert reg.criterion == "STR-07" and "67% of runs passed" in reg.reason
    # Re-judged from the saved runs, the same verdicts.
    r = rj.rejudge(json.loads(json.dumps(doc)))
    assert r.moved == [] and r.tampered == []


def test_repeat_through_the_cli_spreads_runs_over_processes(tmp_path):
    results = tmp_path / "r.json"
    rc = main(
        [
            "run", "-q", "-n", "2", "--repeat", "2", "--scenario", str(FALLBACK),
            "--results", str(results), "--report-dir", str(tmp_path / "rep"),
        ]
    )  # fmt: skip
    assert rc == 0
    doc = json.loads(results.read_text())
    assert doc["run"]["repeat"] == 2
    (entry,) = doc["agents"][0]["scenarios"]
    assert len(entry["repeats"]) == 1
    assert "UNSTABLE" not in {c["verdict"] for c in doc["agents"][0]["criteria"].values()}


def test_a_repeat_below_one_is_a_usage_error(capsys):
    assert main(["run", "--repeat", "0", "--scenario", str(FALLBACK)]) == 2
    assert "--repeat must be at least 1" in capsys.readouterr().err


def test_agent_results_ranks_unstable_next_to_fail():
    runs = [({"id": "a"}, {"X": {**_v("UNSTABLE"), "id": "a"}}), ({"id": "b"}, {"X": _v("PASS")})]
    assert agent_results("n", "n", [], runs)["criteria"]["X"]["verdict"] == "UNSTABLE"
    runs.append(({"id": "c"}, {"X": _v("FAIL")}))
    assert agent_results("n", "n", [], runs)["criteria"]["X"]["verdict"] == "FAIL"
