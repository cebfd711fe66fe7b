"""is_failed: an event injected mid-stream fails the attempt even when the rest, [DONE]
included, was written after it (a small body goes out whole before the client reads it)."""

from __future__ import annotations

from conformance.judging.evidence import is_failed

_BAD = 'data: {"choices": [{"delta": \n\n'
_OWN = ['data: {"role": 1}\n\n', 'data: {"t": 1}\n\n', 'data: {"f": 1}\n\n', "data: [DONE]\n\n"]


def _entry(after: int) -> dict:
    frames = _OWN[:after] + [_BAD] + _OWN[after:]
    sent = "".join(frames)
    return {
        "fault": "malformed_event",
        "fault_params": {"after_events": after, "kind": "bad_json"},
        "response": {
            "status": 200,
            "end": "complete",
            "sent": sent,
            "sent_bytes": len(sent),
            "full_bytes": len(sent) - len(_BAD),
        },
    }


def test_bad_event_before_done_fails_the_attempt_though_done_was_sent() -> None:
    assert is_failed(_entry(2))
    assert is_failed(_entry(3))  # right before [DONE]


def test_bad_event_after_done_is_no_failure() -> None:
    assert not is_failed(_entry(4))


def test_a_client_that_left_early_still_fails_it() -> None:
    e = _entry(4)
    e["response"]["end"] = "reset"
    assert is_failed(e)
