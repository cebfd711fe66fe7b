"""Expectations files: loading with file:line errors, the regression rule, update round trip."""

from __future__ import annotations

import pytest

from conformance.expectations import (
    Expectation,
    Expectations,
    ExpectationsError,
    compare_results,
    load_expectations,
    updated_expectations,
    write_expectations,
)


def doc_with(verdicts: dict[str, str], agent: str = "agent-x") -> dict:
    """A hand-built results document: one agent, one scenario per criterion."""
    return {
        "agents": [
            {
                "name": agent,
                "criteria": {
                    cid: {"verdict": v, "scenarios": [{"id": "s", "verdict": v}]}
                    for cid, v in verdicts.items()
                },
                "scenarios": [{"id": "s", "status": "ran"}],
            }
        ]
    }


def write(tmp_path, text: str):
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_a_good_file(tmp_path):
    path = write(
        tmp_path,
        "# known\n"
        "- criterion: RTY-03\n  verdict: FAIL\n  reason: backoff in 2.4\n"
        "- {criterion: DBG-01, verdict: UNSUPPORTED, agent: cmd:./a}\n",
    )
    exp = load_expectations(path)
    assert exp.entries == [
        Expectation("RTY-03", "FAIL", "backoff in 2.4", None, 2),
        Expectation("DBG-01", "UNSUPPORTED", "", "cmd:./a", 5),
    ]
    assert load_expectations(write(tmp_path, "")).entries == []


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            "- criterion: RTY-03\n  verdict: FAIL\n- criterion: NOPE-01\n  verdict: FAIL\n",
            3,
            "unknown criterion ID 'NOPE-01'",
        ),
        ("- criterion: RTY-03\n  verdict: BROKEN\n", 1, "unknown verdict 'BROKEN'"),
        ("- criterion: RTY-03\n  verdict: FAIL\n  reson: typo\n", 1, "unknown key 'reson'"),
        ("- verdict: FAIL\n", 1, "'criterion' is required"),
        ("criterion: RTY-03\n", 1, "is a YAML list"),
        ("- just text\n", 1, "each entry is a mapping"),
        (
            "- {criterion: RTY-03, verdict: FAIL}\n\n- {criterion: RTY-03, verdict: PASS}\n",
            3,
            "already expected at line 1",
        ),
        ("- {criterion: RTY-03, verdict: FAIL\n", 2, "not valid YAML"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(ExpectationsError) as exc:
        load_expectations(path)
    assert str(exc.value).startswith(f"{path}:{line}: "), str(exc.value)
    assert words in str(exc.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ExpectationsError, match="no-such.yaml: cannot read"):
        load_expectations(tmp_path / "no-such.yaml")


def judge(expected: str | None, observed: str, strict: bool = False) -> str:
    entries = [Expectation("RTY-03", expected)] if expected else []
    return Expectations(entries).judge("a", "RTY-03", observed, strict=strict)[0]


@pytest.mark.parametrize(
    ("expected", "observed", "strict", "kind"),
    [
        (None, "PASS", False, "ok"),
        (None, "FAIL", False, "regression"),
        (None, "ERROR", False, "regression"),
        (None, "TIMEOUT", False, "regression"),
        (None, "NON-STRICT", False, "ok"),
        (None, "NON-STRICT", True, "regression"),
        ("FAIL", "FAIL", False, "expected"),
        ("FAIL", "ERROR", False, "regression"),  # worse than expected
        ("NON-STRICT", "FAIL", False, "regression"),
        ("UNSUPPORTED", "FAIL", False, "regression"),
        ("FAIL", "PASS", False, "fixed"),  # better: reported, never failing
        ("FAIL", "NON-STRICT", True, "fixed"),
        ("ERROR", "FAIL", False, "fixed"),
        ("NON-STRICT", "NON-STRICT", True, "expected"),
        ("PASS", "INFORMATIONAL", False, "ok"),
    ],
)
def test_the_regression_rule(expected, observed, strict, kind):
    assert judge(expected, observed, strict) == kind


def test_an_agent_specific_entry_wins_over_the_general_one():
    exp = Expectations(
        [Expectation("RTY-03", "FAIL", "all"), Expectation("RTY-03", "ERROR", "b only", "b")]
    )
    assert exp.lookup("a", "RTY-03").reason == "all"
    assert exp.lookup("b", "RTY-03").reason == "b only"
    assert exp.judge("a", "RTY-03", "ERROR")[0] == "regression"
    assert exp.judge("b", "RTY-03", "ERROR")[0] == "expected"


def test_compare_results_sorts_findings():
    doc = doc_with({"RTY-01": "FAIL", "RTY-03": "PASS", "STR-01": "ERROR", "STR-09": "FAIL"})
    exp = Expectations([Expectation("RTY-03", "FAIL", "why"), Expectation("STR-09", "FAIL")])
    cmp = compare_results(doc, exp)
    assert [f.criterion for f in cmp.regressions] == ["RTY-01", "STR-01"]
    assert [f.criterion for f in cmp.fixed] == ["RTY-03"]
    assert [f.criterion for f in cmp.expected_failures] == ["STR-09"]
    # Old text, even with no expectations file at all: "FAIL, expected no failing verdict".
    assert cmp.regressions[0].describe() == "RTY-01 [agent-x]: FAIL"
    assert compare_results(doc_with({"RTY-01": "PASS"})).regressions == []


def test_update_round_trips_and_keeps_reasons(tmp_path):
    path = tmp_path / "exp.yaml"
    old = Expectations(
        [
            Expectation("RTY-03", "FAIL", "backoff: ticket 7"),
            Expectation("STR-01", "FAIL", "fixed since"),
            Expectation("TRN-01", "ERROR", "not run this time"),
        ]
    )
    doc = doc_with({"RTY-03": "ERROR", "STR-01": "PASS", "RTY-01": "NON-STRICT", "STR-09": "FAIL"})
    new = updated_expectations(doc, old)
    write_expectations(path, new)
    back = load_expectations(path)
    got = {(e.criterion, e.verdict, e.reason) for e in back.entries}
    assert got == {
        ("RTY-01", "NON-STRICT", "recorded by --update-expectations"),
        ("RTY-03", "ERROR", "backoff: ticket 7"),  # new verdict, the old reason
        ("STR-09", "FAIL", "recorded by --update-expectations"),
        ("TRN-01", "ERROR", "not run this time"),  # not judged by this run: kept
    }
    # STR-01 passes now: its entry is gone. The written file makes the run pass.
    assert compare_results(doc, back).regressions == []
    assert compare_results(doc, back, strict=True).regressions == []
    # Writing what was read gives the same file.
    first = path.read_text(encoding="utf-8")
    write_expectations(path, load_expectations(path))
    assert path.read_text(encoding="utf-8") == first


def test_empty_update_writes_a_loadable_file(tmp_path):
    path = tmp_path / "exp.yaml"
    write_expectations(path, updated_expectations(doc_with({"RTY-01": "PASS"})))
    assert load_expectations(path).entries == []


def flaky_doc(runs: list[str], settled: str) -> dict:
    """One criterion whose scenario verdict --verify found flaky."""
    v = {"id": "s", "verdict": settled, "flaky": True, "runs": [{"verdict": r} for r in runs]}
    return {
        "agents": [
            {
                "name": "agent-x",
                "criteria": {"RTY-05": {"verdict": settled, "flaky": True, "scenarios": [v]}},
                "scenarios": [{"id": "s", "status": "ran"}],
            }
        ]
    }


def test_a_flaky_mark_judges_a_flaky_verdict_by_its_best_run(tmp_path):
    doc = flaky_doc(["FAIL", "PASS", "FAIL"], "FAIL")
    plain = Expectations([Expectation("RTY-05", "PASS")])
    marked = Expectations([Expectation("RTY-05", "PASS", flaky=True)])
    assert [f.criterion for f in compare_results(doc, plain).regressions] == ["RTY-05"]
    assert compare_results(doc, marked).regressions == []
    # A failure every run reproduced is not flaky: the mark does not excuse it.
    steady = doc_with({"RTY-05": "FAIL"})
    assert [f.criterion for f in compare_results(steady, marked).regressions] == ["RTY-05"]


def test_flaky_is_read_written_and_kept_by_updates(tmp_path):
    path = write(tmp_path, "- {criterion: RTY-05, verdict: PASS, flaky: true}\n")
    (e,) = load_expectations(path).entries
    assert e.flaky is True
    bad = write(tmp_path, "- {criterion: RTY-05, verdict: PASS, flaky: sometimes}\n")
    with pytest.raises(ExpectationsError, match=r"exp.yaml:1: RTY-05: 'flaky' must be true"):
        load_expectations(bad)
    # A flaky PASS gets an entry (the mark); a later steady PASS keeps the mark.
    new = updated_expectations(flaky_doc(["FAIL", "PASS", "PASS"], "PASS"))
    assert [(x.criterion, x.verdict, x.flaky) for x in new.entries] == [("RTY-05", "PASS", True)]
    kept = updated_expectations(doc_with({"RTY-05": "PASS"}), new)
    assert [(x.criterion, x.flaky) for x in kept.entries] == [("RTY-05", True)]
    write_expectations(path, kept)
    assert "flaky: true" in path.read_text(encoding="utf-8")
    assert load_expectations(path).entries[0].flaky is True


def test_a_written_file_names_its_release_and_another_release_is_warned_of(tmp_path):
    from conformance.expectations import (
        Expectation,
        Expectations,
        load_expectations,
        write_expectations,
    )
    from conformance.release import CATALOGUE_VERSION

    path = tmp_path / "exp.yaml"
    write_expectations(
        path, Expectations([Expectation("RTY-03", "FAIL", "why")], "", CATALOGUE_VERSION)
    )
    assert f"# catalogue: {CATALOGUE_VERSION}" in path.read_text()
    loaded = load_expectations(path)
    assert loaded.catalogue_version == CATALOGUE_VERSION
    assert loaded.release_warning(CATALOGUE_VERSION) is None
    old = tmp_path / "old.yaml"
    old.write_text("# catalogue: 0.9.0\n- {criterion: RTY-03, verdict: FAIL, reason: r}\n")
    warning = load_expectations(old).release_warning(CATALOGUE_VERSION)
    assert warning and "catalogue 0.9.0" in warning and f"judged by {CATALOGUE_VERSION}" in warning
    unmarked = tmp_path / "unmarked.yaml"
    unmarked.write_text("- {criterion: RTY-03, verdict: FAIL, reason: r}\n")
    assert "before releases" in (
        load_expectations(unmarked).release_warning(CATALOGUE_VERSION) or ""
    )


def test_a_regression_names_the_file_that_does_not_expect_it(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("- {criterion: STR-09, verdict: FAIL, reason: known}\n", encoding="utf-8")
    cmp = compare_results(doc_with({"RTY-01": "FAIL"}), load_expectations(path))
    assert cmp.regressions[0].describe() == f"RTY-01 [agent-x]: FAIL; not expected by {path}"
