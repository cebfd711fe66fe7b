"""Which MUST criteria a run leaves uncertified, and in which words (the index, summary.md)."""

from __future__ import annotations

from reports.model import AgentView, Report


def _criterion(cid: str) -> dict:
    return {"id": cid, "level": "MUST", "area": cid[:3], "title": cid, "dialects": None}


def _agent(criteria: dict[str, list[str]], aggregate: dict[str, str]) -> AgentView:
    data = {
        "name": "agent-x",
        "criteria": {
            cid: {
                "verdict": aggregate[cid],
                "scenarios": [{"id": f"s{n}", "verdict": v} for n, v in enumerate(vs)],
            }
            for cid, vs in criteria.items()
        },
    }
    return AgentView("agent-x", data, {"dialect": "openai_chat"})


def test_a_criterion_passed_somewhere_and_timed_out_elsewhere_was_judged() -> None:
    # Old text listed DBG-02 among the "MUST criteria judged by no scenario" although a
    # scenario had judged it PASS: its aggregate was TIMEOUT.
    agent = _agent(
        {"DBG-02": ["PASS", "TIMEOUT"], "ERR-05": ["TIMEOUT"], "RTY-01": ["PASS"]},
        {"DBG-02": "TIMEOUT", "ERR-05": "TIMEOUT", "RTY-01": "PASS"},
    )
    report = Report([], [_criterion(c) for c in ("DBG-02", "ERR-05", "RTY-01")], [agent])
    assert report.must_unjudged(agent) == ["ERR-05"]
    assert report.must_unsettled(agent) == ["DBG-02"]
