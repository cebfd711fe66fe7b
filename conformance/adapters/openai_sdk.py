"""The official `openai` SDK at its defaults, driven by a minimal agent loop (`openai-sdk`).

It shows how a plain SDK-based agent fares: default retries (2), streaming, no stream fallback,
no time scaling. It runs on a worker thread and is bounded by the run's deadline.
"""

from __future__ import annotations

import json
import threading
import time
import traceback

import httpx
import openai

from conformance.adapters.base import RunOutcome, RunRequest, redact, redact_obj

__all__ = ["OpenAISDKAdapter"]

CAPABILITIES = ("tools",)
_MAX_STEPS = 20  # bounds the tool loop of this minimal agent


class OpenAISDKAdapter:
    """A minimal chat-completions tool loop on the official SDK."""

    name = "openai-sdk"

    def capabilities(self) -> set[str]:
        return set(CAPABILITIES)

    def run(self, req: RunRequest) -> RunOutcome:
        events: list[dict] = []
        lock = threading.Lock()
        state: dict = {"log": "", "error": None}

        def emit(ev: dict) -> None:
            with lock:
                events.append({**ev, "t_ns": time.monotonic_ns()})

        def worker() -> None:
            try:
                self._turn(req, emit)
            except Exception:  # a bug in this loop: report, never raise into the runner
                state["log"] = traceback.format_exc()
                state["error"] = "openai-sdk agent raised: " + state["log"].strip().splitlines()[-1]

        emit(
            {
                "type": "hello",
                "agent": "openai-sdk",
                "version": openai.__version__,
                "capabilities": list(CAPABILITIES),
            }
        )
        thread = threading.Thread(target=worker, name="openai-sdk-agent", daemon=True)
        thread.start()
        thread.join(req.deadline_s)
        with lock:
            snapshot = list(events)
        if thread.is_alive():
            status, error = "timeout", f"no turn_end within {req.deadline_s:g} s"
        elif state["error"]:
            status, error = "error", state["error"]
        else:
            status, error = "ran", None
        key = req.api_key
        return RunOutcome(
            status=status,
            events=redact_obj(snapshot, key),
            hello=redact_obj(snapshot[0], key),
            log=redact(state["log"], key),
            error=redact(error, key) if error else None,
        )

    def _turn(self, req: RunRequest, emit) -> None:
        start = req.start
        verify: str | bool = req.ca_file or True
        http = httpx.Client(verify=verify)
        client = openai.OpenAI(base_url=req.base_url, api_key=req.api_key, http_client=http)
        tools = [
            {
                "type": "function",
                "function": {k: t[k] for k in ("name", "description", "parameters") if k in t},
            }
            for t in start.get("tools") or []
        ]
        messages: list[dict] = list(start.get("history") or [])
        messages.append({"role": "user", "content": start.get("prompt", "")})
        try:
            for step in range(_MAX_STEPS):
                kwargs: dict = {
                    "model": start.get("model", "conformance-model"),
                    "messages": messages,
                    "stream": True,
                }
                if tools:
                    kwargs["tools"] = tools
                text, calls = "", {}
                for chunk in client.chat.completions.create(**kwargs):
                    if req.abort.is_set():
                        emit({"type": "turn_end", "reason": "aborted"})
                        return
                    if getattr(chunk, "usage", None):
                        emit(
                            {
                                "type": "usage",
                                "prompt_tokens": chunk.usage.prompt_tokens or 0,
                                "completion_tokens": chunk.usage.completion_tokens or 0,
                            }
                        )
                    for choice in chunk.choices:
                        delta = choice.delta
                        text += delta.content or ""
                        for tc in delta.tool_calls or []:
                            c = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                            c["id"] = tc.id or c["id"]
                            if tc.function:
                                c["name"] += tc.function.name or ""
                                c["args"] += tc.function.arguments or ""
                tool_calls = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["args"]},
                    }
                    for _, c in sorted(calls.items())
                ]
                emit(
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
                    emit({"type": "turn_end", "reason": "completed"})
                    return
                for tc in tool_calls:
                    output = self._run_tool(http, start, tc)
                    emit(
                        {
                            "type": "tool",
                            "call_id": tc["id"],
                            "name": tc["function"]["name"],
                            "status": "error" if output.startswith("Error:") else "ok",
                            "output": output,
                        }
                    )
                    messages.append({"role": "tool", "tool_call_id": tc["id"], "content": output})
            emit({"type": "error", "kind": "loop", "message": "Turn step limit reached."})
            emit({"type": "turn_end", "reason": "error"})
        except openai.APIError as exc:
            emit({"type": "error", "kind": type(exc).__name__, "message": str(exc)})
            emit({"type": "turn_end", "reason": "error"})
        finally:
            http.close()

    @staticmethod
    def _run_tool(http: httpx.Client, start: dict, tc: dict) -> str:
        name = tc["function"]["name"]
        try:
            args = json.loads(tc["function"]["arguments"] or "{}")
        except ValueError:
            return "Error: tool arguments are not valid JSON"
        try:
            r = http.post(
                f"{start['tool_endpoint']}/{name}",
                json={"call_id": tc["id"], "arguments": args},
                timeout=60,
            )
            body = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            return f"Error: tool {name} failed: {exc}"
        if "error" in body:
            return f"Error: {body['error'].get('message') or body['error'].get('type')}"
        return str(body.get("output", ""))
