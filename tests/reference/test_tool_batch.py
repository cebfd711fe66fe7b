"""TOL-09: the reference agent's own `batch` tool, with a scripted hosted tool (no sockets)."""

from __future__ import annotations

import asyncio
import json

from conformance.reference.toolbox import ToolBox, ToolSpec

WRITE = ToolSpec(
    "write_file",
    "Write a file",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
)
BATCH = ToolSpec("batch", "Run several tool calls", {"type": "object"})


class ScriptedBox(ToolBox):
    """Hosted attempts answered from a script: (kind, text) per attempt, in order."""

    def __init__(self, script: list[tuple[str, str]]) -> None:
        super().__init__([WRITE, BATCH], hosted_endpoint="http://unused", workdir=None)
        self.script = list(script)
        self.calls: list[tuple[str, str, dict]] = []

    async def attempt(self, call_id: str, name: str, args: dict) -> tuple[str, str, str]:
        self.calls.append((call_id, name, args))
        kind, text = self.script.pop(0)
        return kind, text, "execution_error" if kind == "error" else ""


def _batch(stop_on_error: bool | None = True, paths=("a.txt", "b.txt", "c.txt")) -> str:
    items = [{"tool": "write_file", "arguments": {"path": p, "content": "x"}} for p in paths]
    args: dict = {"items": items}
    if stop_on_error is not None:
        args["stop_on_error"] = stop_on_error
    return json.dumps(args)


def _line(output: str, label: str) -> str:
    [line] = [ln for ln in output.splitlines() if label in ln]
    return line


def test_TOL_09_completed_failed_skipped_one_line_each():
    box = ScriptedBox([("ok", "wrote 1 byte"), ("error", "Error: disk full")])
    res = asyncio.run(box.run("b1", "batch", _batch(), truncated=False))
    assert [c[2]["path"] for c in box.calls] == ["a.txt", "b.txt"]  # c.txt never ran
    assert [c[0] for c in box.calls] == ["b1.1", "b1.2"]
    assert "completed" in _line(res.output, "a.txt")
    assert "failed" in _line(res.output, "b.txt") and "disk full" in _line(res.output, "b.txt")
    assert "skipped" in _line(res.output, "c.txt")
    assert res.is_error and res.status == "error"


def test_TOL_09_without_stop_on_error_every_item_runs():
    box = ScriptedBox([("error", "Error: disk full"), ("ok", "wrote"), ("ok", "wrote")])
    res = asyncio.run(box.run("b1", "batch", _batch(stop_on_error=None), truncated=False))
    assert len(box.calls) == 3
    assert "failed" in _line(res.output, "a.txt")
    assert "completed" in _line(res.output, "c.txt") and "skipped" not in res.output


def test_TOL_09_all_completed_is_not_an_error_and_bad_items_fail_alone():
    box = ScriptedBox([("ok", "wrote"), ("ok", "wrote")])
    res = asyncio.run(box.run("b1", "batch", _batch(paths=("a.txt", "b.txt")), truncated=False))
    assert not res.is_error and res.status == "ok"
    items = [{"tool": "nope", "arguments": {"path": "z"}}, {"tool": "batch", "arguments": {}}]
    res = asyncio.run(box.run("b2", "batch", json.dumps({"items": items}), truncated=False))
    assert "failed" in _line(res.output, "nope") and "does not exist" in res.output
    assert "batch cannot contain a batch" in res.output


def test_TOL_09_empty_items_is_an_invalid_call():
    box = ScriptedBox([])
    res = asyncio.run(box.run("b1", "batch", '{"items": []}', truncated=False))
    assert res.status == "invalid" and "items" in res.output
