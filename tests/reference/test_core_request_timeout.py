"""RTY-06, request timeouts in the sans-IO core: ``config.request_timeout_s`` bounds the wait for
response headers; a timed-out attempt is retried like any failure before headers."""

from __future__ import annotations

from datetime import UTC, datetime

from conformance.reference.core import (
    Aborted,
    Behaviours,
    BodyEnded,
    CancelRequest,
    CancelTimer,
    ConnectFailed,
    EndTurn,
    HeadersReceived,
    NoteRetry,
    Phase,
    SendRequest,
    ShowError,
    StartTimer,
    TimerFired,
    TurnCore,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LIMIT_S = 5.0


class Drive:
    """Feeds events by hand; records every action and the timers by purpose."""

    def __init__(self, behaviours: Behaviours = Behaviours(), **config) -> None:  # noqa: B008
        start = {"model": "m", "prompt": "say hi", "config": config}
        self.core = TurnCore(start, behaviours=behaviours, rand=lambda: 0.5)
        self.log: list = []
        self._take(self.core.begin(0.0))

    def _take(self, out: list) -> list:
        self.log += out
        return out

    def feed(self, event) -> list:
        return self._take(self.core.handle(event, 0.0))

    def of(self, kind) -> list:
        return [a for a in self.log if isinstance(a, kind)]

    def timers(self, purpose: str) -> list[StartTimer]:
        return [t for t in self.of(StartTimer) if t.purpose == purpose]

    @property
    def rid(self) -> int:
        return self.of(SendRequest)[-1].request_id

    def time_out(self) -> list:
        """Fire the request timer of the attempt in flight."""
        return self.feed(TimerFired(self.timers("request")[-1].timer_id))

    def wait_out(self) -> list:
        return self.feed(TimerFired(self.timers("wait")[-1].timer_id))


def test_no_request_timer_without_the_config_key():
    d = Drive()
    assert d.of(SendRequest) and not d.timers("request")
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    assert not d.of(CancelTimer)


def test_each_request_starts_its_timer_and_headers_cancel_it():
    d = Drive(request_timeout_s=LIMIT_S)
    (timer,) = d.timers("request")
    assert timer.delay_s == LIMIT_S  # unscaled: the driver applies the time scale
    out = d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    assert CancelTimer(timer.timer_id) in out
    # Fired anyway (the cancel raced the timer): stale, nothing happens.
    assert d.feed(TimerFired(timer.timer_id)) == []
    assert d.core.phase is Phase.BODY


def test_a_timeout_cancels_the_request_and_retries_it_with_backoff():
    d = Drive(request_timeout_s=LIMIT_S)
    first = d.of(SendRequest)[-1]
    out = d.time_out()
    assert out[0] == CancelRequest(first.request_id)  # the connection goes before the wait
    (note,) = [a for a in out if isinstance(a, NoteRetry)]
    assert note.attempt == 1 and note.delay_s == 0.5 and "timeout" in note.reason
    assert d.timers("wait")[-1].delay_s == 0.5  # the 429 backoff (jitter factor 1)
    assert d.core.phase is Phase.WAIT
    # A late event about the abandoned request is stale.
    assert d.feed(ConnectFailed(first.request_id, "reset")) == []
    d.wait_out()
    second = d.of(SendRequest)[-1]
    assert second.request_id != first.request_id and second.body == first.body  # RTY-12
    assert len(d.timers("request")) == 2  # the retry has its own limit
    d.feed(HeadersReceived(d.rid, 200, {}, NOW))
    d.feed(BodyEnded(d.rid, ""))


def test_timeouts_spend_the_retry_budget_then_take_the_fallback():
    d = Drive(request_timeout_s=LIMIT_S)
    waits = []
    for _ in range(11):
        d.time_out()
        if d.core.phase is Phase.WAIT:
            waits.append(d.timers("wait")[-1].delay_s)
            d.wait_out()
    assert waits == [0.5, 1, 2, 4, 8, 16, 32, 32, 32, 32]  # RTY-03 with its cap
    sends = [s.body["stream"] for s in d.of(SendRequest)]
    assert sends == [True] * 11 + [False]  # STR-05: then one non-streaming fallback
    assert d.core.phase is Phase.REQUEST and not d.of(EndTurn)


def test_a_timeout_mixed_with_resets_shares_one_budget():
    d = Drive(request_timeout_s=LIMIT_S, stream_fallback=False)
    for i in range(11):
        if i % 2:
            d.time_out()
        else:
            d.feed(ConnectFailed(d.rid, "reset", "reset by peer"))
        if d.core.phase is Phase.WAIT:
            d.wait_out()
    assert len(d.of(NoteRetry)) == 10 and len(d.of(SendRequest)) == 11
    assert d.of(EndTurn) == [EndTurn("error")]
    assert "after 10 retries" in d.of(ShowError)[-1].message


def test_switch_off_a_timeout_is_not_retried():
    d = Drive(Behaviours(retry_connection_errors=False), request_timeout_s=LIMIT_S)
    d.time_out()
    assert len(d.of(SendRequest)) == 1 and not d.of(NoteRetry)
    (err,) = d.of(ShowError)
    assert err.kind == "timeout" and f"{LIMIT_S:g} s" in err.message
    assert d.of(EndTurn) == [EndTurn("error")]


def test_a_timed_out_title_request_is_given_up_and_the_turn_goes_on():
    d = Drive(request_timeout_s=LIMIT_S, background_title=True)
    title = d.of(SendRequest)[-1]
    assert title.purpose == "title" and d.timers("request")
    out = d.time_out()
    assert out[0] == CancelRequest(title.request_id)
    chat = d.of(SendRequest)[-1]
    assert chat.purpose == "chat" and not d.of(NoteRetry)  # RTY-09: never retried
    assert len(d.timers("request")) == 2


def test_an_abort_while_waiting_for_headers_cancels_the_timer():
    d = Drive(request_timeout_s=LIMIT_S)
    timer = d.timers("request")[-1]
    out = d.feed(Aborted())
    assert CancelTimer(timer.timer_id) in out and CancelRequest(d.rid) in out
    assert d.of(EndTurn) == [EndTurn("aborted")]


def test_a_config_value_that_is_not_a_positive_number_sets_no_limit():
    for value in (0, -3, "soon", None):
        assert not Drive(request_timeout_s=value).timers("request"), value
