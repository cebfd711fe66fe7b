"""The conformance pytest plugin, run in subprocesses as a user would: selection with -k,
JUnit testcases, pytest-xdist, expectations, and `conformance run -n N` on top of it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports import validate_results

CRITERIA = Path(__file__).resolve().parents[1] / "scenarios" / "criteria"
FAST = [
    CRITERIA / "rty" / "rty-01-retry-after-seconds.yaml",
    CRITERIA / "rty" / "rty-07-status-400.yaml",
    CRITERIA / "str" / "str-09-healthy-stream.yaml",
]
RTY01 = FAST[0]

# An agent that sends one request and never retries: RTY-01 (honour Retry-After) is a known FAIL.
ONE_SHOT = """
import json, os, sys, urllib.error, urllib.request
print(json.dumps({"type": "hello", "agent": "one-shot", "capabilities": ["time_scale"]}), flush=True)
start = json.loads(sys.stdin.readline() or "null")
if start:
    body = {"model": start["model"], "stream": False,
            "messages": [{"role": "user", "content": start["prompt"]}]}
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    try:
        urllib.request.urlopen(req, timeout=10).read()
        end = "completed"
    except urllib.error.HTTPError as exc:
        print(json.dumps({"type": "error", "message": f"HTTP {exc.code}"}), flush=True)
        end = "error"
    print(json.dumps({"type": "turn_end", "reason": end}), flush=True)
