"""``conformance rejudge``: verdicts derived again from saved evidence alone.

The whole suite is run once per dialect with the reference agent and with a broken copy; its
results, through JSON as a reader gets them, are re-judged and every verdict must come out as the
run gave it. Then the evidence is changed by one byte, a rule is changed on purpose, and a
certificate bundle is checked.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import pytest

from conformance import rejudge as rj
from conformance.adapters.reference import ReferenceAdapter
from conformance.bundle import MANIFEST, RESULTS, write_bundle
from conformance.reference import Behaviours
from conformance.release import CATALOGUE_VERSION, rules_sha256
from conformance.run import judge as judge_module
from conformance.runner import DIALECTS, results_document, run_suite
from fakes import Gateway, Scenario, load_scenarios

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"
# A copy with bugs across the areas, each making its criteria FAIL or NON-STRICT.
BROKEN = Behaviours(
    honour_retry_after=False,
    jitter=False,
    stream_fallback=False,
    continuation=False,
    history_repair=False,
    withhold_errors=False,
)


def _suite(dialect: str, behaviours: Behaviours | None, scenarios=None) -> dict:
    with Gateway.running() as gw:
        agent = run_suite(
            gw,
            ReferenceAdapter(behaviours or Behaviours()),
            scenarios if scenarios is not None else load_scenarios(CRITERIA),
            dialect=dialect,
        )
    doc = results_document(
        [agent], started=0.0, time_scale=0.02, interrupted=False, command="t", dialect=dialect
    )
    return json.loads(json.dumps(doc))  # as a reader gets it


def _verdicts(doc: dict) -> dict[tuple[str, str], tuple[str, str, str]]:
    return {
        (cid, v["id"]): (v["verdict"], v["expected"], v["observed"])
        for agent in doc["agents"]
        for cid, res in agent["criteria"].items()
        for v in res["scenarios"]
    }


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("agent", ["healthy", "broken"])
def test_every_verdict_of_a_whole_suite_is_derived_again_from_its_evidence(dialect, agent):
    doc = _suite(dialect, BROKEN if agent == "broken" else None)
    assert doc["run"]["catalogue_version"] == CATALOGUE_VERSION
    r = rj.rejudge(doc)
    assert r.tampered == [] and r.unjudged == []
    assert r.moved == []
    assert _verdicts(r.document) == _verdicts(doc)
    assert {cid: c["verdict"] for cid, c in r.document["agents"][0]["criteria"].items()} == {
        cid: c["verdict"] for cid, c in doc["agents"][0]["criteria"].items()
    }
    seen = {v[0] for v in _verdicts(doc).values()}
    if agent == "broken":  # the failing verdicts are re-derived too, not only the passing ones
        assert seen & {"FAIL", "NON-STRICT"}, seen


@pytest.fixture(scope="module")
def small() -> dict:
    scenarios = load_scenarios(CRITERIA / "rty") + load_scenarios(CRITERIA / "dbg")
    return _suite("openai_chat", None, scenarios)


def test_one_changed_byte_of_a_journal_is_reported_as_not_matching_its_digest(small):
    doc = copy.deepcopy(small)
    entry = doc["agents"][0]["scenarios"][0]
    text = json.dumps(entry["journal"])
    i = text.index('"seq": 1') + len('"seq": ')
    entry["journal"] = json.loads(text[:i] + "7" + text[i + 1 :])  # seq 1 -> seq 7
    r = rj.rejudge(doc)
    assert [(sid, "does not match" in why) for _, sid, why in r.tampered] == [(entry["id"], True)]
    assert r.moved == []  # the changed entry is not judged at all


def test_a_deliberate_rule_change_moves_exactly_the_verdicts_it_touches(small, monkeypatch):
    real = judge_module.run_check

    def stricter(cid, ev):
        finding = real(cid, ev)
        if cid != "RTY-01":
            return finding
        from conformance.checks.finding import Finding

        return Finding("fail", "a changed rule", "failed by the changed rule")

    monkeypatch.setattr(judge_module, "run_check", stricter)
    r = rj.rejudge(small)
    rty01 = {(k[1]) for k, v in _verdicts(small).items() if k[0] == "RTY-01" and v[0] == "PASS"}
    assert rty01
    assert {(m.criterion, m.scenario) for m in r.moved} == {("RTY-01", s) for s in rty01}
    assert {(m.before, m.after) for m in r.moved} == {("PASS", "FAIL")}


def test_a_results_file_of_another_release_names_the_changes_in_between(small, monkeypatch):
    from conformance.checks.finding import Finding
    from conformance.release import releases

    real = judge_module.run_check
    monkeypatch.setattr(
        judge_module,
        "run_check",
        lambda cid, ev: Finding("fail", "e", "o") if cid == "RTY-01" else real(cid, ev),
    )
    doc = copy.deepcopy(small)
    doc["run"]["catalogue_version"] = "0.9.0"
    r = rj.rejudge(doc)
    assert not r.same_rules and r.moved
    # Every release after 0.9.0 up to the installed one, with the changes that can move RTY-01.
    named = [(r.version, c) for r in releases() for c in r.changes]
    for m in r.moved:
        assert m.criterion == "RTY-01"
        assert list(m.changes) == [
            (v, c) for v, c in named if not c.criteria or "RTY-01" in c.criteria
        ]
        assert m.changes


def test_the_command_checks_a_bundle_and_refuses_a_changed_one(small, tmp_path, capsys):
    bundle = write_bundle(small, tmp_path / "cert.zip")
    with zipfile.ZipFile(bundle) as z:
        made = json.loads(z.read(MANIFEST))
    assert made["catalogue_version"] == CATALOGUE_VERSION
    assert made["agents"][0]["name"] == "reference"
    assert rj.main([str(bundle)]) == 0
    assert "every verdict re-derived equal" in capsys.readouterr().out
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bundle) as z, zipfile.ZipFile(bad, "w") as out:
        out.writestr(RESULTS, z.read(RESULTS) + b" ")  # one byte more than the manifest says
        out.writestr(MANIFEST, z.read(MANIFEST))
    assert rj.main([str(bad)]) == 2
    assert "does not match the sha256" in capsys.readouterr().err


def test_rejudge_writes_the_rejudged_results_with_the_installed_release(small, tmp_path):
    src = tmp_path / "r.json"
    src.write_text(json.dumps(small))
    out = tmp_path / "again.json"
    assert rj.main([str(src), "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["run"]["catalogue_sha256"] == rules_sha256()
    assert again["run"]["rejudged"] == {
        "from_catalogue_version": CATALOGUE_VERSION,
        "moved": 0,
        "ran_with_catalogue_version": CATALOGUE_VERSION,
    }
    # Re-judged again: the release it ran under is kept, the one it was last judged by said.
    again["run"]["catalogue_version"] = "0.9.0"
    again["run"]["rejudged"]["ran_with_catalogue_version"] = "0.8.0"
    src.write_text(json.dumps(again))
    assert rj.main([str(src), "--out", str(out)]) in (0, 1)
    third = json.loads(out.read_text())["run"]["rejudged"]
    assert third["from_catalogue_version"] == "0.9.0"
    assert third["ran_with_catalogue_version"] == "0.8.0"


def test_a_release_that_is_not_a_version_is_no_crash(small, monkeypatch):
    real = judge_module.run_check

    def moved(cid, ev):
        from conformance.checks.finding import Finding

        return Finding("fail", "e", "o") if cid == "RTY-01" else real(cid, ev)

    monkeypatch.setattr(judge_module, "run_check", moved)
    doc = copy.deepcopy(small)
    doc["run"]["catalogue_version"] = "not-a-version"
    r = rj.rejudge(doc)
    assert r.moved and all(m.changes == () for m in r.moved)


def test_a_debug_format_is_covered_by_the_digest_only_when_named(small):
    from conformance.run.record import evidence_digest

    doc = copy.deepcopy(small)
    entry = doc["agents"][0]["scenarios"][0]
    assert "debug_format" not in entry  # the reference agent writes the harness's format
    assert evidence_digest({**entry, "debug_format": None}) == entry["evidence_sha256"]
    # A format named after the run (its files then read otherwise) is changed evidence.
    entry["debug_format"] = "claude-code"
    r = rj.rejudge(doc)
    assert [(sid, "does not match" in why) for _, sid, why in r.tampered] == [(entry["id"], True)]


def test_a_failure_beyond_load_is_not_confirmed_and_rejudged_as_such():
    # A stall whose silence lasts 60 s past its idle limit: 1.2 s real at time scale 0.02. The
    # copy without an idle watchdog reads it to its end.
    stall = {"after_events": 2, "seconds": 70, "idle_limit": 10}
    data = {
        "id": "str-10-short-margin",
        "criteria": ["STR-10"],
        "capabilities": ["time_scale"],
        "prompt": "p",
        "script": [
            {
                "match": {"stream": True},
                "reply": {"text": "Hello there"},
                "fault": {"stall": stall},
            },
            {"reply": {"text": "Hello"}},
        ],
    }
    doc = _suite("openai_chat", Behaviours(idle_watchdog=False), [Scenario.from_dict(data)])
    entry = doc["agents"][0]["scenarios"][0]
    verdict = doc["agents"][0]["criteria"]["STR-10"]["scenarios"][0]
    assert verdict["verdict"] == "NON-STRICT" and verdict["beyond_load"] is True
    assert "60 s past the 10 s idle limit" in verdict["observed"]
    assert "first_run" not in entry and "confirmed" not in verdict  # not run again
    again = rj.rejudge(doc)
    assert again.moved == [] and again.tampered == []
    assert again.document["agents"][0]["criteria"]["STR-10"]["scenarios"][0] == verdict
