"""The report's pictures: geometry for inline SVG, drawn by ``templates/pictures.html.j2``.

Theory of operation: this module turns results into shapes (numbers, verdict names, and the
text to show); the template writes them as SVG with jinja's autoescaping, so agent-controlled
text (scenario ids, fault names, tool and agent names) is escaped element text there as anywhere
else in the report, and links are built from criterion ids (held to ``AREA-NN`` by the schema)
and sanitised anchors only. The pictures need no script and nothing outside the page, and every
colour has a letter or a pattern beside it, so they read in print and without colour.

- :func:`timeline`: one scenario's requests on a time axis in scenario seconds (real time
  divided by the time scale, the unit the criteria speak in), one lane per request: a bar from
  arrival to the end of the response, hatched when the gateway injected a fault, labelled with
  the status and the fault; before each retry, the wait since the failed response ended and, when
  the results carry one (``waits``, contracts §4), the band the retry criteria allow it.
- :func:`matrix`: criteria x agents (one column per agent of each run), a cell per verdict that
  links to the criterion's page, areas in blocks that wrap to the page width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from reports.units import real
from reports.verdicts import VERDICTS

__all__ = ["LETTERS", "matrix", "timeline"]

LETTERS = {
    "PASS": "P",
    "FAIL": "F",
    "NON-STRICT": "N",
    "UNSUPPORTED": "U",
    "INFORMATIONAL": "I",
    "ERROR": "E",
    "TIMEOUT": "T",
    "UNSTABLE": "S",  # runs of --repeat disagreed
}

MAX_LANES = 60  # a picture of more requests is unreadable; the table below lists them all
# Timeline geometry (SVG user units).
_LABEL_W, _PLOT_W, _NOTE_W = 240.0, 520.0, 330.0
_LANE_H, _TOP, _AXIS_H = 20.0, 8.0, 34.0
# Matrix geometry.
_CELL, _GAP, _HEAD, _MAX_W = 20.0, 12.0, 30.0, 1000.0


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _nice_step(span: float, ticks: int = 6) -> float:
    """A round tick step (1, 2 or 5 x 10^k) giving about ``ticks`` ticks over ``span``."""
    raw = max(span, 1e-9) / ticks
    k: float = 10 ** math.floor(math.log10(raw))
    return next(m * k for m in (1, 2, 5, 10) if m * k >= raw)


def _fmt_s(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.0f}"


def _unit(scale: float) -> str:
    """What one scenario second was in real time."""
    return f"1 s = {real(scale)}"


def _mode(e: dict[str, Any]) -> str:
    body = e.get("body")
    if e.get("kind") != "chat" or not isinstance(body, dict):
        return ""
    return " (stream)" if body.get("stream") else " (non-streaming)"


def _range(band: Any) -> str:
    return f"{_fmt_s(float(band[0]))}–{_fmt_s(float(band[1]))}"


def _end_ns(e: dict[str, Any]) -> int:
    r = e.get("response") or {}
    for t in (r.get("t_end_ns"), r.get("t_headers_ns")):
        if isinstance(t, int):
            return max(t, int(e["t_arrival_ns"]))
    return int(e["t_arrival_ns"])


def _outcome(e: dict[str, Any]) -> str:
    """How the attempt went: ok, fault (the gateway injected one) or failed (no fault, but an
    error status, no response or a broken connection)."""
    r = e.get("response") or {}
    if e.get("fault"):
        return "fault"
    status = r.get("status")
    if not r or status is None or status >= 400 or r.get("end") in ("reset", "close"):
        return "failed"
    return "ok"


def _span(x: Callable[[float], float], start: float, band: Any) -> dict[str, float] | None:
    """The horizontal extent of a wait band that starts counting at ``start``."""
    if not band:
        return None
    left = x(start + float(band[0]))
    return {"x": left, "w": max(round(x(start + float(band[1])) - left, 1), 1.0)}


def timeline(
    entries: list[dict[str, Any]],
    waits: list[dict[str, Any]],
    *,
    t0: int | None,
    time_scale: float | None,
    anchor: str,
    title: str,
    link: str | None = None,
) -> dict[str, Any] | None:
    """The geometry of one scenario's timeline, or None when it has no request to draw.
    ``link`` starts each lane's link to its request (the sequence number ends it): by default
    ``#<anchor>-req-`` on the same page."""
    if not entries or t0 is None:
        return None
    scale = time_scale if time_scale and time_scale > 0 else 1.0
    shown = sorted(entries, key=lambda e: (e["t_arrival_ns"], e["seq"]))[:MAX_LANES]
    lane_of = {e["seq"]: i for i, e in enumerate(shown)}

    def nominal(t: int) -> float:
        return (t - t0) / 1e9 / scale

    ends = [nominal(_end_ns(e)) for e in shown]
    drawn_waits, span = _placed_waits(waits, lane_of, nominal, max([*ends, 1e-6]))
    step = _nice_step(span)
    span = step * math.ceil(span / step - 1e-9) or step
    unit = _PLOT_W / span

    def x(t: float) -> float:
        return round(_LABEL_W + max(t, 0.0) * unit, 1)

    lanes = [_lane(i, e, x, nominal(e["t_arrival_ns"]), ends[i]) for i, e in enumerate(shown)]
    real_scale = scale if time_scale and time_scale > 0 else None
    notes = [_note(lane, start, w, x, real_scale) for lane, start, w in drawn_waits]
    height = _TOP + len(shown) * _LANE_H
    return {
        "id": anchor,
        "title": title,
        "width": _LABEL_W + _PLOT_W + _NOTE_W,
        "height": height + _AXIS_H,
        "plot_x": _LABEL_W,
        "plot_w": _PLOT_W,
        "plot_bottom": height,
        "note_x": _LABEL_W + _PLOT_W + 8,
        "lanes": lanes,
        "notes": notes,
        "ticks": _ticks(span, step, x),
        "scale": scale,
        "link": f"#{anchor}-req-" if link is None else link,
        "unit": _unit(scale) if real_scale is not None else None,
        "omitted": max(len(entries) - len(shown), 0),
        "has_bands": any(n["band"] for n in notes),
        "legend": True,  # the page may keep it for its first picture only
    }


