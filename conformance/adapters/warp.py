"""A fast clock for an agent that cannot scale its own waits: libfaketime, preloaded.

A shipped agent sleeps in real time: ten retries with backoff are minutes. libfaketime (Debian's
``faketime`` package), preloaded into a dynamically linked program with
``FAKETIME="+0 xN"``, makes every clock it reads run N times as fast from the moment it starts,
and the timeouts of its sleeps and polls with it, so a 10 s timer fires after 0.2 s at x50. The
run then has a time scale of 1/N for that agent: the gateway scales its stalls and deadlines as
for an agent that scales its own waits, and renders HTTP-dates in the agent's clock.

What the preload cannot reach is refused, with the reason, and the agent runs in real time: a
statically linked executable (no dynamic loader reads ``LD_PRELOAD``), a missing library.
A program that hands its work to a static child (Codex's Node wrapper starts a static musl
binary) passes this check and must not declare a warp in its profile.

A program that reads its clock and sleeps through raw system calls, not libc (Bun's Zig code in
opencode), is out of libfaketime's reach; its profile sets ``time_warp_raw_clock`` and the warp
preloads the harness's own shim beside libfaketime (``warp_shim.c``, its docstring says how),
built with the system's C compiler on first use (:func:`build_shim`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.errors import ConformanceError

__all__ = [
    "LIBRARIES",
    "SHIM_SOURCE",
    "SPREAD_LIMIT_S",
    "Clock",
    "Warp",
    "WarpRefused",
    "build_shim",
    "find_library",
    "preloadable",
    "warp_env",
]

# Where Debian and Ubuntu put the multi-threaded library (Node and Bun run threads);
# $CONFORMANCE_FAKETIME_LIB names another.
LIBRARIES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)
_PT_INTERP = 3
SHIM_SOURCE = Path(__file__).with_name("warp_shim.c")
# How loose a timing check may be made by the agent's own time between attempts, in its
# seconds: the calibration's spread at speed N widens the slack by at most this much.
SPREAD_LIMIT_S = 0.2


class WarpRefused(ConformanceError):
    """A warp that cannot be honoured here; the message says why."""


@dataclass(frozen=True)
class Warp:
    """An agent's clock runs ``speed`` times as fast, through ``library``."""

    speed: float
    library: str
    shim: str | None = None  # the raw-clock shim, preloaded after the library (build_shim)

    @property
    def time_scale(self) -> float:
        return 1.0 / self.speed


def find_library() -> str:
    """The libfaketime to preload; WarpRefused naming what was looked for."""
    named = os.environ.get("CONFORMANCE_FAKETIME_LIB")
    for path in (named,) if named else LIBRARIES:
        if path and Path(path).is_file():
            return path
    where = named or ", ".join(LIBRARIES)
    raise WarpRefused(
        f"libfaketime not found ({where}): install Debian's `faketime` package "
        "or set CONFORMANCE_FAKETIME_LIB"
    )


