"""The fault primitives that change only how a reply is delivered, never its bytes.

``rechunk`` moves the write boundaries: real proxies re-chunk SSE, and a client parser that
assumes one event per read breaks behind them. ``pace`` spaces the events in time, as a real
model streams. Neither leaves a client anything to recover from (``symptom`` None, ``reshapes``):
an agent must show the reply the wire delivered, however it came, which STR-09 judges.

Both act on the chunks of a plan (``fakes.response``): ``rechunk`` cuts them at its piece
boundaries and marks each piece's end with ``flush`` (the writer, ``fakes.writer``, writes a
piece at a time), ``pace`` gives each event its ``delay``. A piece of a cut chunk carries the
chunk's event only if it completes it, as a cut at a byte does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from fakes.fault_base import SECONDS, Context, Fault
from fakes.response import Chunk, Plan

__all__ = ["Pace", "Rechunk"]

_SIZE = {"type": "integer", "minimum": 1}


def _boundaries(sizes: list[int], total: int) -> Iterator[int]:
    """Byte offsets where pieces of ``sizes`` (used in turn, again and again) end, < total."""
    pos = 0
    for size in itertools.cycle(sizes):
        pos += size
        if pos >= total:
            return
        yield pos


def _mid_lines(chunks: list[Chunk]) -> Iterator[int]:
    """An offset in the middle of the ``data:`` line (else the first line) of every chunk of
    two bytes or more. The payload line, not an ``event:`` line before it: a client that reads
    only ``data:`` lines and drops a line a read cuts must lose the event."""
    pos = 0
    for c in chunks:
        data = c.data.find(b"data:")
        start = data if data == 0 or (data > 0 and c.data[data - 1 : data] == b"\n") else 0
        end = c.data.find(b"\n", start)
        line = (end if end > start else len(c.data)) - start
        if len(c.data) >= 2:
            yield pos + min(len(c.data) - 1, start + max(1, line // 2))
        pos += len(c.data)


def _cut(chunks: list[Chunk], at: Iterator[int], interval: float) -> list[Chunk]:
    """``chunks`` cut at the increasing offsets ``at``: each piece ends with a flush, and each
    piece after the first waits ``interval``."""
    out: list[Chunk] = []
    pos = 0
    nxt = next(at, None)
    for c in chunks:
        end, start = pos + len(c.data), 0
        while nxt is not None and nxt < end:  # a boundary inside this chunk
            out.append(Chunk(c.data[start : nxt - pos], c.delay if not start else 0.0, False, True))
            start, nxt = nxt - pos, next(at, None)
        at_end = nxt == end
        if at_end:
            nxt = next(at, None)
        out.append(Chunk(c.data[start:], c.delay if not start else 0.0, c.event, at_end or c.flush))
        pos = end
    if interval:
        for prev, c in zip(out, out[1:], strict=False):
            if prev.flush and not c.delay:
                c.delay = interval
    return out


class Rechunk(Fault):
    name = "rechunk"
    reshapes = True
    params = {
        "type": "object",
        "additionalProperties": False,
        "oneOf": [{"required": ["bytes"]}, {"required": ["split_events"]}],
        "properties": {
            "bytes": {
                "description": "Write the body in pieces of this many bytes, or of these sizes "
                "in turn (again and again), with a flush after each.",
                "oneOf": [_SIZE, {"type": "array", "minItems": 1, "items": _SIZE}],
            },
            "split_events": {
                "description": "Cut every event in the middle of its data: line (its first "
                "line when it has none): each write ends half-way through a line (a JSON body: "
                "cut in two).",
                "const": True,
            },
            "interval": {
                **SECONDS,
                "description": "Seconds between two pieces (default 0: a flush only).",
            },
        },
    }

    def _pieces(self, chunks: list[Chunk], p: dict[str, Any], body: bool) -> list[Chunk]:
        total = sum(len(c.data) for c in chunks)
        if "bytes" in p:
            size = p["bytes"]
            at = _boundaries([int(s) for s in (size if isinstance(size, list) else [size])], total)
        elif body:
            at = iter([total // 2] if total >= 2 else [])
        else:
            at = _mid_lines(chunks)
        return _cut(chunks, at, float(p.get("interval", 0)))

    def on_body(self, plan: Plan, raw: bytes, p: dict[str, Any]) -> list[Chunk]:
        return self._pieces([Chunk(raw, event=False)], p, body=True)

    def event_gap_s(self, p: dict[str, Any], sent: bytes) -> float:
        """Piece ``k`` goes out ``k * interval`` after the headers; an event is complete with
        the piece holding its last byte. The events are read back from the blank lines; bytes
        after the last one (a client that left mid-event) count as an event still awaited."""
        interval = float(p.get("interval", 0))
        *whole, tail = sent.split(b"\n\n")
        events = [e + b"\n\n" for e in whole] + ([tail] if tail else [])
        if not interval or not events:
            return 0.0
        chunks = [Chunk(e) for e in events]
        total = sum(len(e) for e in events)
        if "bytes" in p:
            size = p["bytes"]
            at = _boundaries([int(s) for s in (size if isinstance(size, list) else [size])], total)
        else:
            at = _mid_lines(chunks)
        cuts, worst, before, end = list(at), 0, 0, 0
        for e in events:
            end += len(e)
            piece = sum(1 for b in cuts if b <= end - 1)  # the piece of the event's last byte
            worst, before = max(worst, piece - before), piece
        return worst * interval

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        return self._pieces(chunks, p, body=not plan.stream)

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        cut = dict(
            draw(
                st.one_of(
                    st.builds(lambda n: {"bytes": n}, st.integers(1, 64)),
                    st.builds(
                        lambda ns: {"bytes": ns},
                        st.lists(st.integers(1, 32), min_size=1, max_size=4),
                    ),
                    st.just({"split_events": True}),
                )
            )
        )
        # Spaced pieces reach a client in reads of their own; back to back, loopback may join
        # them into one read. Small pieces far apart keep an event waiting long (STR-09 then
        # leaves the stream out, ``event_gap_s``).
        interval = draw(st.sampled_from([0, 0.02, 0.5]))
        return {**cut, "interval": interval} if interval else cut


class Pace(Fault):
    name = "pace"
    reshapes = True
    stream_only = True
    params = {
        "type": "object",
        "additionalProperties": False,
        "oneOf": [{"required": ["events_per_s"]}, {"required": ["token_latency"]}],
        "properties": {
            "events_per_s": {
                "description": "Events per second, as a model streams tokens.",
                "type": "number",
                "exclusiveMinimum": 0,
            },
            "token_latency": {
                **SECONDS,
                "description": "Seconds from one event to the next (one event: one token).",
            },
            "first_token": {
                **SECONDS,
                "description": "Seconds from the headers to the first event (default 0).",
            },
        },
    }

    def on_stream(
        self, chunks: list[Chunk], n: int, plan: Plan, p: dict[str, Any], ctx: Context
    ) -> list[Chunk]:
        """Each event due a gap after the one before (the first ``first_token`` after the
        headers); what is no event goes out with the event before it."""
        rate = p.get("events_per_s")
        gap = 1.0 / float(rate) if rate else float(p["token_latency"])
        first, seen = float(p.get("first_token", 0)), 0
        out: list[Chunk] = []
        for c in chunks:
            delay = 0.0
            if c.event:
                delay, seen = (gap if seen else first), seen + 1
            out.append(Chunk(c.data, delay, c.event, c.flush))
        return out

    def event_gap_s(self, p: dict[str, Any], sent: bytes) -> float:
        rate = p.get("events_per_s")
        gap = 1.0 / float(rate) if rate else float(p["token_latency"])
        return max(gap, float(p.get("first_token", 0)))

    def draw_params(self, draw: Any, reply: dict[str, Any]) -> dict[str, Any]:
        from hypothesis import strategies as st

        pace = draw(
            st.one_of(
                st.builds(lambda r: {"events_per_s": r}, st.sampled_from([20, 100, 1000])),
                st.builds(lambda s: {"token_latency": s}, st.sampled_from([0.005, 0.05])),
            )
        )
        return {**pace, "first_token": draw(st.sampled_from([0, 0.5]))}
