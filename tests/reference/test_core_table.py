"""The recovery core's transition table: complete, consistent with the core, and enforced."""

from __future__ import annotations

import pytest

from conformance.reference.core import (
    ACCEPTS,
    TRANSITIONS,
    Aborted,
    BodyEnded,
    ConnectFailed,
    CoreError,
    HeadersReceived,
    Phase,
    SendRequest,
    TimerFired,
    ToolOutcome,
    TurnCore,
)

LIVE = set(Phase) - {Phase.START, Phase.DONE}


def _core(**start) -> TurnCore:
    return TurnCore({"model": "m", "prompt": "hi", "config": {}, **start}, rand=lambda: 0.5)


def test_every_row_names_a_handler_of_the_core_and_at_least_one_next_phase():
    for (phase, key), row in TRANSITIONS.items():
        assert callable(getattr(TurnCore, row.handler, None)), (phase, key, row.handler)
        assert row.next, (phase, key)
        assert Phase.START not in row.next, (phase, key)


def test_abort_and_tool_events_are_accepted_in_every_live_phase_and_nothing_after_the_end():
    for phase in LIVE:
        assert {Aborted, ToolOutcome, TimerFired} <= ACCEPTS[phase], phase
    assert ACCEPTS[Phase.DONE] == frozenset() == ACCEPTS[Phase.START]


def test_accepts_is_derived_from_the_table():
    assert ACCEPTS[Phase.REQUEST] == {ConnectFailed, HeadersReceived, TimerFired} | {
        Aborted,
        ToolOutcome,
    }
    # A chunk has a row only while a body is read.
    assert [p for p in Phase if any(t.__name__ == "Chunk" for t in ACCEPTS[p])] == [Phase.BODY]


def test_a_request_answered_whole_walks_request_body_done():
    core = _core(stream=False)
    (send,) = [a for a in core.begin(0.0) if isinstance(a, SendRequest)]
    assert core.phase is Phase.REQUEST
    rid = send.request_id
    core.handle(HeadersReceived(rid, 200, {}), 0.0)
    assert core.phase is Phase.BODY
    core.handle(BodyEnded(rid, '{"choices": [{"message": {"content": "ok"}}]}'), 0.0)
    assert core.ended and core.reason == "completed"


def test_a_handler_leading_to_a_phase_the_table_does_not_list_is_a_core_error(monkeypatch):
    core = _core()
    core.begin(0.0)
    # A (deliberately wrong) handler that claims to have reached the stop hook from a request.
    monkeypatch.setattr(core, "_on_headers", lambda event: Phase.STOP_HOOK)
    with pytest.raises(CoreError, match="_on_headers led from phase 'request'"):
        core.handle(HeadersReceived(1, 200, {}), 0.0)
    assert core.phase is Phase.REQUEST  # not taken