"""


@pytest.fixture
def one_shot(tmp_path) -> str:
    script = tmp_path / "one_shot.py"
    script.write_text(ONE_SHOT, encoding="utf-8")
    return f"cmd:{sys.executable} {script}"


def pytest_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest in a subprocess, in an empty directory, with no ini file of ours."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "pytest.ini", "--rootdir", "."]
        + ["-p", "no:cacheprovider", *map(str, args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def cli_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conformance", "run", *map(str, args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def verdicts(doc: dict) -> dict[str, dict[str, str]]:
    return {
        a["name"]: {cid: c["verdict"] for cid, c in a["criteria"].items()} for a in doc["agents"]
    }


def scenario_verdicts(doc: dict) -> list[tuple[str, str, str]]:
    return sorted(
        (cid, s["id"], s["verdict"])
        for a in doc["agents"]
        for cid, c in a["criteria"].items()
        for s in c["scenarios"]
    )


def test_inert_without_the_flag(tmp_path):
    # The plugin is loaded (entry point), yet without --conformance a scenario is no test.
    d = tmp_path / "suite"
    d.mkdir()
    (d / RTY01.name).write_text(RTY01.read_text(encoding="utf-8"), encoding="utf-8")
    proc = pytest_run(tmp_path, d)
    assert proc.returncode == 5, proc.stdout + proc.stderr  # no tests collected
    active = pytest_run(tmp_path, "--conformance", "--collect-only", "-q", d)
    assert "rty-01-retry-after-seconds[reference]" in active.stdout, active.stdout


def test_k_selects_and_junit_has_one_testcase_per_scenario(tmp_path):
    results, junit = tmp_path / "r.json", tmp_path / "junit.xml"
    proc = pytest_run(
        tmp_path,
        "--conformance",
        *FAST,
        "-k",
        "rty",
        f"--junitxml={junit}",
        "--conformance-results",
        results,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(results.read_text(encoding="utf-8"))
    validate_results(doc)
    assert [s["id"] for s in doc["agents"][0]["scenarios"]] == [
        "rty-01-retry-after-seconds",
        "rty-07-status-400",
    ]
    cases = ET.parse(junit).getroot().iter("testcase")
    by_name = {c.get("name"): c for c in cases}
    assert set(by_name) == {"rty-01-retry-after-seconds[reference]", "rty-07-status-400[reference]"}
    props = {
        p.get("name"): p.get("value")
        for p in by_name["rty-01-retry-after-seconds[reference]"].iter("property")
    }
    assert props["RTY-01"] == "PASS"
    assert props == {
        cid: s["verdict"]
        for cid, c in doc["agents"][0]["criteria"].items()
        for s in c["scenarios"]
        if s["id"] == "rty-01-retry-after-seconds"
    }


def test_xdist_gives_the_sequential_results(tmp_path):
    seq, par = tmp_path / "seq.json", tmp_path / "par.json"
    common = ["--conformance", *FAST, "--conformance-agent", "reference"]
    one = pytest_run(tmp_path, *common, "--conformance-results", seq)
    two = pytest_run(
        tmp_path,
        *common,
        "-n",
        "2",
        "--conformance-results",
        par,
        "--conformance-report-dir",
        "rep",
    )
    assert one.returncode == 0, one.stdout + one.stderr
    assert two.returncode == 0, two.stdout + two.stderr
    a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (seq, par))
    validate_results(b)
    assert verdicts(a) == verdicts(b)
    assert scenario_verdicts(a) == scenario_verdicts(b)
    # Collection order, not completion order.
    assert [s["id"] for s in b["agents"][0]["scenarios"]] == [p.stem for p in FAST]
    assert (tmp_path / "rep" / "index.html").is_file()  # the controller rendered the report


def test_cli_n2_gives_the_sequential_results(tmp_path):
    common = ["-q", *[w for p in FAST for w in ("--scenario", p)]]
    one = cli_run(tmp_path, *common, "--results", "seq.json", "--report-dir", "r1")
    two = cli_run(tmp_path, *common, "-n", "2", "--results", "par.json", "--report-dir", "r2")
    assert one.returncode == two.returncode == 0, two.stderr
    a, b = (
        json.loads((tmp_path / n).read_text(encoding="utf-8")) for n in ("seq.json", "par.json")
    )
    validate_results(b)
    assert verdicts(a) == verdicts(b) and scenario_verdicts(a) == scenario_verdicts(b)
    assert b["run"]["command"].startswith("conformance run -q --scenario ")
    assert b["run"]["command"].endswith("-n 2 --results par.json --report-dir r2")
    assert (tmp_path / "r2" / "summary.md").is_file()


def test_cli_progress_lines_and_k(tmp_path):
    proc = cli_run(
        tmp_path,
        *[w for p in FAST for w in ("--scenario", p)],
        "-k",
        "str-09",
        "--results",
        "r.json",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == "[1/1] str-09-healthy-stream: ran, worst PASS"
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [s["id"] for s in doc["agents"][0]["scenarios"]] == ["str-09-healthy-stream"]


def test_expectations_turn_a_known_fail_into_a_pass(tmp_path, one_shot):
    base = ["--conformance", RTY01, "--conformance-agent", one_shot]
    bare = pytest_run(tmp_path, *base)
    assert bare.returncode == 1, bare.stdout
    # The failure names criterion, verdict, what was expected and what was observed.
    assert "RTY-01: verdict FAIL, expectations allow NON-STRICT or better" in bare.stdout
    assert "  expected: " in bare.stdout and "  observed: " in bare.stdout

    known = tmp_path / "known.yaml"
    known.write_text("- {criterion: RTY-01, verdict: FAIL, reason: no retries yet}\n", "utf-8")
    ok = pytest_run(tmp_path, *base, "--conformance-expectations", known)
    assert ok.returncode == 0, ok.stdout
    assert "expected: RTY-01" in ok.stdout  # reported in the summary

    # The verdict changed for the worse than what the file says: a regression.
    changed = tmp_path / "changed.yaml"
    changed.write_text("- {criterion: RTY-01, verdict: NON-STRICT, reason: x}\n", "utf-8")
    bad = pytest_run(tmp_path, *base, "--conformance-expectations", changed)
    assert bad.returncode == 1, bad.stdout
    assert "RTY-01: verdict FAIL, expectations allow NON-STRICT or better" in bad.stdout


def test_cli_expectations_gate_and_update_round_trip(tmp_path, one_shot):
    run = ["-q", "--agent", one_shot, "--scenario", RTY01, "--report-dir", "rep"]
    assert cli_run(tmp_path, *run).returncode == 1
    exp = tmp_path / "conformance-expectations.yaml"
    upd = cli_run(tmp_path, *run, "--update-expectations")
    assert upd.returncode == 0, upd.stderr
    text = exp.read_text(encoding="utf-8")
    assert "criterion: RTY-01" in text and "verdict: FAIL" in text
    gated = cli_run(tmp_path, *run, "--expectations", exp, "--junit", "junit.xml")
    assert gated.returncode == 0, gated.stderr
    assert (tmp_path / "junit.xml").is_file()
    # A reason written by hand survives the next update.
    exp.write_text(text.replace("recorded by --update-expectations", "ticket 42"), "utf-8")
    again = cli_run(tmp_path, *run, "--expectations", exp, "--update-expectations")
    assert again.returncode == 0, again.stderr
    assert "reason: ticket 42" in exp.read_text(encoding="utf-8")
    # The same expectations through pytest -n 2: the gate holds there too.
    par = cli_run(tmp_path, *run, "--expectations", exp, "-n", "2")
    assert par.returncode == 0, par.stderr


def test_bad_expectations_file_is_a_usage_error_naming_file_and_line(tmp_path):
    bad = tmp_path / "exp.yaml"
    bad.write_text(
        "- criterion: RTY-01\n  verdict: FAIL\n- criterion: RTY-01x\n  verdict: FAIL\n", "utf-8"
    )
    proc = pytest_run(tmp_path, "--conformance", RTY01, "--conformance-expectations", bad)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert f"{bad}:3: unknown criterion ID 'RTY-01x'" in proc.stderr
    cli = cli_run(tmp_path, "--scenario", RTY01, "--expectations", bad)
    assert cli.returncode == 2
    assert f"{bad}:3: unknown criterion ID 'RTY-01x'" in cli.stderr


def test_bad_agent_is_a_usage_error(tmp_path):
    proc = pytest_run(tmp_path, "--conformance-agent", "nonsense", RTY01)
    assert proc.returncode == 4
    assert "unknown adapter 'nonsense'" in proc.stderr


def test_a_signalled_parallel_run_leaves_a_valid_report_of_what_ran(tmp_path):
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance", "run", "-n", "2", "--scenario", CRITERIA / "rty"]
        + ["--results", "r.json", "--report-dir", "rep"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    first = proc.stderr.readline()
    assert first.startswith("[1/"), first
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    validate_results(doc)
    assert doc["run"]["interrupted"] is True
    ran = [s["id"] for s in doc["agents"][0]["scenarios"]]
    assert 1 <= len(ran) < len(list((CRITERIA / "rty").glob("*.yaml")))
    assert "Interrupted run" in (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")


def test_non_scenario_yaml_in_a_directory_is_skipped(tmp_path):
    d = tmp_path / "suite"
    d.mkdir()
    (d / RTY01.name).write_text(RTY01.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "ci.yaml").write_text(textwrap.dedent("on: [push]\njobs: {}\n"), encoding="utf-8")
    proc = pytest_run(tmp_path, "--conformance", "--collect-only", "-q", d)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rty-01-retry-after-seconds[reference]" in proc.stdout
    assert "ci.yaml" not in proc.stdout


def test_a_bad_scenario_is_a_collection_error_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: bad\ncriteria: [RTY-01]\nprompt: hi\nscript:\n  - reply: {nonsense: 1}\n", "utf-8"
    )
    proc = pytest_run(tmp_path, "--conformance", bad)
    assert proc.returncode == 2, proc.stdout  # pytest: interrupted by a collection error
    assert f"{bad}:5: script[0].reply" in proc.stdout


def test_plugin_dialect_option_serves_and_records_the_dialect(tmp_path, one_shot):
    results = tmp_path / "r.json"
    proc = pytest_run(
        tmp_path,
        "--conformance",
        "--conformance-dialect",
        "openai_responses",
        "--conformance-results",
        results,
        "--conformance-agent",
        "reference",
        "--conformance-agent",
        one_shot,  # declares no dialect capability
        RTY01,
    )
    doc = json.loads(results.read_text(encoding="utf-8"))
    validate_results(doc)
    assert doc["run"]["dialect"] == "openai_responses"
    got = verdicts(doc)
    assert got["reference"]["RTY-01"] == "PASS", proc.stdout[-2000:]
    one = next(a for a in doc["agents"] if a["name"] != "reference")
    assert {c["verdict"] for c in one["criteria"].values()} == {"UNSUPPORTED"}
    ref = next(a for a in doc["agents"] if a["name"] == "reference")
    entries = ref["scenarios"][0]["journal"]["entries"]
    assert {e["dialect"] for e in entries} == {"openai_responses"}
    assert "--dialect openai_responses" in ref["scenarios"][0]["rerun"]


def test_the_longest_scenarios_are_dealt_one_to_each_process_at_the_start() -> None:
    from conformance.plugin import dealt

    ordered = list(range(151))  # longest first: 0 is the longest
    out = dealt(ordered, 4)
    assert sorted(out) == ordered
    # pytest-xdist's work stealing hands the 4 processes 37, 38, 38 and 38 items in a row.
    starts = [0, 37, 75, 113]
    assert [out[s] for s in starts] == [0, 1, 2, 3]  # each starts with one of the 4 longest
    for s, e in zip(starts, [*starts[1:], 151], strict=True):
        part = out[s:e]
        assert part == sorted(part)  # then shorter and shorter
    assert dealt(ordered, 1) == ordered
    assert dealt([], 3) == []
