"""Local file and shell tools for the reference agent, confined to a working directory.

Every path argument is resolved against the working directory and must stay inside
it (no ``..`` escapes, no absolute paths elsewhere, no symlinks leading out).
``run_shell`` runs in its own process group so a timeout kills the whole tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path
from typing import Any

__all__ = ["LOCAL_SPECS", "LocalToolError", "resolve_inside", "run_local"]


class LocalToolError(Exception):
    """A local tool failed; the message is shown to the model."""


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


_S = {"type": "string"}
LOCAL_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": ("Read a text file in the working directory.", _obj({"path": _S}, ["path"])),
    "write_file": (
        "Create or overwrite a text file in the working directory.",
        _obj({"path": _S, "content": _S}, ["path", "content"]),
    ),
    "edit_file": (
        "Replace one exact occurrence of old_string with new_string in a file.",
        _obj(
            {"path": _S, "old_string": _S, "new_string": _S}, ["path", "old_string", "new_string"]
        ),
    ),
    "list_dir": ("List a directory in the working directory.", _obj({"path": _S}, [])),
    "grep": (
        "Search files under a directory for a regular expression; prints path:line:text.",
        _obj({"pattern": _S, "path": _S}, ["pattern"]),
    ),
    "run_shell": (
        "Run a shell command in the working directory.",
        _obj({"command": _S}, ["command"]),
    ),
}


def resolve_inside(workdir: Path, rel: str) -> Path:
    """Resolve ``rel`` against ``workdir``; raise LocalToolError if it escapes."""
    root = workdir.resolve()
    target = (root / rel).resolve()
    if target != root and root not in target.parents:
        raise LocalToolError(f"path {rel!r} is outside the working directory")
    return target


def _read(workdir: Path, args: dict[str, Any]) -> str:
    p = resolve_inside(workdir, args["path"])
    if not p.is_file():
        raise LocalToolError(f"file not found: {args['path']}")
    return p.read_text(encoding="utf-8", errors="replace")


def _write(workdir: Path, args: dict[str, Any]) -> str:
    p = resolve_inside(workdir, args["path"])
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(args["content"], encoding="utf-8")
    return f"wrote {len(args['content'])} characters to {args['path']}"


def _edit(workdir: Path, args: dict[str, Any]) -> str:
    p = resolve_inside(workdir, args["path"])
    if not p.is_file():
        raise LocalToolError(f"file not found: {args['path']}")
    text = p.read_text(encoding="utf-8")
    count = text.count(args["old_string"]) if args["old_string"] else 0
    if count == 0:
        raise LocalToolError(
            f"old_string not found in {args['path']}; read the file to see its exact content"
        )
    if count > 1:
        raise LocalToolError(
            f"old_string occurs {count} times in {args['path']}; include more context"
        )
    p.write_text(text.replace(args["old_string"], args["new_string"], 1), encoding="utf-8")
    return f"edited {args['path']}"


def _list(workdir: Path, args: dict[str, Any]) -> str:
    p = resolve_inside(workdir, args.get("path") or ".")
    if not p.is_dir():
        raise LocalToolError(f"not a directory: {args.get('path')}")
    return "\n".join(e.name + ("/" if e.is_dir() else "") for e in sorted(p.iterdir()))


def _grep(workdir: Path, args: dict[str, Any]) -> str:
    try:
        rx = re.compile(args["pattern"])
    except re.error as exc:
        raise LocalToolError(f"invalid regular expression {args['pattern']!r}: {exc}") from None
    base = resolve_inside(workdir, args.get("path") or ".")
    root = workdir.resolve()
    files = [base] if base.is_file() else sorted(f for f in base.rglob("*") if f.is_file())
    hits = []
    for f in files:
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable files are skipped
        rel = f.relative_to(root)
        hits += [f"{rel}:{n}:{line}" for n, line in enumerate(lines, 1) if rx.search(line)]
    return "\n".join(hits) if hits else "no matches"


async def _shell(workdir: Path, args: dict[str, Any], timeout: float | None) -> str:
    proc = await asyncio.create_subprocess_shell(
        args["command"],
        cwd=workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise
    text = out.decode("utf-8", "replace")
    if err:
        text += ("\n" if text else "") + "[stderr]\n" + err.decode("utf-8", "replace")
    if proc.returncode:
        raise LocalToolError(f"command exited with status {proc.returncode}\n{text}")
    return text


async def run_local(name: str, args: dict[str, Any], workdir: Path, timeout: float | None) -> str:
    """Run local tool ``name``; raise LocalToolError on failure, TimeoutError past ``timeout``.

    ``timeout`` None: no limit of its own (the caller cancels; the shell's group is killed).
    """
    if name == "run_shell":
        return await _shell(workdir, args, timeout)
    funcs = {
        "read_file": _read,
        "write_file": _write,
        "edit_file": _edit,
        "list_dir": _list,
        "grep": _grep,
    }
    try:
        return funcs[name](workdir, args)
    except OSError as exc:
        raise LocalToolError(f"{name} failed: {exc.strerror or exc}") from None
