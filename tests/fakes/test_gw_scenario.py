"""Scenario loader: valid files load; errors name file, line, value and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes import Scenario, ScenarioError, load_scenario, load_scenarios
from fakes.scenario import schema

GOOD = """\
id: {id}
title: t
criteria: [STR-01]
capabilities: [time_scale]
prompt: Say hello.
deadline: 30
tls: false
abort: {{when_step: 1}}
history: []
config: {{fallback_model: null}}
tools:
  - {{name: write_file, description: w, parameters: {{type: object}}}}
tool_host:
  write_file:
    - output: ok
    - hang: 30
script:
  - fault: {{http_error: {{status: 429, headers: {{Retry-After: "2"}}}}}}
  - times: 3
    fault: {{http_error: {{status: 503}}}}
  - match: {{stream: false}}
    reply: {{text: "Hello!", finish_reason: stop}}
  - reply:
      text: partial
      tool_calls: [{{id: c1, name: write_file, arguments: "{{}}"}}]
      finish_reason: null
      chunk_chars: 8
    fault: {{cut: {{after_events: 3, mode: reset}}}}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


def test_full_scenario_loads(tmp_path):
    sc = load_scenario(write(tmp_path, "good", GOOD.format(id="good")))
    assert sc.id == "good" and sc.criteria == ["STR-01"] and sc.deadline == 30
    assert [st.times for st in sc.script] == [1, 3, 1, 1]
    assert sc.script[3].fault_name == "cut" and sc.script[3].fault_params["after_events"] == 3
    assert sc.tool_host["write_file"][1] == {"hang": 30} and sc.abort == {"when_step": 1}


def test_bad_enum_names_file_line_path_value_allowed(tmp_path):
    text = GOOD.format(id="bad").replace("mode: reset", "mode: rst")
    p = write(tmp_path, "bad", text)
    with pytest.raises(ScenarioError) as ei:
        load_scenario(p)
    line = text.splitlines().index("    fault: {cut: {after_events: 3, mode: rst}}") + 1
    assert str(ei.value) == (
        f"{p}:{line}: script[3].fault.cut.mode: 'rst' is not one of ['reset', 'close']"
    )


def test_unknown_key_rejected_with_allowed_list(tmp_path):
    p = write(tmp_path, "u", "id: u\ncriteria: []\nprompt: p\nscript: [{reply: {}}]\nbogus: 1\n")
    with pytest.raises(ScenarioError, match=r"u\.yaml:\d+: .*'bogus'.*allowed: abort"):
        load_scenario(p)


@pytest.mark.parametrize("missing", ["id", "criteria", "prompt", "script"])
def test_required_keys(missing):
    d = {"id": "x", "criteria": [], "prompt": "p", "script": [{"reply": {}}]}
    del d[missing]
    with pytest.raises(ScenarioError, match=f"'{missing}' is a required property"):
        Scenario.from_dict(d)


def test_fault_with_two_primitives_rejected():
    d = {
        "id": "x",
        "criteria": [],
        "prompt": "p",
        "script": [{"reply": {}, "fault": {"cut": {"after_events": 1}, "stall": {}}}],
    }
    with pytest.raises(ScenarioError, match=r"script\[0\]\.fault"):
        Scenario.from_dict(d)


def test_stream_only_fault_on_non_stream_step_rejected():
    d = {
        "id": "x",
        "criteria": [],
        "prompt": "p",
        "script": [{"match": {"stream": False}, "reply": {}, "fault": {"finish_without_done": {}}}],
    }
    with pytest.raises(ScenarioError, match="stream-only"):
        Scenario.from_dict(d)


def test_id_must_equal_stem_and_yaml_errors(tmp_path):
    with pytest.raises(ScenarioError, match="must equal the file stem"):
        load_scenario(write(tmp_path, "other", GOOD.format(id="good")))
    with pytest.raises(ScenarioError, match=r"broken\.yaml:\d+: invalid YAML"):
        load_scenario(write(tmp_path, "broken", "id: [unclosed\n"))


def test_load_directory_recursive(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path, "a", GOOD.format(id="a"))
    write(tmp_path / "sub", "b", GOOD.format(id="b"))
    (tmp_path / "schema.json").write_text("{}")
    assert [s.id for s in load_scenarios(tmp_path)] == ["a", "b"]


def test_example_fault_scenarios_load():
    root = Path(__file__).resolve().parents[2] / "scenarios" / "faults"
    scs = load_scenarios(root)
    names = {st.fault_name for s in scs for st in s.script} - {None}
    allowed = set(schema()["$defs"]["fault"]["properties"])
    assert names == allowed
    assert all(s.id == s.source.rsplit("/", 1)[-1].removesuffix(".yaml") for s in scs)
