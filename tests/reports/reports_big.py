"""A results document with a shipped CLI's weight of evidence, built from a real one.

``python tests/reports/reports_big.py RESULTS.json OUT.json [--mb 300]`` pads every chat
request of every scenario the way a shipped CLI's requests are heavy: the same long system
prompt and tool list on every request, a conversation that grows, long streamed replies and
tool outputs; and repeats each scenario's requests until the evidence weighs about ``--mb``
megabytes in all. Verdicts and times are left as they were. The report's size and speed on it
are measured in docs/report.md; ``test_reports_size.py`` builds a small one.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
from pathlib import Path
from typing import Any

__all__ = ["inflate"]

_WORDS = [
    "the",
    "agent",
    "reads",
    "a",
    "file",
    "and",
    "writes",
    "the",
    "result",
    "then",
    "calls",
    "a",
    "tool",
    "with",
    "arguments",
    "path",
    "line",
    "offset",
    "limit",
    "content",
    "pattern",
    "glob",
    "grep",
    "bash",
    "command",
    "output",
    "error",
    "retry",
    "stream",
    "model",
    "request",
    "response",
    "token",
    "context",
    "window",
    "summary",
    "compaction",
    "permission",
    "denied",
    "timeout",
    "network",
]


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def inflate(doc: dict[str, Any], megabytes: float, *, seed: int = 7) -> dict[str, Any]:
    """A copy of ``doc`` whose scenarios' evidence weighs about ``megabytes`` MB."""
    rng = random.Random(seed)
    system = _text(rng, 40_000)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": _text(rng, 1_500),
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        for i in range(20)
    ]
    out = copy.deepcopy(doc)
    scenarios = [s for a in out["agents"] for s in a["scenarios"] if s.get("journal")]
    per_scenario = megabytes * 1e6 / max(len(scenarios), 1)
    for sc in scenarios:
        entries = sc["journal"].get("entries") or []
        chats = [e for e in entries if e.get("kind") == "chat" and isinstance(e.get("body"), dict)]
        if not chats:
            continue
        talk: list[dict[str, Any]] = [{"role": "system", "content": system}]
        grown: list[dict[str, Any]] = []
        size = 0.0
        seq = max(e["seq"] for e in entries) + 1
        k = 0
        while size < per_scenario:
            src = chats[k % len(chats)]
            k += 1
            e = copy.deepcopy(src)
            if k > len(chats):  # a repeat: a later request of the same shape
                e["seq"] = seq
                seq += 1
            talk.append({"role": "user", "content": _text(rng, 3_000)})
            e["body"] = {**e["body"], "messages": [*talk, *e["body"].get("messages", [])]}
            e["body"]["tools"] = tools
            r = e.get("response")
            if isinstance(r, dict) and isinstance(r.get("sent"), str):
                r["sent"] = r["sent"] + "".join(
                    f'data: {{"choices":[{{"delta":{{"content":"{_text(rng, 80)}"}}}}]}}\n\n'
                    for _ in range(200)
                )
            grown.append(e)
            size += len(json.dumps(e, ensure_ascii=False))
        sc["journal"]["entries"] = [e for e in entries if e not in chats] + grown
        sc["agent_log"] = (sc.get("agent_log") or "") + _text(rng, 50_000)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--mb", type=float, default=300.0)
    args = p.parse_args(argv)
    doc = inflate(json.loads(args.results.read_text("utf-8")), args.mb)
    args.out.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
