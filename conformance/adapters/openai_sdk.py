"""The official `openai` SDK at its defaults, driven by a minimal agent loop (`openai-sdk`).

It shows how a plain SDK-based agent fares: the client is built with only `base_url` and
`api_key` (its own HTTP client, so its default timeout and retries: `max_retries=2`, backoff
0.5 s doubling up to 8 s with up to 25 % jitter, Retry-After / retry-after-ms honoured within
the SDK's cap, `x-should-retry` obeyed), streaming, no stream fallback, no continuation after a
`length` finish, no time scaling. Whatever the SDK raises is shown as one error and ends the
turn. The loop runs on a worker thread, bounded by the run's deadline.

Declared capabilities: `tools` (the loop runs hosted tools) and `should_retry_header` (the SDK's
retry layer obeys `x-should-retry`). Nothing else: the loop shows no removals, no meta
messages, has no abort key, no fallback model, no compaction.
"""

from __future__ import annotations

import ssl
from typing import Any

import openai

from conformance.adapters._sdk_common import TurnContext, error_event, openai_tools, run_turn
from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest

__all__ = ["CAPABILITIES", "OpenAISDKAdapter"]

CAPABILITIES = ("tools", "should_retry_header")
_MAX_STEPS = 20  # bounds the tool loop of this minimal agent


def make_client(req: RunRequest) -> openai.OpenAI:
    """An `OpenAI` client at the SDK's defaults, pointed at the gateway.

    Only TLS needs an HTTP client of our own, and then the SDK's `DefaultHttpxClient`, which
    keeps the SDK's timeout, limits and redirects (a bare client would not).
    """
    if req.ca_file:
        http = openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=req.ca_file))
        return openai.OpenAI(base_url=req.base_url, api_key=req.api_key, http_client=http)
    return openai.OpenAI(base_url=req.base_url, api_key=req.api_key)


class OpenAISDKAdapter(AdapterBase):
    """A minimal chat-completions tool loop on the official SDK."""

    name = "openai-sdk"

    def capabilities(self) -> set[str]:
        return set(CAPABILITIES)

    def run(self, req: RunRequest) -> RunOutcome:
        return run_turn(
            req,
            agent=self.name,
            version=openai.__version__,
            capabilities=CAPABILITIES,
            turn=_turn,
        )


def _turn(ctx: TurnContext) -> None:
    client = make_client(ctx.req)
    ctx.on_cleanup(client.close)
    tools = openai_tools(ctx.start)
    messages: list[dict[str, Any]] = list(ctx.start.get("history") or [])
    messages.append({"role": "user", "content": ctx.prompt})
    try:
        for step in range(_MAX_STEPS):
            kwargs: dict[str, Any] = {"model": ctx.model, "messages": messages, "stream": True}
            if tools:
                kwargs["tools"] = tools
            text, usage = "", None
            calls: dict[int, dict[str, Any]] = {}
            for chunk in client.chat.completions.create(**kwargs):
                usage = getattr(chunk, "usage", None) or usage
                for choice in chunk.choices:
                    delta = choice.delta
                    text += delta.content or ""
                    for tc in delta.tool_calls or []:
                        c = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                        c["id"] = tc.id or c["id"]
                        if tc.function:
                            c["name"] += tc.function.name or ""
                            c["args"] += tc.function.arguments or ""
            if usage is not None:
                ctx.emit(
                    {
                        "type": "usage",
                        "prompt_tokens": usage.prompt_tokens or 0,
                        "completion_tokens": usage.completion_tokens or 0,
                    }
                )
            tool_calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["args"]},
                }
                for _, c in sorted(calls.items())
            ]
            ctx.emit(
                {
                    "type": "message",
                    "id": f"a{step}",
                    "role": "assistant",
                    "text": text,
                    "tool_calls": tool_calls,
                }
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    **({"tool_calls": tool_calls} if tool_calls else {}),
                }
            )
            if not tool_calls:
                ctx.emit({"type": "turn_end", "reason": "completed"})
                return
            for tc in tool_calls:
                _, output = ctx.call_tool(
                    tc["function"]["name"], tc["id"], tc["function"]["arguments"]
                )
                messages.append({"role": "tool", "tool_call_id": tc["id"], "content": output})
        ctx.emit({"type": "error", "kind": "loop", "message": "Turn step limit reached."})
        ctx.emit({"type": "turn_end", "reason": "error"})
    except Exception as exc:  # whatever the SDK raises (APIError, or a raw JSONDecodeError
        # on a malformed event) is what an agent on it shows: one error, the turn ends
        ctx.emit(error_event(exc))
        ctx.emit({"type": "turn_end", "reason": "error"})
