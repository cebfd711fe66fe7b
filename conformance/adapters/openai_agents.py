"""An agent on the OpenAI Agents SDK at its defaults (`--agent openai-agents`, extra
`sdk-openai-agents`).

The agent is the SDK's own `Agent`, run with `Runner.run_streamed` (streamed model calls, as an
interactive agent does) on an `OpenAIChatCompletionsModel` over an `AsyncOpenAI` client built
with only `base_url` and `api_key`: the openai SDK's retry layer at its defaults (2 retries);
the Runner's own model retries stay off (they are opt-in, `ModelSettings.retry`); `max_turns`
stays at its default (10). The scenario's hosted tools are `FunctionTool`s that POST to the tool
endpoint (`strict_json_schema=False`: the scenarios' schemas are not written for strict mode).
Whatever the run raises is shown as one error and ends the turn.

No outside network: tracing is off (`set_tracing_disabled(True)`, `RunConfig(tracing_disabled=
True)` and `OPENAI_AGENTS_DISABLE_TRACING=1`), so no trace is exported to OpenAI; the model is
the chat-completions one, pointed at the gateway. Capabilities: `tools`, `should_retry_header`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from conformance.adapters._sdk_common import (
    TurnContext,
    call_tool_async,
    error_event,
    run_async,
    run_turn,
)
from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest

__all__ = ["CAPABILITIES", "OpenAIAgentsAdapter"]

CAPABILITIES = ("tools", "should_retry_header")  # the openai client obeys x-should-retry


class OpenAIAgentsAdapter(AdapterBase):
    name = "openai-agents"

    def __init__(self) -> None:
        # Before the SDK reads it: no trace processor may export anything.
        os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
        import agents

        agents.set_tracing_disabled(True)

    def capabilities(self) -> set[str]:
        return set(CAPABILITIES)

    def run(self, req: RunRequest) -> RunOutcome:
        import importlib.metadata

        return run_turn(
            req,
            agent=self.name,
            version=importlib.metadata.version("openai-agents"),
            capabilities=CAPABILITIES,
            turn=lambda ctx: run_async(ctx, lambda: _turn(ctx)),
        )


def history_items(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions history as the Agents SDK's input items."""
    items: list[dict[str, Any]] = []
    for m in history:
        role, content = m.get("role"), m.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content else ""
        if role in ("system", "user"):
            items.append({"role": role, "content": text})
        elif role == "assistant":
            if text:
                items.append({"role": "assistant", "content": text})
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": tc.get("id", ""),
                        "name": fn.get("name", ""),
                        "arguments": fn.get("arguments") or "",
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m.get("tool_call_id", ""),
                    "output": text,
                }
            )
    return items


def _hosted_tool(ctx: TurnContext, spec: dict[str, Any]) -> Any:
    from agents import FunctionTool

    name = spec["name"]

    async def invoke(tool_ctx: Any, arguments: str) -> str:
        call_id = getattr(tool_ctx, "tool_call_id", "") or ""
        _, output = await call_tool_async(ctx, name, call_id, arguments)
        return output

    return FunctionTool(
        name=name,
        description=spec.get("description") or "",
        params_json_schema=spec.get("parameters") or {"type": "object"},
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def _response_event(response: Any, n: int) -> dict[str, Any]:
    text, reasoning, calls = "", "", []
    for item in response.output:
        kind = getattr(item, "type", "")
        if kind == "message":
            text += "".join(getattr(c, "text", "") or "" for c in item.content)
        elif kind == "function_call":
            calls.append(
                {
                    "id": item.call_id,
                    "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments},
                }
            )
        elif kind == "reasoning":
            reasoning += "".join(getattr(s, "text", "") or "" for s in item.summary or [])
    ev = {"type": "message", "id": f"a{n}", "role": "assistant", "text": text, "tool_calls": calls}
    if reasoning:
        ev["reasoning"] = reasoning
    return ev


async def _turn(ctx: TurnContext) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, RunHooks, Runner
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=ctx.req.base_url, api_key=ctx.req.api_key)
    model = OpenAIChatCompletionsModel(model=ctx.model, openai_client=client)
    agent = Agent(
        name="conformance-agent",
        model=model,
        tools=[_hosted_tool(ctx, t) for t in ctx.start.get("tools") or []],
    )
    seen = {"n": 0, "in": 0, "out": 0}

    # The SDK is read as untyped (pyproject: follow_imports = skip), so RunHooks is Any here.
    class Hooks(RunHooks):  # type: ignore[misc]
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            ctx.emit(_response_event(response, seen["n"]))
            seen["n"] += 1
            seen["in"] += response.usage.input_tokens or 0
            seen["out"] += response.usage.output_tokens or 0

    items = history_items(ctx.start.get("history") or [])
    items.append({"role": "user", "content": ctx.prompt})
    try:
        result = Runner.run_streamed(
            agent, items, hooks=Hooks(), run_config=RunConfig(tracing_disabled=True)
        )
        async for _ in result.stream_events():
            pass
        ctx.emit({"type": "usage", "prompt_tokens": seen["in"], "completion_tokens": seen["out"]})
        ctx.emit({"type": "turn_end", "reason": "completed"})
    except Exception as exc:  # what the run raised is what an agent on it shows
        ctx.emit(error_event(exc))
        ctx.emit({"type": "turn_end", "reason": "error"})
    finally:
        await client.close()