def build_shim(cache_dir: Path) -> str:
    """The raw-clock shim (``warp_shim.c``) as a shared object in ``cache_dir``, built once per
    source (its hash is in the file name; the name must keep ``warp_shim``, by which the shim
    knows itself in a child's environment); WarpRefused naming why it cannot be had."""
    if platform.machine() != "x86_64":
        raise WarpRefused(
            f"the raw-clock shim is x86_64 only, this machine is {platform.machine()}"
        )
    source = SHIM_SOURCE.read_bytes()
    out = cache_dir / f"warp_shim-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if out.is_file():
        return str(out)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise WarpRefused("the raw-clock shim needs a C compiler (cc or gcc) to be built")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Several processes of one run may build it at once: each into its own file, then renamed.
    fd, tmp = tempfile.mkstemp(prefix="warp_shim-", suffix=".so", dir=cache_dir)
    os.close(fd)
    cmd = [compiler, "-O2", "-fPIC", "-shared", "-o", tmp, str(SHIM_SOURCE), "-ldl"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise WarpRefused(
                f"the raw-clock shim did not build ({' '.join(cmd)}): {done.stderr.strip()[:500]}"
            )
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(out)


def _interpreter_of_script(head: bytes, env_path: str | None) -> str | None:
    """The program a ``#!`` script runs under (``/usr/bin/env node`` resolved on PATH)."""
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not line:
        return None
    prog, args = line[0], line[1:]
    if Path(prog).name == "env":
        args = [a for a in args if not a.startswith("-")]
        return shutil.which(args[0], path=env_path) if args else None
    return prog


def _elf_has_interpreter(data: bytes) -> bool | None:
    """Whether an ELF image names a dynamic loader (PT_INTERP); None when it is no ELF."""
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return None
    is64, little = data[4] == 2, data[5] == 1
    end = "<" if little else ">"
    if is64:
        (phoff,) = struct.unpack_from(end + "Q", data, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 54)
    else:
        (phoff,) = struct.unpack_from(end + "I", data, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 42)
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 4 > len(data):
            break
        (p_type,) = struct.unpack_from(end + "I", data, off)
        if p_type == _PT_INTERP:
            return True
    return False


def preloadable(program: str, env_path: str | None = None) -> tuple[bool, str]:
    """Whether ``LD_PRELOAD`` reaches ``program`` (following a ``#!`` line and symlinks), and
    why not when it does not."""
    seen: list[str] = []
    current: str | None = program
    for _ in range(4):  # a script's interpreter may itself be a script, not deeper
        if current is None:
            break
        path = Path(current).resolve()
        seen.append(str(path))
        try:
            with path.open("rb") as f:
                head = f.read(65536)
        except OSError as exc:
            return False, f"cannot read {path}: {exc}"
        if head[:2] == b"#!":
            current = _interpreter_of_script(head, env_path)
            continue
        dynamic = _elf_has_interpreter(head)
        if dynamic is None:
            return False, f"{path} is neither an ELF executable nor a #! script"
        if not dynamic:
            return False, f"{path} is statically linked: LD_PRELOAD cannot reach it"
        return True, f"{path} is dynamically linked"
    return False, f"no executable found behind {' -> '.join(seen) or program}"


def warp_env(warp: Warp) -> dict[str, str]:
    """The environment that puts a process on the fast clock (its children too)."""
    return {
        "LD_PRELOAD": warp.library + (f":{warp.shim}" if warp.shim else ""),
        # From the moment the process starts, its clocks run `speed` times as fast, the
        # monotonic ones too (the sleeps and timers an agent's backoff uses).
        "FAKETIME": f"+0 x{warp.speed:g}",
        # Bun (Claude Code) waits in epoll_pwait2 by default, a raw system call libfaketime
        # does not reach, so its timers would wait in real time; this flag of Bun's makes it
        # wait in epoll_pwait, whose timeout the preload scales. Ignored by anything else.
        "BUN_FEATURE_FLAG_DISABLE_EPOLL_PWAIT2": "1",
    }


@dataclass
class Clock:
    """The clocks an adapter runs its agent on, once calibrated (``conformance.calibration``):
    ``speed`` for scenarios that do not rest on timing, ``timing_speed`` for those that do (None:
    real time), each with the calibration that accepted it (``calibrations``)."""

    library: str
    speed: float | None = None
    timing_speed: float | None = None
    shim: str | None = None
    calibrations: dict[float, Any] = field(default_factory=dict)
    note: str = "real time (not calibrated yet)"
    trial: float | None = None  # the speed being calibrated

    def scale(self, timing: bool) -> float:
        """The time scale of a run: 1/speed on a fast clock, 1.0 in real time."""
        speed = self.trial or (self.timing_speed if timing else self.speed)
        return 1.0 / speed if speed else 1.0

    def confirm_scale(self, timing: bool) -> float:
        """The time scale that confirms a failed timing verdict of a run at :meth:`scale`: the
        slowest speed calibrated, if slower than the run's, else the run's own again (a
        failure stands when it reproduces); real time for a run in real time."""
        run = self.trial or (self.timing_speed if timing else self.speed)
        if not run:
            return 1.0
        slower = [s for s in self.calibrations if s < run]
        return 1.0 / min(slower) if slower else 1.0 / run

    def warp_for(self, time_scale: float) -> Warp | None:
        """The warp of a run at ``time_scale`` (as the runner chose it from :meth:`scale`)."""
        if time_scale >= 1.0:
            return None
        return Warp(round(1.0 / time_scale, 6), self.library, self.shim)
