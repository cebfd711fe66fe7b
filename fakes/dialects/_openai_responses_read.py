"""OpenAI Responses read back into the canonical chat view (``openai_responses``' reader).

Input items become chat messages (consecutive assistant-side items one assistant message;
``encrypted_content`` of reasoning kept under a vendor-private key), stream events and
``response`` objects become chat chunks and completions, event for event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fakes.dialects import _chatview as cv
from fakes.dialects._protocol import ChatOut

__all__ = ["read_body", "read_json", "stream_reader", "StreamReader"]

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _responses_parts(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind in ("input_text", "output_text", "text", "refusal"):
            parts.append({"type": "text", "text": str(p.get("text") or p.get("refusal") or "")})
        elif kind == "input_image":
            parts.append(
                cv.image_part(str(p.get("image_url") or p.get("file_id") or ""), p.get("detail"))
            )
        elif kind == "input_file":
            parts.append({"type": "file", "file": {k: v for k, v in p.items() if k != "type"}})
        elif kind == "input_audio":
            parts.append(dict(p))
    return cv.parts_content(parts)


_RESPONSES_KEYS = {"instructions", "input", "tools", "max_output_tokens"}
_CALL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def read_body(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses request body as a chat-completions body.

    Consecutive assistant-side items (``reasoning``, assistant ``message``, ``function_call``)
    make one assistant message, as a chat client would have sent them.
    """
    msgs: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        msgs.append({"role": "system", "content": body["instructions"]})
    inp = body.get("input")
    if isinstance(inp, str):
        msgs.append({"role": "user", "content": inp})
    items = _InputItems(msgs)
    for item in inp if isinstance(inp, list) else []:
        if isinstance(item, dict):
            items.add(item)
    items.flush()
    out = {k: v for k, v in body.items() if k not in _RESPONSES_KEYS}
    out["messages"] = msgs
    if "max_output_tokens" in body:
        out["max_tokens"] = body["max_output_tokens"]
    if "tools" in body:
        out["tools"] = cv.chat_tools(body["tools"], "parameters")
    return out


class _InputItems:
    """Input items read into chat messages (appended to ``msgs``): the assistant-side items
    since the last other one are gathered into the assistant message of one turn."""

    def __init__(self, msgs: list[dict[str, Any]]) -> None:
        self.msgs = msgs
        self.turn: dict[str, Any] | None = None
        self.texts: list[str] = []
        self.reasoning: list[str] = []
        self.encrypted: list[Any] = []
        self.calls: list[dict[str, Any]] = []

    def add(self, item: dict[str, Any]) -> None:
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message" and item.get("role") == "assistant":
            self._assistant()
            c = _responses_parts(item.get("content"))
            self.texts.append(c if isinstance(c, str) else cv.text_of(c))
        elif kind == "reasoning":
            self._assistant()
            self.reasoning.append(_reasoning_text(item))
            if item.get("encrypted_content") is not None:
                self.encrypted.append(item["encrypted_content"])
        elif kind in _CALL_ITEMS:
            self._assistant()
            name, args = _call_name_args(kind, item)
            self.calls.append(cv.tool_call(item.get("call_id"), name, args))
        elif kind in _OUTPUT_ITEMS:
            self.flush()
            out = item.get("output")
            content = cv.tool_result_content(out) if not isinstance(out, str) else out
            self.msgs.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": content}
            )
        elif kind == "message":
            self.flush()
            role = str(item.get("role") or "user")
            self.msgs.append({"role": role, "content": _responses_parts(item.get("content"))})

    def _assistant(self) -> None:
        if self.turn is None:
            self.turn = {"role": "assistant"}

    def flush(self) -> None:
        """The assistant message gathered so far, if any, goes to ``msgs``."""
        turn, self.turn = self.turn, None
        if turn is None:
            return
        turn["content"] = "".join(self.texts) if self.texts or not self.calls else None
        if self.reasoning:
            turn["reasoning_content"] = "".join(self.reasoning)
        cv.keep_private(turn, "encrypted_content", self.encrypted)
        if self.calls:
            turn["tool_calls"] = list(self.calls)
        self.msgs.append(turn)
        for acc in (self.texts, self.reasoning, self.encrypted, self.calls):
            acc.clear()


