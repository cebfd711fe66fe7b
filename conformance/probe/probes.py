"""What the probe sends: the fixed, ordered list of chat requests and the body of each.

Each request carries a marker in its last user message, so a scenario step (a recording, a
gateway personality) can answer it with ``match: {contains: marker}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PROBES", "REASONING_ONLY_CONTENT", "TOOL", "ProbeRequest"]

# The reference agent's explanatory text for a reasoning-only assistant turn (RSN rules).
REASONING_ONLY_CONTENT = (
    "[The previous reply was cut off by the output token limit while still reasoning; "
    "no visible answer was produced yet.]"
)

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}


@dataclass(frozen=True)
class ProbeRequest:
    """One request of the probe; ``marker`` is in the last user message, so a scenario step
    can target it with ``match: {contains: marker}``."""

    name: str
    marker: str
    stream: bool
    prompt: str
    tools: bool = False
    history: bool = False
    invalid: bool = False
    long: bool = False

    def body(self, model: str, max_tokens: int) -> dict[str, Any]:
        text = f"{self.marker} {self.prompt}"
        if self.invalid:
            # Not an array: every OpenAI-compatible gateway must refuse it with a 4xx.
            return {"model": model, "messages": text, "stream": False}
        messages: list[dict[str, Any]] = []
        if self.history:
            messages = [
                {"role": "user", "content": "What is 6 times 7?"},
                {
                    "role": "assistant",
                    "content": REASONING_ONLY_CONTENT,
                    "reasoning_content": "6 times 7: six sevens are 42.",
                },
            ]
        messages.append({"role": "user", "content": text})
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": self.stream,
            "max_tokens": max_tokens * (4 if self.long else 1),
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.tools:
            body["tools"] = [TOOL]
        return body


# In priority order: a smaller budget drops the last ones.
PROBES: tuple[ProbeRequest, ...] = (
    ProbeRequest("short-stream", "probe:short", True, "Reply with the single word: ready."),
    ProbeRequest(
        "reasoning-stream",
        "probe:reasoning",
        True,
        "Think it through step by step before answering: how many prime numbers are there "
        "below 60? Give the count.",
        long=True,
    ),
    ProbeRequest(
        "tool-stream",
        "probe:tool",
        True,
        "What is the weather in Paris in celsius? Use the get_weather tool.",
        tools=True,
    ),
    ProbeRequest("short-json", "probe:short", False, "Reply with the single word: ready."),
    ProbeRequest(
        "tool-json",
        "probe:tool",
        False,
        "What is the weather in Paris in celsius? Use the get_weather tool.",
        tools=True,
    ),
    ProbeRequest("history", "probe:history", False, "Now add 1 to that. Reply with the number."),
    ProbeRequest("bad-request", "probe:bad", False, "An invalid request.", invalid=True),
    ProbeRequest("rate-limit", "probe:rate", False, "Reply with the single word: ready."),
)
