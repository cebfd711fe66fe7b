"""What a stream prefix delivers, read independently per dialect (for the neutral-position tests).

A fault placed ``after_events: N`` must strike at the same point of the reply in every dialect:
these readers turn the whole events a plan sends before its fault into the neutral content
delivered (start seen, reasoning, text, tool calls, finish, end of stream), so the dialects can
be compared with the chat rendering.
"""

from __future__ import annotations

import json
from typing import Any

from gw_wire import scenario

from fakes.dialects import REGISTRY
from fakes.plan import make_plan
from fakes.scenario import Scenario

AFTER_EVENTS_FAULTS: dict[str, dict[str, Any]] = {
    "cut": {},
    "stall": {"seconds": 5},
    "malformed_event": {},
    "in_band_error": {},
}


def _blank() -> dict[str, Any]:
    return {
        "start": False,
        "reasoning": "",
        "text": "",
        "calls": [],
        "finish": False,
        "done": False,
    }


def _data(frame: bytes) -> tuple[str | None, str]:
    name, data = None, []
    for line in frame.decode().split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
    return name, "\n".join(data)


def chat_content(frames: list[bytes]) -> dict[str, Any]:
    c = _blank()
    for f in frames:
        _, data = _data(f)
        if data == "[DONE]":
            c["done"] = True
            continue
        obj = json.loads(data)
        choices = obj.get("choices") or []
        if not choices:
            c["finish"] = True  # a usage-only chunk stands for the finish
            continue
        delta = choices[0].get("delta") or {}
        c["start"] = c["start"] or "role" in delta
        c["reasoning"] += delta.get("reasoning_content") or ""
        c["text"] += delta.get("content") or ""
        for tc in delta.get("tool_calls") or []:
            if "id" in tc:
                c["calls"].append([tc["function"]["name"], ""])
            else:
                c["calls"][tc["index"]][1] += tc["function"]["arguments"]
        c["finish"] = c["finish"] or choices[0].get("finish_reason") is not None
    return c


def anthropic_content(frames: list[bytes]) -> dict[str, Any]:
    c = _blank()
    for f in frames:
        name, data = _data(f)
        obj = json.loads(data)
        if name == "message_start":
            c["start"] = True
        elif name == "content_block_start" and obj["content_block"]["type"] == "tool_use":
            c["calls"].append([obj["content_block"]["name"], ""])
        elif name == "content_block_delta":
            d = obj["delta"]
            c["reasoning"] += d.get("thinking") or ""
            c["text"] += d.get("text") or ""
            if d["type"] == "input_json_delta":
                c["calls"][-1][1] += d["partial_json"]
        elif name == "message_delta":
            c["finish"] = True
        elif name == "message_stop":
            c["done"] = True
    return c


def responses_content(frames: list[bytes]) -> dict[str, Any]:
    """As the others, but without ``done``: the terminal event is both markers here."""
    c = _blank()
    del c["done"]
    for f in frames:
        name, data = _data(f)
        obj = json.loads(data)
        if name == "response.created":
            c["start"] = True
        elif name == "response.reasoning_summary_text.delta":
            c["reasoning"] += obj["delta"]
        elif name == "response.output_text.delta":
            c["text"] += obj["delta"]
        elif name == "response.output_item.added" and obj["item"]["type"] == "function_call":
            c["calls"].append([obj["item"]["name"], ""])
        elif name == "response.function_call_arguments.delta":
            c["calls"][-1][1] += obj["delta"]
        elif name in ("response.completed", "response.incomplete"):
            c["finish"] = True
    return c


READERS = {
    "openai_chat": chat_content,
    "anthropic_messages": anthropic_content,
    "openai_responses": responses_content,
}


def whole_frames(reply: dict[str, Any], dialect: str) -> list[bytes]:
    """The healthy stream of ``reply`` in ``dialect``, one entry per event."""
    reply = json.loads(json.dumps(reply, sort_keys=True))  # as plans render it (key order)
    d = REGISTRY[dialect]
    return [d.frame(*e) for e in d.stream_events(reply, "m")]


def before_fault(reply: dict[str, Any], fault: str, n: int, dialect: str) -> list[bytes]:
    """The unaltered events a plan sends, on time, before ``fault`` placed after ``n`` events."""
    params = {**AFTER_EVENTS_FAULTS[fault], "after_events": n}
    sc = Scenario.from_dict(scenario({"reply": reply, "fault": {fault: params}}))
    plan = make_plan(sc.script[0], {"model": "m", "stream": True}, dialect)
    whole = whole_frames(reply, dialect)
    out: list[bytes] = []
    for i, c in enumerate(plan.chunks):
        if i >= len(whole) or c.data != whole[i] or c.delay:
            break
        out.append(c.data)
    return out


def content(frames: list[bytes], dialect: str, *, like: str | None = None) -> dict[str, Any]:
    """The neutral content of ``frames``; ``like``: drop what that dialect cannot express."""
    c = READERS[dialect](frames)
    if like == "openai_responses":
        c.pop("done", None)
    return c
