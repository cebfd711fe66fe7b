from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance import __version__
from conformance.cli import build_parser, main


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_names_the_commands(capsys):
    assert main([]) == 0
    assert "list" in capsys.readouterr().out


def test_report_renders_saved_results(tmp_path):
    sample = Path(__file__).parent / "reports" / "sample_results.json"
    out = tmp_path / "out"
    assert main(["report", str(sample), "--out", str(out)]) == 0
    assert (out / "index.html").is_file()
    assert (out / "junit.xml").is_file()


def test_report_bad_input_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["report", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "bad.json" in capsys.readouterr().err


def _ci_workflow(name: str = "conformance") -> dict:
    import re

    import yaml

    text = (Path(__file__).resolve().parents[1] / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    workflows = [b for b in blocks if isinstance(b, dict) and "jobs" in b]
    assert {w["name"] for w in workflows} == {"conformance", "certify"}, "docs/ci.md workflows"
    return next(w for w in workflows if w["name"] == name)


def _conformance_commands(workflow: dict) -> list[list[str]]:
    import shlex

    out = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in str(step.get("run", "")).splitlines():
                if line.strip().startswith("conformance "):
                    out.append(shlex.split(line)[1:])
    return out


def test_ci_workflow_gates_pull_requests_and_publishes_results():
    wf = _ci_workflow()
    assert "pull_request" in wf[True]  # YAML 1.1 reads the key `on` as true
    steps = [s for job in wf["jobs"].values() for s in job["steps"]]
    runs = "\n".join(str(s.get("run", "")) for s in steps)
    (gate,) = _conformance_commands(wf)
    args = build_parser().parse_args(gate)  # every option exists in our CLI
    assert args.command == "run"
    assert args.expectations == Path("conformance-expectations.yaml")
    assert args.agent.startswith("cmd:") and args.processes == 2
    # The summary step reads summary.md from the report directory the gate writes to.
    assert f'cat {args.report_dir}/summary.md >> "$GITHUB_STEP_SUMMARY"' in runs
    upload = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert upload and str(args.junit) in upload[0]["with"]["path"].split()
    assert all(s.get("if") == "always()" for s in steps[steps.index(upload[0]) - 1 :])


def test_ci_workflow_gate_command_runs(tmp_path, monkeypatch):
    # The documented command, with the reference agent and one fast scenario instead of the
    # vendor's agent and the whole suite; run in-process, so only -n 1 here.
    (gate,) = _conformance_commands(_ci_workflow())
    monkeypatch.chdir(tmp_path)
    Path("conformance-expectations.yaml").write_text("[]\n", encoding="utf-8")
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "criteria" / "str"
    at = gate.index("-n")
    words = gate[:at] + gate[at + 2 :]  # without "-n 2"
    words += [
        "-q",
        "--agent",
        "reference",
        "--scenario",
        str(scenario / "str-09-healthy-stream.yaml"),
    ]
    assert main(words) == 0
    assert Path("junit.xml").is_file() and Path("results.json").is_file()
    assert Path("report", "summary.md").read_text(encoding="utf-8").startswith("# Conformance")


def test_run_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for words in ("0 no regression", "1 a regression", "2 usage error", "130 interrupted"):
        assert words in out


def test_bad_expectations_file_exits_2_naming_file_and_line(tmp_path, capsys):
    bad = tmp_path / "exp.yaml"
    bad.write_text("- criterion: RTY-01\n  verdict: MAYBE\n", encoding="utf-8")
    assert main(["run", "--expectations", str(bad)]) == 2
    assert f"{bad}:1: RTY-01: unknown verdict 'MAYBE'" in capsys.readouterr().err


def test_bad_process_count_exits_2(capsys):
    assert main(["run", "-n", "0"]) == 2
    assert "-n must be at least 1" in capsys.readouterr().err


def test_an_agent_that_cannot_say_hello_exits_2(capsys):
    assert main(["run", "-q", "--agent", "cmd:false"]) == 2
    assert "cmd:false: no hello line" in capsys.readouterr().err


def _expand(line: str, values: dict) -> list[str]:
    """A workflow's run line with its ``${{ matrix.x(.y) }}`` expressions filled in, split."""
    import re
    import shlex

    def value(m: re.Match) -> str:
        v = values[m.group(1)]
        return str(v[m.group(2)] if m.group(2) else v)

    return shlex.split(re.sub(r"\$\{\{\s*matrix\.(\w+)(?:\.(\w+))?\s*\}\}", value, line))


def test_sharded_workflow_runs_every_part_and_merges_them(tmp_path, monkeypatch, capsys):
    import fnmatch
    import itertools

    wf = _ci_workflow("certify")
    part, report = wf["jobs"]["part"], wf["jobs"]["report"]
    assert part["strategy"]["fail-fast"] is False
    assert report["needs"] == "part" and report["if"] == "always()"
    matrix = part["strategy"]["matrix"]
    (run_line,) = [
        s["run"] for s in part["steps"] if str(s.get("run", "")).startswith("conformance")
    ]
    (upload,) = [s for s in part["steps"] if str(s.get("uses", "")).startswith("actions/upload")]
    (download,) = [s for s in report["steps"] if "download-artifact" in str(s.get("uses", ""))]
    (merge_line,) = [s["run"] for s in report["steps"] if str(s.get("run", "")).startswith("conf")]
    monkeypatch.chdir(tmp_path)
    fast = Path(__file__).resolve().parents[1] / "scenarios" / "criteria" / "str"
    names = set()
    for agent, shard in itertools.product(matrix["agent"], matrix["shard"]):
        values = {"agent": agent, "shard": shard}
        args = build_parser().parse_args(_expand(run_line, values)[1:])
        assert args.shard == (shard, len(matrix["shard"])) and args.certify
        assert args.agent == agent["spec"]
        name = _expand(upload["with"]["name"], values)[0]
        names.add(name)
        if agent != matrix["agent"][0]:
            continue  # one agent's parts are run here; two agents merge apart in test_shard.py
        # Run it with the reference agent and two fast scenarios instead, where the part's
        # machine would, and put its results where download-artifact puts each artifact.
        words = [w if w != agent["spec"] else "reference" for w in _expand(run_line, values)[1:]]
        words += ["-q", "--scenario", str(fast / "str-09-healthy-stream.yaml")]
        words += ["--scenario", str(fast / "str-16-empty-message-once.yaml")]
        machine = tmp_path / "machine" / name
        machine.mkdir(parents=True)
        monkeypatch.chdir(machine)
        assert main(words) == 0
        dest = tmp_path / download["with"]["path"] / name
        dest.mkdir(parents=True)
        (machine / upload["with"]["path"]).rename(dest / "results.json")
    # One artifact per part and agent, and the download step picks up every one of them.
    assert len(names) == len(matrix["agent"]) * len(matrix["shard"])
    pattern = download["with"]["pattern"]
    assert all(fnmatch.fnmatch(n, pattern) for n in names)
    monkeypatch.chdir(tmp_path)
    merge = shlex_split_glob(merge_line)
    assert merge[:2] == ["conformance", "report"] and "--certify" in merge
    capsys.readouterr()
    # Two scenarios judge few MUST criteria: certification fails on those, not on a missing part.
    assert main(merge[1:]) == 1
    err = capsys.readouterr().err
    assert "judged by no scenario" in err and "missing" not in err.replace("judged by no", "")
    index = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    # The four parts are one run of one agent, not four agents side by side.
    assert 'id="incomplete"' not in index and "reference#2" not in index
    assert index.count('class="must-unsupported"') == 1


def shlex_split_glob(line: str) -> list[str]:
    """A shell line split into words, its globs expanded as the shell would (sorted)."""
    import glob
    import shlex

    out = []
    for word in shlex.split(line):
        out += sorted(glob.glob(word)) if any(c in word for c in "*?[") else [word]
    return out


CRASHER = """
import json, sys
print(json.dumps({"type": "hello", "agent": "crasher", "version": "0", "capabilities": []}))
sys.stdout.flush()
sys.stdin.readline()
sys.exit(3)
"""


def test_a_first_run_lists_failing_verdicts_not_regressions(tmp_path, monkeypatch, capsys):
    # Old text, with no expectations file at all: "regression: ERR-05 [...]: FAIL, expected no
    # failing verdict".
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    scenario = (
        Path(__file__).resolve().parents[1] / "scenarios/criteria/str/str-09-healthy-stream.yaml"
    )
    words = [
        "run",
        "-q",
        "--agent",
        f"cmd:{sys.executable} crasher.py",
        "--scenario",
        str(scenario),
    ]
    words += ["--report-dir", "report"]
    assert main(words) == 1
    err = capsys.readouterr().err
    assert "conformance: no expectations file, so every failing verdict below fails the run" in err
    assert f"failing: ERR-05 [cmd:{sys.executable} crasher.py]: FAIL\n" in err
    assert "regression" not in err and "expected no failing verdict" not in err
    Path("exp.yaml").write_text("[]\n", encoding="utf-8")
    assert main([*words, "--expectations", "exp.yaml"]) == 1
    err = capsys.readouterr().err
    assert "regression: ERR-05 [" in err and "FAIL; not expected by exp.yaml" in err
    assert "no expectations file" not in err
