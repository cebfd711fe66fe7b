"""`conformance run --shard K/N` and the merge of its parts by `conformance report`: the parts
of a selection are disjoint and cover it whatever order it was named in, and four parts merged
give the verdicts one unsharded run gives."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.options import RunSettings
from conformance.session import RunSession, select_shard
from fakes import load_scenarios
from reports.merge import merge_shards

ROOT = Path(__file__).resolve().parents[1]
CRITERIA = ROOT / "scenarios" / "criteria"
# Fast scenarios whose criteria cross the parts: CTX-03 and TOL-06 PASS in one scenario and
# INFORMATIONAL (n/a) in another, the invariants (DBG-02, ...) in every one. None is judged on a
# wait, so a loaded machine cannot make the runs differ.
PICK = [
    "ctx/ctx-03-call-then-user-message",
    "ctx/ctx-04-training-mode-refuses",
    "rty/rty-07-status-400",
    "str/str-01-cut-mid-text-reset",
    "str/str-09-healthy-stream",
    "str/str-16-empty-message-once",
]


def _paths() -> list[Path]:
    return [CRITERIA / f"{p}.yaml" for p in PICK]


def _parts(scenarios: list, n: int) -> list[list[str]]:
    return [[s.id for s in select_shard(scenarios, k, n)[0]] for k in range(1, n + 1)]


def test_the_parts_are_disjoint_cover_the_selection_and_ignore_its_order():
    scenarios = load_scenarios(CRITERIA / "rty")
    ids = sorted(s.id for s in scenarios)
    shuffled = scenarios[5:] + list(reversed(scenarios[:5]))
    for n in (1, 3, 4, len(ids), len(ids) + 2):
        parts = _parts(scenarios, n)
        assert sorted(i for part in parts for i in part) == ids, n
        sizes = [len(p) for p in parts]
        assert max(sizes) - min(sizes) <= 1, (n, sizes)
        # The same split whatever order the scenarios were named in, each part in that order.
        again = _parts(shuffled, n)
        assert [sorted(p) for p in again] == [sorted(p) for p in parts]
        order = [s.id for s in shuffled]
        assert all(p == sorted(p, key=order.index) for p in again)
    # Dealt out in turn over the sorted ids.
    assert sorted(_parts(scenarios, 4)[1]) == ids[1::4]


def test_each_part_records_which_part_of_which_selection_it_is():
    paths = _paths()
    records = []
    for order in (paths, list(reversed(paths))):
        session = RunSession(RunSettings(scenario=tuple(order), shard=(2, 4)), command="x")
        session.load_scenarios()
        records.append(session.selection)
    assert records[0] == records[1]
    assert records[0]["index"] == 2 and records[0]["count"] == 4
    assert records[0]["selected"] == len(PICK) and len(records[0]["selection"]) == 16
    other = RunSession(RunSettings(scenario=tuple(paths[:-1]), shard=(2, 4)), command="x")
    other.load_scenarios()
    assert other.selection["selection"] != records[0]["selection"]


@pytest.mark.parametrize("bad", ["0/4", "5/4", "x/4", "2", "2/0"])
def test_a_bad_shard_is_a_usage_error_naming_the_flag(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--shard", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--shard" in err and "K/N" in err


def test_a_part_cannot_update_the_expectations(tmp_path, capsys):
    words = ["run", "-q", "--shard", "1/2", "--update-expectations"]
    words += ["--expectations", str(tmp_path / "e.yaml"), "--report-dir", str(tmp_path / "r")]
    assert main(words) == 2
    assert "--update-expectations cannot be used with --shard" in capsys.readouterr().err
    assert not (tmp_path / "e.yaml").exists()


def _verdicts(doc: dict) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    (agent,) = doc["agents"]
    return {
        cid: (c["verdict"], sorted((s["id"], s["verdict"]) for s in c["scenarios"]))
        for cid, c in agent["criteria"].items()
    }


def test_four_parts_merged_give_the_unsharded_runs_verdicts(tmp_path):
    scenarios = [w for p in _paths() for w in ("--scenario", str(p))]
    base = ["run", "-q", "--report-dir", str(tmp_path / "rep"), *scenarios]
    assert main([*base, "--results", str(tmp_path / "whole.json")]) == 0
    for k in (1, 2, 3, 4):
        out = str(tmp_path / f"part{k}.json")
        assert main([*base, "--shard", f"{k}/4", "--results", out]) == 0
    whole = json.loads((tmp_path / "whole.json").read_text("utf-8"))
    parts = [json.loads((tmp_path / f"part{k}.json").read_text("utf-8")) for k in (3, 1, 4, 2)]

    # The test means something: the parts split the scenarios, and some criterion gets
    # different verdicts in different parts.
    seen = [{s["id"] for s in p["agents"][0]["scenarios"]} for p in parts]
    assert sum(map(len, seen)) == len(PICK) and len(set().union(*seen)) == len(PICK)
    by_part = [{cid: c["verdict"] for cid, c in p["agents"][0]["criteria"].items()} for p in parts]
    assert any(len({v[c] for v in by_part if c in v}) > 1 for c in _verdicts(whole))

    (merged,) = merge_shards(parts)
    assert _verdicts(merged) == _verdicts(whole)
    assert sorted(s["id"] for s in merged["agents"][0]["scenarios"]) == sorted(
        s["id"] for s in whole["agents"][0]["scenarios"]
    )
    assert merged["run"]["shards"]["present"] == [1, 2, 3, 4]

    # `conformance report` merges them the same way: its JUnit file is the whole run's.
    files = [str(tmp_path / f"part{k}.json") for k in (4, 2, 1, 3)]
    assert main(["report", *files, "--out", str(tmp_path / "merged")]) == 0
    assert main(["report", str(tmp_path / "whole.json"), "--out", str(tmp_path / "one")]) == 0
    junit = [(tmp_path / d / "junit.xml").read_text("utf-8") for d in ("merged", "one")]
    assert _testcases(junit[0]) == _testcases(junit[1])
    assert 'id="incomplete"' not in (tmp_path / "merged" / "index.html").read_text("utf-8")


def _testcases(xml: str) -> list[tuple[str, str, str]]:
    import xml.etree.ElementTree as ET

    return sorted(
        (c.get("name") or "", c.get("classname") or "", "".join(x.tag for x in c))
        for c in ET.fromstring(xml).iter("testcase")
    )


def _judged_everywhere(parts: int) -> list[dict]:
    """Synthetic parts of one run whose catalogue holds only criteria its scenarios judge."""
    docs = []
    for k in range(1, parts + 1):
        sid = f"s-{k}"
        docs.append(
            {
                "format": "conformance-results",
                "version": 1,
                "run": {
                    "started": f"2026-01-0{k}T00:00:00Z",
                    "finished": f"2026-01-0{k}T00:01:00Z",
                    "interrupted": False,
                    "shard": {"index": k, "count": parts, "selection": "abc"},
                },
                "catalogue": [
                    {
                        "id": "RTY-01",
                        "level": "MUST",
                        "area": "RTY",
                        "title": "t",
                        "text": "t",
                        "source": "s",
                        "capability": None,
                    }
                ],
                "agents": [
                    {
                        "name": "a",
                        "adapter": "a",
                        "version": None,
                        "capabilities": [],
                        "criteria": {
                            "RTY-01": {
                                "verdict": "PASS",
                                "scenarios": [{"id": sid, "verdict": "PASS"}],
                            }
                        },
                        "scenarios": [{"id": sid, "status": "ran"}],
                    }
                ],
            }
        )
    return docs


def test_report_certify_fails_on_a_missing_part(tmp_path, capsys):
    files = []
    for i, doc in enumerate(_judged_everywhere(3)):
        files.append(tmp_path / f"p{i}.json")
        files[-1].write_text(json.dumps(doc), encoding="utf-8")
    out = ["--out", str(tmp_path / "r"), "--certify"]
    assert main(["report", *map(str, files), *out]) == 0
    assert main(["report", str(files[0]), str(files[2]), *out]) == 1
    assert "certify: a: shard(s) 2 of 3 missing" in capsys.readouterr().err
    index = (tmp_path / "r" / "index.html").read_text("utf-8")
    assert 'id="incomplete"' in index
    # The same part twice is bad input, naming both files.
    assert main(["report", str(files[0]), str(files[0]), *out]) == 2
    err = capsys.readouterr().err
    assert err.count(str(files[0])) == 2 and "shard 1/3" in err


def test_documents_of_other_runs_are_not_merged():
    a, b = _judged_everywhere(2)
    other = copy.deepcopy(b)
    other["run"]["shard"]["selection"] = "another"
    merged = merge_shards([a, other])
    assert [d["run"]["shards"]["present"] for d in merged] == [[1], [2]]
    over_mcp = copy.deepcopy(b)
    over_mcp["run"]["tool_transport"] = "mcp"  # the same selection, its tools over MCP
    merged = merge_shards([a, over_mcp])
    assert [d["run"]["shards"]["present"] for d in merged] == [[1], [2]]
    plain = copy.deepcopy(a)
    del plain["run"]["shard"]
    assert merge_shards([plain, a, b])[0] is plain


def test_reports_and_harness_agree_on_the_verdict_order():
    # The merge recomputes verdicts with the reports' order; the runner with the harness's.
    from conformance import verdicts as harness
    from reports import verdicts as reports

    assert reports.SEVERITY == harness.SEVERITY and reports.VERDICTS == harness.VERDICTS


def test_two_agents_parts_merge_apart_and_a_criterion_takes_its_worst_verdict():
    a1, a2 = _judged_everywhere(2)
    a2["agents"][0]["criteria"]["RTY-01"]["verdict"] = "FAIL"
    a2["agents"][0]["criteria"]["RTY-01"]["scenarios"][0]["verdict"] = "FAIL"
    b1, b2 = copy.deepcopy(_judged_everywhere(2))
    for doc in (b1, b2):
        doc["agents"][0]["name"] = "b"
    merged = merge_shards([b2, a1, b1, a2])
    assert [d["agents"][0]["name"] for d in merged] == ["b", "a"]
    assert [d["run"]["shards"]["present"] for d in merged] == [[1, 2], [1, 2]]
    verdicts = {d["agents"][0]["name"]: d["agents"][0]["criteria"]["RTY-01"] for d in merged}
    assert verdicts["a"]["verdict"] == "FAIL" and verdicts["b"]["verdict"] == "PASS"
    assert [s["id"] for s in verdicts["a"]["scenarios"]] == ["s-1", "s-2"]
    from reports import validate_results

    for doc in merged:
        validate_results(doc, source="merged")


def test_parts_judged_by_different_catalogue_releases_are_not_merged(tmp_path, capsys):
    a, b = _judged_everywhere(2)
    a["run"]["catalogue_version"], b["run"]["catalogue_version"] = "1.0.0", "1.1.0"
    files = [tmp_path / "p1.json", tmp_path / "p2.json"]
    for f, doc in zip(files, (a, b), strict=True):
        f.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["report", *map(str, files), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "different catalogue releases" in err
    assert f"{files[0]}: catalogue 1.0.0" in err and f"{files[1]}: catalogue 1.1.0" in err