def _placed_waits(
    waits: list[dict[str, Any]],
    lane_of: dict[int, int],
    nominal: Callable[[int], float],
    span: float,
) -> tuple[list[tuple[int, float, dict[str, Any]]], float]:
    """The waits to draw, each with its lane and its start (scenario seconds), and the span
    of the axis widened to the end of their bands."""
    drawn = []
    for w in waits:
        seq = w.get("seq")
        lane = lane_of.get(seq) if isinstance(seq, int) else None
        if lane is None or not isinstance(w.get("from_ns"), int):
            continue
        start = nominal(w["from_ns"])
        band = w.get("band_s")
        if band:
            span = max(span, start + float(band[1]))
        drawn.append((lane, start, w))
    return drawn, span


def _lane(
    i: int, e: dict[str, Any], x: Callable[[float], float], arrival: float, end_s: float
) -> dict[str, Any]:
    """Lane ``i``: request ``e``'s bar from ``arrival`` to ``end_s`` (scenario seconds)."""
    r = e.get("response") or {}
    status = r.get("status")
    what = str(e.get("fault") or "")
    if e.get("kind") == "tool":
        what = str(e.get("tool") or "") + (
            f" ({e.get('behaviour')}), " if e.get("behaviour") else ", "
        )
    left = x(arrival)
    y = _TOP + i * _LANE_H
    end = r.get("end")
    return {
        "seq": e["seq"],
        "y": y,
        "text_y": round(y + _LANE_H * 0.68, 1),
        "label": _clip(f"#{e['seq']} {e.get('kind', '')}", 12),
        "status": "–" if status is None else str(status),
        "what": _clip(what, 22),
        "title": f"#{e['seq']} {e.get('kind', '')}{_mode(e)}: status {status}, "
        f"{'tool ' + what if e.get('kind') == 'tool' else ''}"
        f"fault {e.get('fault') or 'none'}, end {end or 'none'}",
        "outcome": _outcome(e),
        "x": left,
        "w": max(round(x(end_s) - left, 1), 2.0),
        # What the connection ended with, as a letter beside the bar (print).
        "end": {"reset": "✕ reset", "close": "| close", "client_gone": "○ gone"}.get(str(end), ""),
        "cut": r.get("cut_at_byte") is not None,
    }


