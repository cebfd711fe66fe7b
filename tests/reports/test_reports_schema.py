"""validate_results: accepts the sample, rejects bad documents with file and JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from reports import ResultsError, load_schema, validate_results
from reports.cli import load_results

SAMPLE = Path(__file__).with_name("sample_results.json")


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text("utf-8"))


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(load_schema())


def test_sample_is_valid(sample):
    validate_results(sample)


def test_sample_covers_every_verdict(sample):
    seen = {r["verdict"] for a in sample["agents"] for r in a["criteria"].values()}
    assert seen == {
        "PASS",
        "FAIL",
        "NON-STRICT",
        "UNSUPPORTED",
        "INFORMATIONAL",
        "ERROR",
        "TIMEOUT",
    }


def test_bad_verdict_names_path(sample):
    sample["agents"][1]["criteria"]["RTY-01"]["verdict"] = "MAYBE"
    with pytest.raises(ResultsError) as exc:
        validate_results(sample, source="run.json")
    msg = str(exc.value)
    assert msg.startswith("run.json: at $.agents[1].criteria.RTY-01.verdict")
    assert "MAYBE" in msg


def test_missing_key(sample):
    del sample["run"]
    with pytest.raises(ResultsError, match=r"at \$: 'run' is a required property"):
        validate_results(sample)


def test_unknown_criterion(sample):
    sample["agents"][0]["criteria"]["ZZZ-99"] = {"verdict": "PASS", "scenarios": []}
    with pytest.raises(ResultsError, match="ZZZ-99.*not in the catalogue"):
        validate_results(sample)


def test_dangling_scenario(sample):
    sample["agents"][0]["criteria"]["RTY-01"]["scenarios"][0]["id"] = "nope"
    with pytest.raises(ResultsError, match="scenario 'nope' not among"):
        validate_results(sample)


def test_load_results_bad_json(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("{nope", "utf-8")
    with pytest.raises(ResultsError, match=r"r\.json: not valid JSON"):
        load_results(p)


def test_load_results_wrong_format(tmp_path, sample):
    sample["format"] = "other"
    p = tmp_path / "r.json"
    p.write_text(json.dumps(sample), "utf-8")
    with pytest.raises(ResultsError, match=r"r\.json: at \$\.format"):
        load_results(p)
