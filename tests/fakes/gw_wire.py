"""Helpers to drive the gateway with a real HTTP client and keep what arrived."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from fakes.dialects import openai_chat as oc

__all__ = ["Got", "post", "full_stream", "events", "last_json", "scenario"]


@dataclass
class Got:
    status: int | None
    headers: dict[str, str]
    body: bytes
    error: BaseException | None


def post(client: httpx.Client, base_url: str, stream: bool = True, **extra: Any) -> Got:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    body.update(extra)
    buf = bytearray()
    try:
        with client.stream("POST", base_url + "/chat/completions", json=body) as r:
            try:
                for chunk in r.iter_raw():
                    buf += chunk
            except httpx.HTTPError as e:
                return Got(r.status_code, dict(r.headers), bytes(buf), e)
            return Got(r.status_code, dict(r.headers), bytes(buf), None)
    except httpx.HTTPError as e:
        return Got(None, {}, b"", e)


def full_stream(reply: dict[str, Any], model: str = "m", done: bool = True) -> bytes:
    return b"".join(oc.frame(p) for p in oc.stream_payloads(reply, model, done=done))


def events(raw: bytes) -> list[str]:
    """The data payloads of an SSE body (simple split; the bodies here are well-formed)."""
    return [e[len("data: ") :] for e in raw.decode().split("\n\n") if e.startswith("data: ")]


def last_json(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(e) for e in events(raw) if e != "[DONE]"]


def scenario(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A minimal valid scenario dict around ``steps``."""
    return {"id": "t", "criteria": ["STR-01"], "prompt": "p", "script": list(steps), **extra}


# --- Hypothesis strategies shared by the property tests of every dialect ----------------------
from hypothesis import strategies as st  # noqa: E402


def reply_strategy(max_text: int = 40, json_arguments: bool = False) -> st.SearchStrategy[dict]:
    """Scripted replies: any text and reasoning, piece size, optional tool calls.

    ``json_arguments`` wraps the arguments in a JSON object, for clients (the official SDKs)
    that parse tool input as JSON.
    """
    texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=max_text)
    args = (
        texts.map(lambda t: json.dumps({"v": t}, ensure_ascii=False)) if json_arguments else texts
    )
    return st.fixed_dictionaries(
        {"text": texts, "reasoning": texts, "chunk_chars": st.integers(1, 20)},
        optional={
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {"name": st.from_regex(r"[a-z_]{1,8}", fullmatch=True), "arguments": args}
                ),
                max_size=2,
            )
        },
    )
