"""An agent on langchain-openai at its defaults (`--agent langchain-openai`, extra
`sdk-langchain-openai`).

The model is `ChatOpenAI(model=..., base_url=..., api_key=...)` with nothing else set:
`max_retries` left unset (the openai SDK's 2 retries), no timeout of its own. The loop is the
one langchain-core documents for tool calling: `bind_tools` with the scenario's tools, `stream`
the reply (chunks added up into one `AIMessage`), run each tool call and answer it with a
`ToolMessage`, until a reply has no tool call. Tool calls langchain could not parse
(`invalid_tool_calls`) are answered with an error too, so every call has its result. Whatever
langchain raises is shown as one error and ends the turn.

No outside network: LangSmith tracing is forced off (`LANGSMITH_TRACING=false`,
`LANGCHAIN_TRACING_V2=false`), so no run is sent to LangSmith. Capabilities: `tools`, `should_retry_header`.
"""

from __future__ import annotations

import os
from typing import Any

from conformance.adapters._sdk_common import TurnContext, error_event, openai_tools, run_turn
from conformance.adapters.interface import AdapterBase, RunOutcome, RunRequest

__all__ = ["CAPABILITIES", "LangChainOpenAIAdapter"]

CAPABILITIES = ("tools", "should_retry_header")  # the openai client obeys x-should-retry
_MAX_STEPS = 20  # bounds the tool loop of this minimal agent


class LangChainOpenAIAdapter(AdapterBase):
    name = "langchain-openai"

    def __init__(self) -> None:
        for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
            os.environ[var] = "false"  # a user's tracing setting must not send runs out
        import langchain_openai  # noqa: F401  (fail here, at lookup, when the extra is missing)

    def capabilities(self) -> set[str]:
        return set(CAPABILITIES)

    def run(self, req: RunRequest) -> RunOutcome:
        import importlib.metadata

        return run_turn(
            req,
            agent=self.name,
            version=importlib.metadata.version("langchain-openai"),
            capabilities=CAPABILITIES,
            turn=_turn,
        )


def _history(history: list[dict[str, Any]]) -> list[Any]:
    # langchain-openai's own reading of a chat-completions message dict
    from langchain_openai.chat_models.base import _convert_dict_to_message

    return [_convert_dict_to_message(m) for m in history]


def _turn(ctx: TurnContext) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=ctx.model, base_url=ctx.req.base_url, api_key=ctx.req.api_key)
    ctx.on_cleanup(lambda: llm.root_client.close())
    tools = openai_tools(ctx.start)
    bound: Any = llm.bind_tools(tools) if tools else llm
    messages: list[Any] = [*_history(ctx.start.get("history") or []), HumanMessage(ctx.prompt)]
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    try:
        for step in range(_MAX_STEPS):
            reply: Any = None
            for chunk in bound.stream(messages):
                reply = chunk if reply is None else reply + chunk
            if reply is None:
                raise RuntimeError("the model stream ended without any chunk")
            meta = getattr(reply, "usage_metadata", None) or {}
            usage["prompt_tokens"] += meta.get("input_tokens", 0)
            usage["completion_tokens"] += meta.get("output_tokens", 0)
            calls = [(c["id"] or "", c["name"], c["args"]) for c in reply.tool_calls] + [
                (c["id"] or "", c["name"] or "", c["args"] or "") for c in reply.invalid_tool_calls
            ]
            text = reply.content if isinstance(reply.content, str) else reply.text
            ctx.emit(
                {
                    "type": "message",
                    "id": f"a{step}",
                    "role": "assistant",
                    "text": text,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": name,
                                "arguments": args if isinstance(args, str) else _dumps(args),
                            },
                        }
                        for cid, name, args in calls
                    ],
                }
            )
            messages.append(reply)
            if not calls:
                ctx.emit({"type": "usage", **usage})
                ctx.emit({"type": "turn_end", "reason": "completed"})
                return
            for cid, name, args in calls:
                _, output = ctx.call_tool(name, cid, args)
                messages.append(ToolMessage(content=output, tool_call_id=cid))
        ctx.emit({"type": "error", "kind": "loop", "message": "Turn step limit reached."})
        ctx.emit({"type": "turn_end", "reason": "error"})
    except Exception as exc:  # what langchain raised is what an agent on it shows
        ctx.emit(error_event(exc))
        ctx.emit({"type": "turn_end", "reason": "error"})


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value)
