"""An agent on pydantic-ai at its defaults (`--agent pydantic-ai`, extra `sdk-pydantic-ai`).

The agent is pydantic-ai's own `Agent` with an `OpenAIChatModel` whose `OpenAIProvider` gets
only `base_url` and `api_key`: the openai SDK's retry layer at its defaults (2 retries), the
provider's shared HTTP client, pydantic-ai's default output retries. It runs with `Agent.iter`
and streams each model request (`ModelRequestNode.stream`), as an interactive agent does. The
scenario's hosted tools are pydantic-ai tools built with `Tool.from_schema`, each a POST to the
tool endpoint. Whatever the run raises is shown as one error and ends the turn.

No telemetry: pydantic-ai only reports through logfire when logfire is installed and
configured; neither is done here. Capabilities: `tools`, and `should_retry_header` (the
openai client underneath obeys `x-should-retry`).
"""

from __future__ import annotations

import json
from typing import Any

from conformance.adapters._sdk_common import (
    TurnContext,
    call_tool_async,
    error_event,
    run_async,
    run_turn,
)
from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest

__all__ = ["CAPABILITIES", "PydanticAIAdapter"]

CAPABILITIES = ("tools", "should_retry_header")  # the openai client obeys x-should-retry


class PydanticAIAdapter(AdapterBase):
    name = "pydantic-ai"

    def __init__(self) -> None:
        import pydantic_ai  # noqa: F401  (fail here, at lookup, when the extra is missing)

    def capabilities(self) -> set[str]:
        return set(CAPABILITIES)

    def run(self, req: RunRequest) -> RunOutcome:
        import pydantic_ai

        return run_turn(
            req,
            agent=self.name,
            version=pydantic_ai.__version__,
            capabilities=CAPABILITIES,
            turn=lambda ctx: run_async(ctx, lambda: _turn(ctx)),
        )


def history_messages(history: list[dict[str, Any]]) -> list[Any]:
    """Chat-completions history as pydantic-ai messages."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    names: dict[str, str] = {}
    for m in history:
        role, content = m.get("role"), m.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content else ""
        if role == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(text)]))
        elif role == "user":
            out.append(ModelRequest(parts=[UserPromptPart(text)]))
        elif role == "assistant":
            parts: list[Any] = [TextPart(text)] if text else []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                names[tc.get("id", "")] = fn.get("name", "")
                parts.append(
                    ToolCallPart(fn.get("name", ""), fn.get("arguments"), tc.get("id", ""))
                )
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            cid = m.get("tool_call_id", "")
            out.append(ModelRequest(parts=[ToolReturnPart(names.get(cid, ""), text, cid)]))
    return out


def _hosted_tool(ctx: TurnContext, spec: dict[str, Any]) -> Any:
    from pydantic_ai import RunContext, Tool

    name = spec["name"]

    async def run(rc: RunContext[None], **arguments: Any) -> str:
        _, output = await call_tool_async(ctx, name, rc.tool_call_id or "", arguments)
        return output

    return Tool.from_schema(
        run,
        name=name,
        description=spec.get("description"),
        json_schema=spec.get("parameters") or {"type": "object"},
        takes_ctx=True,
    )


def _response_event(resp: Any, n: int) -> dict[str, Any]:
    from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart

    text = "".join(p.content for p in resp.parts if isinstance(p, TextPart))
    reasoning = "".join(p.content for p in resp.parts if isinstance(p, ThinkingPart))
    calls = [
        {
            "id": p.tool_call_id,
            "type": "function",
            "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
        }
        for p in resp.parts
        if isinstance(p, ToolCallPart)
    ]
    ev = {"type": "message", "id": f"a{n}", "role": "assistant", "text": text, "tool_calls": calls}
    if reasoning:
        ev["reasoning"] = reasoning
    return ev


async def _turn(ctx: TurnContext) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=ctx.req.base_url, api_key=ctx.req.api_key)
    model = OpenAIChatModel(ctx.model, provider=provider)
    tools = [_hosted_tool(ctx, t) for t in ctx.start.get("tools") or []]
    agent = Agent(model, tools=tools)
    n = 0
    try:
        async with agent.iter(
            ctx.prompt, message_history=history_messages(ctx.start.get("history") or [])
        ) as run:
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with node.stream(run.ctx) as stream:
                        async for _ in stream:
                            pass
                elif Agent.is_call_tools_node(node):
                    ctx.emit(_response_event(node.model_response, n))
                    n += 1
            usage = run.usage
        ctx.emit(
            {
                "type": "usage",
                "prompt_tokens": usage.input_tokens or 0,
                "completion_tokens": usage.output_tokens or 0,
            }
        )
        ctx.emit({"type": "turn_end", "reason": "completed"})
    except Exception as exc:  # what the run raised is what an agent on it shows
        ctx.emit(error_event(exc))
        ctx.emit({"type": "turn_end", "reason": "error"})
