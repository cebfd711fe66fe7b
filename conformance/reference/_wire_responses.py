"""OpenAI Responses codec: neutral (chat-shaped) bodies out, neutral chunks in.

Theory of operation: :meth:`ResponsesCodec.request` renders leading system messages as
``instructions`` and the rest as ``input`` items: user and system messages as ``message`` items,
an assistant turn as its own ``reasoning`` items (as received, for the model that wrote them),
an assistant ``message`` with ``output_text`` and one ``function_call`` per tool call, and each
tool result as a ``function_call_output``; ``max_tokens`` becomes ``max_output_tokens``. The
stream decoder maps ``response.output_text.delta``, the reasoning deltas and
``response.function_call_arguments.delta`` to content / reasoning / tool-call pieces; the
terminal ``response.completed`` is the finish (stop, or tool_calls when calls came),
``response.incomplete`` is ``length`` (``max_output_tokens``) and ends the stream too;
``response.failed`` and ``error`` events are in-band errors. Without a terminal event there is
no finish marker, so the core treats the stream as failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._wire_base import Credentials, chunk, handed_over, text_of

__all__ = ["INCOMPLETE_REASONS", "ResponsesCodec"]

INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _parts(content: Any, text_type: str) -> str | list[dict[str, Any]]:
    if not isinstance(content, list):
        return "" if content is None else str(content)
    out: list[dict[str, Any]] = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") in ("text", "input_text", "output_text"):
            out.append({"type": text_type, "text": str(p.get("text") or "")})
        elif p.get("type") == "image_url":
            out.append(
                {"type": "input_image", "image_url": str((p.get("image_url") or {}).get("url"))}
            )
    return out


def _usage(r: Mapping[str, Any]) -> dict[str, int] | None:
    u = r.get("usage")
    if not isinstance(u, dict):
        return None
    return {
        "prompt_tokens": int(u.get("input_tokens") or 0),
        "completion_tokens": int(u.get("output_tokens") or 0),
    }


def _finish(r: Mapping[str, Any], saw_calls: bool) -> str | None:
    status = r.get("status")
    if status == "incomplete":
        reason = (r.get("incomplete_details") or {}).get("reason")
        return INCOMPLETE_REASONS.get(str(reason), "length")
    if status == "completed":
        return "tool_calls" if saw_calls else "stop"
    return None


class ResponsesCodec:
    name = "openai_responses"
    path = "/responses"

    def __init__(self) -> None:
        self.credentials = Credentials()

    def headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    # ---- requests ------------------------------------------------------------------------
    def request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        model = str(body.get("model") or "")
        msgs = list(body.get("messages") or [])
        system: list[str] = []
        while msgs and msgs[0].get("role") == "system":
            system.append(text_of(msgs.pop(0).get("content")))
        items: list[dict[str, Any]] = []
        for m in msgs:
            role = m.get("role")
            if role == "tool":
                content = m.get("content")
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": str(m.get("tool_call_id") or ""),
                        "output": content
                        if isinstance(content, str)
                        else _parts(content, "input_text"),
                    }
                )
            elif role == "assistant":
                items += self._assistant(m, model)
            else:
                items.append(
                    {
                        "type": "message",
                        "role": str(role or "user"),
                        "content": _parts(m.get("content"), "input_text"),
                    }
                )
        wire: dict[str, Any] = {
            "model": model,
            "input": items,
            "max_output_tokens": int(body.get("max_tokens") or 8192),
        }
        if system:
            wire["instructions"] = "\n\n".join(system)
        if body.get("tools"):
            wire["tools"] = [
                {
                    "type": "function",
                    "name": (t.get("function") or {}).get("name", ""),
                    "description": (t.get("function") or {}).get("description", ""),
                    "parameters": (t.get("function") or {}).get("parameters")
                    or {"type": "object", "properties": {}},
                }
                for t in body["tools"]
            ]
        if "stream" in body:
            wire["stream"] = bool(body["stream"])
        return wire

    def _assistant(self, m: Mapping[str, Any], model: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        reasoning = str(m.get("reasoning_content") or "")
        own = self.credentials.recall(model, reasoning) if reasoning else None
        text = text_of(m.get("content"))
        if own is not None:
            items += own  # the reasoning items as received, for the model that wrote them
        else:
            m = handed_over(m)
            if m.get("handed_over_reasoning"):
                text = m["handed_over_reasoning"] + "\n\n" + text
        if text:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                }
            )
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            args = fn.get("arguments")
            items.append(
                {
                    "type": "function_call",
                    "call_id": str(c.get("id") or ""),
                    "name": fn.get("name", ""),
                    "arguments": args if isinstance(args, str) else json.dumps(args or {}),
                }
            )
        return items

    # ---- replies -------------------------------------------------------------------------
    def decoder(self, model: str) -> _StreamDecoder:
        return _StreamDecoder(self.credentials, model)

    def full_body(self, text: str, model: str) -> str:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return text  # the core reports it as unreadable
        if not isinstance(data, dict) or not isinstance(data.get("output"), list):
            return json.dumps({"choices": []})
        if data.get("status") == "failed":
            return json.dumps({"choices": []})
        texts: list[str] = []
        thoughts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for item in data["output"]:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "message":
                texts.append(text_of(item.get("content")))
            elif kind == "reasoning":
                thoughts.append(item)
            elif kind == "function_call":
                calls.append(
                    {
                        "id": item.get("call_id"),
                        "type": "function",
                        "function": {
                            "name": item.get("name"),
                            "arguments": str(item.get("arguments") or ""),
                        },
                    }
                )
        reasoning = "".join(_reasoning_text(t) for t in thoughts)
        self.credentials.remember(model, reasoning, thoughts)
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if reasoning:
            msg["reasoning_content"] = reasoning
        if calls:
            msg["tool_calls"] = calls
        reply: dict[str, Any] = {
            "choices": [{"index": 0, "message": msg, "finish_reason": _finish(data, bool(calls))}]
        }
        if _usage(data):
            reply["usage"] = _usage(data)
        return json.dumps(reply, ensure_ascii=False)


def _reasoning_text(item: Mapping[str, Any]) -> str:
    parts = item.get("summary") or item.get("content") or []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


class _StreamDecoder:
    def __init__(self, credentials: Credentials, model: str) -> None:
        self.credentials = credentials
        self.model = model
        self.tools: dict[Any, int] = {}  # item id and output index -> tool call index
        self.args_seen: dict[int, bool] = {}
        self.thoughts: dict[int, dict[str, Any]] = {}  # output index -> reasoning item
        self.reasoning = ""

    def _tool(self, p: Mapping[str, Any]) -> int | None:
        for key in (p.get("item_id"), p.get("output_index")):
            if key is not None and key in self.tools:
                return self.tools[key]
        return None

    def feed(self, data: str) -> list[str]:
        try:
            p = json.loads(data)
        except json.JSONDecodeError:
            return [data]  # the core reports the malformed event
        if not isinstance(p, dict):
            return [data]
        kind = str(p.get("type") or "")
        handler = _EVENTS.get(kind)
        return handler(self, p, kind) if handler is not None else []

    def _item_added(self, p: dict[str, Any], kind: str) -> list[str]:
        item = p.get("item") or {}
        if item.get("type") != "function_call":
            return []
        new = len(set(self.tools.values()))
        for key in (item.get("id"), p.get("output_index")):
            if key is not None:
                self.tools[key] = new
        first = {
            "index": new,
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name") or "", "arguments": ""},
        }
        return [chunk({"tool_calls": [first]})]

    def _text_delta(self, p: dict[str, Any], kind: str) -> list[str]:
        return [chunk({"content": p.get("delta") or ""})]

    def _reasoning_delta(self, p: dict[str, Any], kind: str) -> list[str]:
        self.reasoning += str(p.get("delta") or "")
        return [chunk({"reasoning_content": p.get("delta") or ""})]

    def _arguments_delta(self, p: dict[str, Any], kind: str) -> list[str]:
        k = self._tool(p)
        if k is None:
            return []
        self.args_seen[k] = True
        return [chunk({"tool_calls": [{"index": k, "function": {"arguments": p["delta"]}}]})]

    def _arguments_done(self, p: dict[str, Any], kind: str) -> list[str]:
        k = self._tool(p)
        if k is None or self.args_seen.get(k) or not p.get("arguments"):
            return []
        # Arguments given whole, never streamed.
        self.args_seen[k] = True
        piece = {"index": k, "function": {"arguments": p["arguments"]}}
        return [chunk({"tool_calls": [piece]})]

    def _item_done(self, p: dict[str, Any], kind: str) -> list[str]:
        item = p.get("item") or {}
        if item.get("type") == "reasoning":
            self.thoughts[int(p.get("output_index") or 0)] = dict(item)
            items = [self.thoughts[i] for i in sorted(self.thoughts)]
            self.credentials.remember(self.model, self.reasoning, items)
        return []

    def _finished(self, p: dict[str, Any], kind: str) -> list[str]:
        r = p.get("response") or {}
        finish = _finish(r, bool(self.tools)) or (
            "length" if kind == "response.incomplete" else "stop"
        )
        return [chunk({}, finish, _usage(r)), "[DONE]"]

    def _failed(self, p: dict[str, Any], kind: str) -> list[str]:
        err = (p.get("response") or {}).get("error") or {"message": "response failed"}
        return [json.dumps({"error": err})]

    def _error(self, p: dict[str, Any], kind: str) -> list[str]:
        inner = {k: v for k, v in p.items() if k not in ("type", "sequence_number")}
        return [json.dumps({"error": inner.get("error") or inner})]


# What each Responses stream event (by its ``type``) gives the core: chat SSE data payloads.
_EVENTS: dict[str, Callable[[_StreamDecoder, dict[str, Any], str], list[str]]] = {
    "response.output_item.added": _StreamDecoder._item_added,
    "response.output_text.delta": _StreamDecoder._text_delta,
    "response.reasoning_summary_text.delta": _StreamDecoder._reasoning_delta,
    "response.reasoning_text.delta": _StreamDecoder._reasoning_delta,
    "response.function_call_arguments.delta": _StreamDecoder._arguments_delta,
    "response.function_call_arguments.done": _StreamDecoder._arguments_done,
    "response.output_item.done": _StreamDecoder._item_done,
    "response.completed": _StreamDecoder._finished,
    "response.incomplete": _StreamDecoder._finished,
    "response.failed": _StreamDecoder._failed,
    "error": _StreamDecoder._error,
}


# This module's dialect and codec: the agent speaks every dialect a `_wire_*.py` module names.
DIALECT = "openai_responses"
CODEC = ResponsesCodec