def _reasoning_text(item: dict[str, Any]) -> str:
    """A reasoning item's summary text, else its content's text."""
    summary = "".join(
        str(s.get("text") or "") for s in item.get("summary") or [] if isinstance(s, dict)
    )
    if summary:
        return summary
    return "".join(
        str(s.get("text") or "") for s in item.get("content") or [] if isinstance(s, dict)
    )


def _call_name_args(kind: str, item: dict[str, Any]) -> tuple[Any, Any]:
    """The tool name and arguments of a call item of type ``kind``."""
    if kind == "function_call":
        return item.get("name"), item.get("arguments")
    if kind == "custom_tool_call":
        return item.get("name"), item.get("input")
    return "local_shell", cv.json_text(item.get("action"))


class StreamReader:
    """Reads Responses stream events into chat frames."""

    def __init__(self, out: ChatOut) -> None:
        self.out = out
        self.tools: dict[Any, int] = {}  # item id / output index -> tool call index
        self.streamed: dict[Any, str] = {}  # text already sent per item (for .done events)

    def _key(self, p: dict[str, Any]) -> Any:
        return p.get("item_id") if p.get("item_id") is not None else p.get("output_index")

    def _text(self, key: Any, full: str, delta: dict[str, Any], field: str) -> None:
        """A ``.done`` event whose text was not (fully) streamed: send the rest."""
        got = self.streamed.get(key, "")
        if full.startswith(got) and len(full) > len(got):
            self.streamed[key] = full
            rest = full[len(got) :]
            if field == "arguments":
                k = self.tools.get(key)
                if k is not None:
                    self.out.chunk({"tool_calls": [{"index": k, "function": {"arguments": rest}}]})
            else:
                self.out.chunk({**delta, field: rest})

    def event(self, kind: str, p: dict[str, Any]) -> None:
        handler = _EVENTS.get(kind)
        if handler is not None:  # the other events carry nothing the chat view shows
            handler(self, p)

    def _created(self, p: dict[str, Any]) -> None:
        out, r = self.out, p.get("response") or {}
        out.id, out.model = str(r.get("id") or out.id), str(r.get("model") or out.model)
        out.chunk({"role": "assistant", "content": ""})

    def _item_added(self, p: dict[str, Any]) -> None:
        item = p.get("item") or {}
        if item.get("type") not in _CALL_ITEMS:
            return
        k = len(set(self.tools.values()))  # calls so far (two keys per call)
        for key in (item.get("id"), p.get("output_index")):
            if key is not None:
                self.tools[key] = k
        first = {
            "index": k,
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": ""},
        }
        self.out.chunk({"tool_calls": [first]})
        self.streamed[item.get("id")] = ""

    def _reasoning_key(self, p: dict[str, Any]) -> Any:
        return (self._key(p), "r", p.get("summary_index", p.get("content_index")))

    def _reasoning_delta(self, p: dict[str, Any]) -> None:
        key = self._reasoning_key(p)
        self.streamed[key] = self.streamed.get(key, "") + str(p.get("delta") or "")
        self.out.chunk({"reasoning_content": p.get("delta") or ""})

    def _reasoning_done(self, p: dict[str, Any]) -> None:
        self._text(self._reasoning_key(p), str(p.get("text") or ""), {}, "reasoning_content")

    def _text_delta(self, p: dict[str, Any]) -> None:
        key = (self._key(p), "t", p.get("content_index"))
        self.streamed[key] = self.streamed.get(key, "") + str(p.get("delta") or "")
        self.out.chunk({"content": p.get("delta") or ""})

    def _text_done(self, p: dict[str, Any]) -> None:
        key = (self._key(p), "t", p.get("content_index"))
        self._text(key, str(p.get("text") or ""), {}, "content")

    def _arguments_delta(self, p: dict[str, Any]) -> None:
        key = self._key(p)
        call = self.tools.get(key)
        if call is not None:
            self.streamed[key] = self.streamed.get(key, "") + str(p.get("delta") or "")
            piece = {"index": call, "function": {"arguments": p.get("delta") or ""}}
            self.out.chunk({"tool_calls": [piece]})

    def _arguments_done(self, p: dict[str, Any]) -> None:
        self._text(self._key(p), str(p.get("arguments") or ""), {}, "arguments")

    def _finished(self, p: dict[str, Any]) -> None:
        r = p.get("response") or {}
        self.out.chunk({}, _responses_finish(r, bool(self.tools)), _responses_usage(r))
        self.out.data("[DONE]")

    def _failed(self, p: dict[str, Any]) -> None:
        err = (p.get("response") or {}).get("error") or {}
        self.out.data(cv.dumps({"error": _openai_error(err)}))

    def _error(self, p: dict[str, Any]) -> None:
        inner = {k: v for k, v in p.items() if k not in ("type", "sequence_number")}
        self.out.data(cv.dumps({"error": _openai_error(inner.get("error") or inner)}))


