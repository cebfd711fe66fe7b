"""Front end: ``python -m conformance.reference run "TASK"`` runs one task against a real endpoint.

The endpoint comes from ``--base-url`` or ``OPENAI_BASE_URL``, the key only from
``OPENAI_API_KEY`` (a flag would show in the process list), the CA bundle from ``--ca-file`` or
``SSL_CERT_FILE``. Local tools (read, write, edit, list, grep, shell) are confined to
``--workdir``. Events are rendered as the user sees the conversation: streamed text as it grows,
reasoning prefixed (and dimmed on a terminal), tool calls with their results cut to a few lines,
a line per retry wait, typed errors; hidden (meta) messages are not shown and a withdrawn partial
reply is announced rather than erased. ``--json`` prints the raw events instead.

Exit status: 0 completed, 1 error, 130 aborted (Ctrl-C), 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from . import retry
from .agent import run_protocol

__all__ = ["Renderer", "main"]

EXIT = {"completed": 0, "error": 1, "aborted": 130}
TOOL_LINES = 6  # lines of a tool result shown; the model still sees all of it
ARG_CHARS = 200  # characters of a tool call's arguments shown
DIM, RESET = "\033[2m", "\033[0m"


class Renderer:
    """Turns adapter events into the user's view of the conversation, written to ``out``."""

    def __init__(self, out: TextIO, *, secret: str = "", color: bool = False) -> None:
        self.out = out
        self.secret = secret
        self.color = color
        self.shown: dict[str, dict[str, Any]] = {}  # message id -> what has been printed
        self.calls: dict[str, dict[str, Any]] = {}  # call id -> latest streamed tool call
        self.open: tuple[str, str] | None = None  # (message id, "text"|"reasoning") mid-line
        self.reason: str | None = None

    # ---- output helpers ----------------------------------------------------------------
    def _write(self, s: str) -> None:
        if self.secret:
            # A server may echo a header back in an error body: never let the key reach a screen.
            s = s.replace(self.secret, "[REDACTED]")
        self.out.write(s)
        self.out.flush()

    def _dim(self, s: str) -> str:
        return f"{DIM}{s}{RESET}" if self.color and s else s

    def _close(self) -> None:
        if self.open is not None:
            self._write("\n")
            self.open = None

    def line(self, s: str, *, dim: bool = False) -> None:
        self._close()
        self._write((self._dim(s) if dim else s) + "\n")

    # ---- events ------------------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(event)

    def _on_message(self, ev: dict[str, Any]) -> None:
        if ev.get("meta"):
            return  # hidden from the user by definition (continuations, loop reminders)
        mid = str(ev.get("id"))
        for call in ev.get("tool_calls") or []:
            if call.get("id"):
                self.calls[str(call["id"])] = call
        role = ev.get("role") or "assistant"
        if role != "assistant":
            self.line(f"{role}: {ev.get('text') or ''}")
            return
        seen = self.shown.setdefault(mid, {"reasoning": "", "text": ""})
        self._grow(mid, seen, "reasoning", ev.get("reasoning") or "")
        self._grow(mid, seen, "text", ev.get("text") or "")

    def _grow(self, mid: str, seen: dict[str, Any], part: str, now: str) -> None:
        """Print what ``part`` of message ``mid`` gained since last shown (streams grow it)."""
        before = seen[part]
        if now == before:
            return
        if not now.startswith(before):
            # A replacement, not a continuation: say so instead of rewriting printed text.
            self.line("(reply revised)", dim=True)
            before = ""
        new = now[len(before) :]
        seen[part] = now
        if self.open != (mid, part):
            self._close()
            self._write(self._dim("thinking: ") if part == "reasoning" else "assistant: ")
            self.open = (mid, part)
        self._write(self._dim(new) if part == "reasoning" else new)

    def _on_removed(self, ev: dict[str, Any]) -> None:
        mid = str(ev.get("id"))
        if self.shown.pop(mid, None) is not None:
            self.line("(previous partial reply discarded)", dim=True)

    def _on_tool(self, ev: dict[str, Any]) -> None:
        call = self.calls.get(str(ev.get("call_id")), {})
        args = str((call.get("function") or {}).get("arguments") or "")
        if len(args) > ARG_CHARS:
            args = args[:ARG_CHARS] + "…"
        self.line(f"→ {ev.get('name')}({args})")
        lines = str(ev.get("output") or "").splitlines() or [""]
        status = ev.get("status") or "ok"
        head = lines[:TOOL_LINES]
        for i, text in enumerate(head):
            self.line(f"  {'← ' + status + ': ' if i == 0 else '  '}{text}")
        if len(lines) > TOOL_LINES:
            self.line(f"    … {len(lines) - TOOL_LINES} more lines", dim=True)

    def _on_retry(self, ev: dict[str, Any]) -> None:
        delay = ev.get("delay_s")
        wait = f"{float(delay):.1f} s" if isinstance(delay, (int, float)) else "a moment"
        self.line(
            f"retrying in {wait} ({ev.get('reason')}, attempt {ev.get('attempt')}/"
            f"{retry.MAX_RETRIES})",
            dim=True,
        )

    def _on_error(self, ev: dict[str, Any]) -> None:
        self.line(f"error [{ev.get('kind')}]: {ev.get('message')}")

    def _on_usage(self, ev: dict[str, Any]) -> None:
        self.line(
            f"(tokens: {ev.get('prompt_tokens')} in, {ev.get('completion_tokens')} out)", dim=True
        )

    def _on_turn_end(self, ev: dict[str, Any]) -> None:
        self.reason = str(ev.get("reason"))
        self.line(f"[{self.reason}]", dim=True)


