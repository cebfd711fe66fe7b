"""An agent on LiteLLM at its defaults (`--agent litellm`, extra `sdk-litellm`).

Each model call is `litellm.completion(model="openai/<model>", api_base=..., api_key=...,
stream=True, tools=...)` with nothing else set: no `num_retries` (LiteLLM's own retry wrapper
stays off) and no `max_retries` (the openai client LiteLLM builds keeps its 2 retries). The
chunks are put together by LiteLLM's own `stream_chunk_builder`. The loop runs each tool call
and answers it with a `tool` message until a reply has no tool call. Whatever LiteLLM raises is
shown as one error and ends the turn.

No outside network: `LITELLM_LOCAL_MODEL_COST_MAP=True` (the bundled cost map, not a download at
import), `LITELLM_OFFLINE_MODE=true` (no catalogue or tokenizer fetched on its own),
`litellm.disable_hf_tokenizer_download = True`, `litellm.suppress_debug_info = True` (no
help banners on the harness's output), no callbacks (so no logging integration sends
anything), and `litellm.telemetry = False` where the version still has that switch. The
variables are set before LiteLLM is first imported. Capabilities: `tools`, `should_retry_header`.
"""

from __future__ import annotations

import os
from typing import Any

from conformance.adapters._sdk_common import TurnContext, error_event, openai_tools, run_turn
from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest

__all__ = ["CAPABILITIES", "OFFLINE_ENV", "LiteLLMAdapter"]

CAPABILITIES = ("tools", "should_retry_header")  # the openai client obeys x-should-retry
OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
_MAX_STEPS = 20  # bounds the tool loop of this minimal agent


def _litellm() -> Any:
    os.environ.update(OFFLINE_ENV)  # read at import time: set before the first import
    import litellm

    litellm.telemetry = False
    litellm.disable_hf_tokenizer_download = True
    litellm.suppress_debug_info = True  # no "Provider List" banners on the harness's output
    return litellm


class LiteLLMAdapter(AdapterBase):
    name = "litellm"

    def __init__(self) -> None:
        _litellm()  # fail here, at lookup, when the extra is missing

    def capabilities(self) -> set[str]:
        return set(CAPABILITIES)

    def run(self, req: RunRequest) -> RunOutcome:
        import importlib.metadata

        return run_turn(
            req,
            agent=self.name,
            version=importlib.metadata.version("litellm"),
            capabilities=CAPABILITIES,
            turn=_turn,
        )


def _turn(ctx: TurnContext) -> None:
    litellm = _litellm()
    tools = openai_tools(ctx.start)
    messages: list[dict[str, Any]] = list(ctx.start.get("history") or [])
    messages.append({"role": "user", "content": ctx.prompt})
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    try:
        for step in range(_MAX_STEPS):
            kwargs: dict[str, Any] = {
                "model": f"openai/{ctx.model}",
                "api_base": ctx.req.base_url,
                "api_key": ctx.req.api_key,
                "messages": messages,
                "stream": True,
            }
            if tools:
                kwargs["tools"] = tools
            chunks = list(litellm.completion(**kwargs))
            built = litellm.stream_chunk_builder(chunks, messages=messages)
            if built is None or not built.choices:
                raise RuntimeError("the model stream ended without any choice")
            msg = built.choices[0].message
            u = getattr(built, "usage", None)
            if u is not None:
                usage["prompt_tokens"] += getattr(u, "prompt_tokens", 0) or 0
                usage["completion_tokens"] += getattr(u, "completion_tokens", 0) or 0
            tool_calls: list[dict[str, Any]] = [
                {
                    "id": tc.id or "",
                    "type": "function",
                    "function": {
                        "name": tc.function.name or "",
                        "arguments": tc.function.arguments or "",
                    },
                }
                for tc in msg.tool_calls or []
            ]
            text = msg.content or ""
            ev = {
                "type": "message",
                "id": f"a{step}",
                "role": "assistant",
                "text": text,
                "tool_calls": tool_calls,
            }
            reasoning = getattr(msg, "reasoning_content", None)
            if reasoning:
                ev["reasoning"] = reasoning
            ctx.emit(ev)
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    **({"tool_calls": tool_calls} if tool_calls else {}),
                }
            )
            if not tool_calls:
                ctx.emit({"type": "usage", **usage})
                ctx.emit({"type": "turn_end", "reason": "completed"})
                return
            for tc in tool_calls:
                _, output = ctx.call_tool(
                    tc["function"]["name"], tc["id"], tc["function"]["arguments"]
                )
                messages.append({"role": "tool", "tool_call_id": tc["id"], "content": output})
        ctx.emit({"type": "error", "kind": "loop", "message": "Turn step limit reached."})
        ctx.emit({"type": "turn_end", "reason": "error"})
    except Exception as exc:  # what LiteLLM raised is what an agent on it shows
        ctx.emit(error_event(exc))
        ctx.emit({"type": "turn_end", "reason": "error"})