# What each Responses stream event becomes in the chat view.
_EVENTS: dict[str, Callable[[StreamReader, dict[str, Any]], None]] = {
    "response.created": StreamReader._created,
    "response.output_item.added": StreamReader._item_added,
    "response.reasoning_summary_text.delta": StreamReader._reasoning_delta,
    "response.reasoning_text.delta": StreamReader._reasoning_delta,
    "response.reasoning_summary_text.done": StreamReader._reasoning_done,
    "response.reasoning_text.done": StreamReader._reasoning_done,
    "response.output_text.delta": StreamReader._text_delta,
    "response.output_text.done": StreamReader._text_done,
    "response.function_call_arguments.delta": StreamReader._arguments_delta,
    "response.function_call_arguments.done": StreamReader._arguments_done,
    "response.completed": StreamReader._finished,
    "response.incomplete": StreamReader._finished,
    "response.failed": StreamReader._failed,
    "error": StreamReader._error,
}


def _openai_error(err: dict[str, Any]) -> dict[str, Any]:
    """A Responses error object ({code, message}) in chat's shape ({message, type, code})."""
    out = dict(err)
    out.setdefault("type", err.get("code"))
    return out


def _responses_finish(r: dict[str, Any], saw_calls: bool) -> str:
    if r.get("status") == "incomplete":
        reason = (r.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(reason, "length") if isinstance(reason, str) else "length"
    calls = any(isinstance(i, dict) and i.get("type") in _CALL_ITEMS for i in r.get("output") or [])
    return "tool_calls" if calls or saw_calls else "stop"


def _responses_usage(r: dict[str, Any]) -> dict[str, int] | None:
    u = r.get("usage") or {}
    return cv.usage(u.get("input_tokens"), u.get("output_tokens"))


def _response_json(obj: dict[str, Any]) -> dict[str, Any]:
    texts, reasoning, calls = [], [], []
    for item in obj.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning":
            reasoning.append(
                "".join(str(s.get("text") or "") for s in item.get("summary") or [])
                or "".join(str(s.get("text") or "") for s in item.get("content") or [])
            )
        elif item.get("type") == "message":
            c = _responses_parts(item.get("content"))
            texts.append(c if isinstance(c, str) else cv.text_of(c))
        elif item.get("type") in _CALL_ITEMS:
            args = item.get("arguments", item.get("input"))
            calls.append(cv.tool_call(item.get("call_id"), item.get("name"), args))
    msg = cv.reply_message(texts, reasoning, calls)
    status = obj.get("status")
    finish = None if status in ("in_progress", "queued") else _responses_finish(obj, False)
    return cv.completion(obj, msg, finish, _responses_usage(obj))


def stream_reader(out: ChatOut) -> StreamReader:
    """A reader of one streamed Responses response writing chat frames to ``out``."""
    return StreamReader(out)


def read_json(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A ``response`` object as a chat completion (a failed one as its error); None for
    anything else."""
    if obj.get("object") != "response":
        return None
    if obj.get("status") == "failed" and obj.get("error"):
        return {"error": _openai_error(obj["error"])}
    return _response_json(obj)