class JsonEvents:
    """``--json``: one raw event per line, key redacted all the same."""

    def __init__(self, out: TextIO, *, secret: str = "") -> None:
        self.out = out
        self.secret = secret
        self.reason: str | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "turn_end":
            self.reason = str(event.get("reason"))
        s = json.dumps(event, ensure_ascii=False)
        if self.secret:
            s = s.replace(self.secret, "[REDACTED]")
        self.out.write(s + "\n")
        self.out.flush()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conformance.reference run",
        description=(
            "Run one task with the reference agent against an OpenAI-compatible endpoint and "
            "print the conversation. The key is read from OPENAI_API_KEY only."
        ),
    )
    p.add_argument("task", help="what to ask the agent")
    p.add_argument("--model", default=os.environ.get("OPENAI_MODEL"), help="default $OPENAI_MODEL")
    p.add_argument("--workdir", default=".", help="where local tools may read, write and run")
    p.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL"),
        help="endpoint ending in /v1; default $OPENAI_BASE_URL",
    )
    p.add_argument(
        "--ca-file", default=os.environ.get("SSL_CERT_FILE"), help="default $SSL_CERT_FILE"
    )
    p.add_argument(
        "--debug-dir", help="diagnostic dumps and tool-call log; default WORKDIR/.conformance-debug"
    )
    p.add_argument("--fallback-model", help="model to switch to after repeated 529s")
    p.add_argument("--max-output-tokens", type=int, help="output limit per request")
    p.add_argument(
        "--no-stream-fallback",
        action="store_true",
        help="surface a failed stream instead of resending without streaming",
    )
    p.add_argument("--json", action="store_true", help="print the raw adapter events, one a line")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every wait and time limit (for tests and demos; default 1)",
    )
    return p


def _usage_error(msg: str) -> int:
    print(f"run: {msg}", file=sys.stderr)
    return 2


async def _run(
    start: dict[str, Any], emit: Any, *, base_url: str, key: str, ca: str | None, wd: Path
) -> str:
    abort = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = False

    def on_sigint() -> None:
        abort.set()
        # A second Ctrl-C falls back to the default handler: a hard stop if the abort hangs.
        loop.remove_signal_handler(signal.SIGINT)

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)  # main thread only
        installed = True
    try:
        return await run_protocol(
            start, emit, abort, base_url=base_url, api_key=key, ca_file=ca, workdir=wd
        )
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    """``run TASK [options]``; returns the exit status."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    if args_in[:1] == ["run"]:
        args_in = args_in[1:]
    try:
        args = _parser().parse_args(args_in)
    except SystemExit as exc:  # argparse: --help is 0, bad usage 2
        return int(exc.code or 0)
    if not args.base_url:
        return _usage_error("no endpoint: set OPENAI_BASE_URL or pass --base-url")
    key = os.environ.get("OPENAI_API_KEY", "")
    if not key:
        return _usage_error("OPENAI_API_KEY is not set (the key is read from the environment only)")
    if not args.model:
        return _usage_error("no model: pass --model or set OPENAI_MODEL")
    if args.time_scale <= 0:
        return _usage_error(f"--time-scale must be > 0, got {args.time_scale:g}")
    workdir = Path(args.workdir).resolve()
    if not workdir.is_dir():
        return _usage_error(f"--workdir {args.workdir!r} is not a directory")
    if args.ca_file and not Path(args.ca_file).is_file():
        return _usage_error(f"CA bundle {args.ca_file!r} (--ca-file or SSL_CERT_FILE) not found")
    config: dict[str, Any] = {
        "fallback_model": args.fallback_model,
        "max_output_tokens": args.max_output_tokens,
    }
    if args.no_stream_fallback:
        config["stream_fallback"] = False
    start = {
        "type": "start",
        "protocol": 1,
        "scenario": "console",
        "model": args.model,
        "prompt": args.task,
        "tools": [],  # the local tools are added by the agent because a workdir is given
        "time_scale": args.time_scale,
        "debug_dir": str(
            Path(args.debug_dir) if args.debug_dir else workdir / ".conformance-debug"
        ),
        "config": config,
    }
    out = sys.stdout
    emit: Renderer | JsonEvents
    if args.json:
        emit = JsonEvents(out, secret=key)
    else:
        emit = Renderer(out, secret=key, color=out.isatty() and "NO_COLOR" not in os.environ)
        emit.line(f"you: {args.task}")
    try:
        reason = asyncio.run(
            _run(start, emit, base_url=args.base_url, key=key, ca=args.ca_file, wd=workdir)
        )
    except KeyboardInterrupt:  # a second Ctrl-C while the abort was being handled
        return 130
    return EXIT.get(reason, 1)


if __name__ == "__main__":
    sys.exit(main())