def _note(
    lane: int,
    start: float,
    w: dict[str, Any],
    x: Callable[[float], float],
    real_scale: float | None,
) -> dict[str, Any]:
    """The note of wait ``w`` on ``lane``: an arrow from ``start`` to the retry, its allowed
    band, and its text (with the real seconds waited when the run was on a scaled clock)."""
    y = _TOP + lane * _LANE_H
    arrival = start + float(w["wait_s"])
    band = w.get("band_s")
    inside = None if not band else float(band[0]) <= float(w["wait_s"]) <= float(band[1])
    mark = {None: "", True: "✓", False: "✗"}[inside]
    text = f"retry {w.get('retry') or '?'}: {_fmt_s(float(w['wait_s']))} s"
    core = w.get("core_s")
    if band:
        text += f" {mark}"
        if core:
            text += f" rule {_range(core)},"
        text += f" judged {_range(band)}"
    else:
        text += " (no band)"
    if real_scale is not None:
        text_real = f"{text}; waited {real(float(w['wait_s']) * real_scale)}"
    else:
        text_real = text
    return {
        "y": y,
        "mid": round(y + _LANE_H / 2, 1),
        "text_y": round(y + _LANE_H * 0.68, 1),
        "from": x(start),
        "to": x(arrival),
        "band": _span(x, start, band),
        "core": _span(x, start, w.get("core_s")),
        "inside": inside,
        "text": _clip(text, 56),
        "title": f"{text_real}; {w.get('rule') or 'no rule'}: {w.get('basis') or ''}",
    }


def _ticks(span: float, step: float, x: Callable[[float], float]) -> list[dict[str, Any]]:
    """The axis's ticks every ``step`` scenario seconds from 0 to ``span``."""
    ticks = []
    t = 0.0
    while t <= span + 1e-9:
        ticks.append({"x": x(t), "label": f"{_fmt_s(t)} s"})
        t += step
    return ticks


def matrix(report: Any, anchor: Any) -> dict[str, Any] | None:
    """The geometry of the verdict matrix of ``report`` (a ``reports.model.Report``), or None
    with fewer than two agents (one agent's verdicts are the table). ``anchor`` makes an agent's
    name into its anchor on a criterion page."""
    agents = report.agents
    if len(agents) < 2:
        return None
    dialects = {a.run.get("dialect") or "openai_chat" for a in agents}
    labels = []
    for a in agents:
        text = a.name
        if len(dialects) > 1:
            text += f" ({a.run.get('dialect') or 'openai_chat'})"
        labels.append({"text": _clip(text, 40), "title": text})
    label_w = 14 + 6.6 * max(len(lb["text"]) for lb in labels)
    rows_h = len(agents) * _CELL
    blocks: list[dict[str, Any]] = []
    line, x0, lines = 0, label_w, [0.0]
    for area, crits in report.areas():
        w = len(crits) * _CELL
        if x0 + w > _MAX_W and x0 > label_w:
            line, x0 = line + 1, label_w
            lines.append(0.0)
        top = line * (_HEAD + rows_h + _GAP)
        cells = []
        for j, c in enumerate(crits):
            cx = x0 + j * _CELL
            for i, a in enumerate(agents):
                v = a.verdict(c["id"])
                cells.append(
                    {
                        "x": cx,
                        "y": top + _HEAD + i * _CELL,
                        "verdict": v or "none",
                        "letter": LETTERS.get(v or "", "–"),
                        "href": f"criteria/{c['id']}.html#agent-{anchor(a.name)}",
                        "title": f"{c['id']} {c['title']} — {labels[i]['title']}: "
                        f"{v or 'not assessed'}",
                    }
                )
        blocks.append(
            {
                "area": area,
                "x": x0,
                "top": top,
                "w": w,
                "heads": [
                    {"x": x0 + j * _CELL + _CELL / 2, "text": c["id"].split("-", 1)[-1]}
                    for j, c in enumerate(crits)
                ],
                "cells": cells,
            }
        )
        x0 += w + _GAP
        lines[line] = max(lines[line], x0)
    n_lines = line + 1
    height = n_lines * (_HEAD + rows_h + _GAP)
    legend_y = height + 6
    legend = [
        {"x": label_w + k * 132, "verdict": v, "letter": LETTERS[v]} for k, v in enumerate(VERDICTS)
    ]
    return {
        "width": max(max(lines), label_w + 132 * len(VERDICTS)),
        "height": legend_y + _CELL + 4,
        "cell": _CELL,
        "label_w": label_w,
        "rows": [
            {"y": n * (_HEAD + rows_h + _GAP) + _HEAD + i * _CELL, **labels[i]}
            for n in range(n_lines)
            for i in range(len(agents))
        ],
        "blocks": blocks,
        "legend": legend,
        "legend_y": legend_y,
    }
