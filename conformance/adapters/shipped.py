"""The `shipped:<profile>` adapter: certify an agent as it ships, knowing nothing of our protocol.

Theory of operation: a *profile* (``conformance/profiles/<name>.yaml``, loaded and validated
with file:line errors by `conformance.adapters.shipped_profile`) says how to run the agent's own headless mode: an argv template,
environment variables and configuration files written into a fresh ``HOME`` /
``XDG_CONFIG_HOME`` (and the working directory), all templated with the run's ``{prompt}``,
``{base_url}``, ``{model}`` and ``{api_key}``. The agent runs once per scenario under the
loopback guard (conformance.adapters.guard), in its own process group, killed as a group at the run's
wall-clock deadline. Evidence comes from the wire (the gateway's journal); the agent's output is
mapped to protocol events only where the mapping is honest:

- ``hello`` is synthesised from the profile (name, pinned version, declared capabilities);
- the assistant's final text, and the tool calls it printed, come from its structured output
  when the profile names a parser (`conformance.adapters.shipped_parsers`, one module per
  format; ``text`` takes the whole stdout as the final answer);
- a non-zero exit is an ``error`` event (kind ``agent_exit``: the agent's words are not mapped
  to our error kinds) and ``turn_end`` with reason ``error``; exit 0 is ``completed``.

Removals, hidden (meta) messages and retries the agent does not print cannot be observed: the
profile's capabilities leave them out, so their criteria are UNSUPPORTED rather than guessed.
Features the agent has but our protocol cannot reach (a user's abort, a fallback model, a stop
hook...) are driven from outside where the profile says how (``drive``: a signal, arguments,
environment, files), each earning its capability; ``hello["driven"]`` records how. Outside
connection attempts logged by the guard travel in the run's outcome
(``RunOutcome.outside_attempts``) and are written into the scenario's ``agent_log``; the
adapter's ``outside_attempts`` keeps every one of its lifetime for the certification hook.

A scenario's ``history`` reaches an agent whose profile says how it resumes a saved conversation
(``history``): the history is written in its own format (`conformance.adapters.shipped_history`)
under a new session id, and the run resumes it (``hello["history"]`` says how). A history the
format cannot carry whole makes the run ``unsupported``, saying what; an agent without
``history`` starts a new conversation, and its traits say it cannot be given one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from conformance.adapters.command import kill_group
from conformance.adapters.guard import GuardedProcess, LoopbackGuard
from conformance.adapters.interface import (
    AdapterBase,
    AgentTraits,
    FastClock,
    RunOutcome,
    RunRequest,
    as_status,
    redact,
)
from conformance.adapters.shipped_history import FORMATS, Untellable
from conformance.adapters.shipped_parsers import error_event
from conformance.adapters.shipped_parsers import parse as parse_output
from conformance.adapters.shipped_profile import (
    PLACEHOLDERS,
    PROFILE_DIR,
    Profile,
    ProfileError,
    agent_cache_dir,
    load_profile,
    render,
    which_profiles,
)
from conformance.adapters.warp import (
    SPREAD_LIMIT_S,
    Clock,
    Warp,
    WarpRefused,
    build_shim,
    find_library,
    preloadable,
    warp_env,
)

# The profile's names and the parsers' are re-exported: the adapter is where users look first.
__all__ = [
    "PLACEHOLDERS",
    "PROFILE_DIR",
    "Profile",
    "ProfileError",
    "ShippedAdapter",
    "agent_cache_dir",
    "error_event",
    "load_profile",
    "parse_output",
    "render",
    "which_profiles",
]

# Real seconds added to the deadline of an agent on a fast clock: its start-up and its work
# between requests run at real speed (a coding CLI starts in seconds on a loaded machine).
WARP_ALLOWANCE_S = 30.0
_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_MAX_LOG = 1_000_000


def _drain(pipe: IO[bytes], sink: bytearray, cap: int) -> None:
    try:
        while True:
            chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
            if not chunk:
                return
            room = cap - len(sink)
            if room > 0:
                sink += chunk[:room]
    except (OSError, ValueError):
        return


class ShippedAdapter(AdapterBase):
    """Run an agent's own headless CLI per its profile; see the module docstring."""

    def __init__(
        self,
        profile: str | Path | Profile,
        *,
        use_netns: bool | None = None,
        bin_path: str | None = None,
        time_warp: float | None = None,
    ) -> None:
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.name = f"shipped:{self.profile.name}"
        self.use_netns = use_netns
        self._bin = bin_path  # tests point this at a fake agent
        # Run as it ships: a new conversation, unless its profile says how it resumes a saved
        # one (`history`); and only the config its profile maps.
        self.traits = AgentTraits(
            takes_history=bool(self.profile.history),
            config_ignored=frozenset(self.profile.config_ignored),
        )
        self.last_guard: dict[str, Any] = {}
        self.last_pgid: int | None = None
        self.outside_attempts: list[dict[str, Any]] = []  # every attempt of this adapter's lifetime
        self._lock = threading.Lock()
        # The fast clock: the speeds asked (this argument, else $CONFORMANCE_TIME_WARP, else the
        # profile's list; 1 is real time), tried in order by conformance.calibration, which
        # puts the adapter on one (use_warp). Until then it runs in real time.
        env_warp = os.environ.get("CONFORMANCE_TIME_WARP")
        if time_warp is None and env_warp:
            try:
                time_warp = float(env_warp)
            except ValueError:
                raise ProfileError(
                    f"CONFORMANCE_TIME_WARP={env_warp!r}: not a number (1 is real time)"
                ) from None
        asked = [time_warp] if time_warp is not None else list(self.profile.time_warp)
        if any(x < 1 for x in asked):
            raise ProfileError(f"{self.name}: a time warp must be at least 1, got {asked}")
        self._speeds = [x for x in asked if x > 1]
        self.clock: Clock | None = None  # set by warp_speeds once the preload can be had
        self.warp_note = "real time"
        self._calibrated = not self._speeds

    @property
    def fast_clock(self) -> FastClock | None:
        """This adapter, when its profile (or the caller) asks for a fast clock."""
        return self if self._speeds else None

    # --- the fast clock (conformance.adapters.warp, conformance.calibration) -------------------

    def warp_speeds(self) -> list[float]:
        """The speeds to calibrate, in order; [] when a warp cannot be honoured here
        (``warp_note`` says why)."""
        if not self._speeds:
            return []
        try:
            library = find_library()
            ok, why = preloadable(self.resolve_bin())
            if not ok:
                raise WarpRefused(why)
            shim = (
                build_shim(agent_cache_dir() / "warp") if self.profile.time_warp_raw_clock else None
            )
        except (WarpRefused, FileNotFoundError) as exc:
            self.warp_note = f"real time: a time warp is refused here: {exc}"
            self._calibrated = True
            return []
        self.clock = Clock(library, shim=shim)
        return list(self._speeds)

    def needs_calibration(self) -> bool:
        """Whether the clock is still to be calibrated."""
        return not self._calibrated

    def clock_identity(self) -> dict[str, Any] | None:
        """The profile, its package and the executable's file as installed (a reinstall is a
        new file), and the speeds asked and how: another of them calibrates anew."""
        try:
            binp = Path(self.resolve_bin()).resolve()
            stat = binp.stat()
        except OSError:  # not installed (FileNotFoundError) or unreadable: never kept
            return None
        return {
            "agent": self.name,
            "package": self.profile.npm,
            "bin": str(binp),
            "bin_file": [stat.st_size, stat.st_mtime_ns],
            "speeds": list(self._speeds),
            "raw_clock": bool(self.profile.time_warp_raw_clock),
        }

    def try_speed(self, speed: float | None) -> None:
        """Run the calibration at ``speed`` (None: calibration over)."""
        if self.clock is not None:
            self.clock.trial = speed

    def use_clock(
        self,
        speed: float | None,
        timing_speed: float | None,
        calibrations: dict[float, Any],
        note: str,
    ) -> None:
        """The calibration's word: the speeds to run at (None: real time), and why."""
        if self.clock is not None:
            self.clock.trial = None
            self.clock.speed, self.clock.timing_speed = speed, timing_speed
            self.clock.calibrations, self.clock.note = dict(calibrations), note
        self.warp_note = note
        self._calibrated = True

    def clock_info(self, time_scale: float = 1.0) -> dict[str, Any] | None:
        """What the results say of the clock of a run at ``time_scale`` (None: nothing asked)."""
        if not self._speeds:
            return None
        info: dict[str, Any] = {"note": self.warp_note}
        warp = self.clock.warp_for(time_scale) if self.clock else None
        cal = self.clock.calibrations.get(warp.speed) if self.clock and warp else None
        if cal is not None:
            info.update(cal.as_dict())
        return info

    def overhead(self, time_scale: float = 1.0) -> tuple[float, float]:
        """The calibrated overhead per wait and its spread at ``time_scale`` (real seconds; 0
        in real time). The spread widens the timing checks' slack by at most SPREAD_LIMIT_S of
        the agent's time: beyond that a wait is judged, and a failure confirmed on a rerun."""
        warp = self.clock.warp_for(time_scale) if self.clock else None
        cal = self.clock.calibrations.get(warp.speed) if self.clock and warp else None
        if cal is None or warp is None:
            return (0.0, 0.0)
        return (float(cal.overhead_s), min(float(cal.spread_s), SPREAD_LIMIT_S / warp.speed))

    def fixed_time_scale(self, timing: bool = False, confirm: bool = False) -> float | None:
        """An agent on a fast clock runs at 1/speed whatever the run asks (1.0: real time, for
        a scenario resting on timing when its timing on the fast clock is too loose); with
        ``confirm``, on the clock that confirms a failed timing verdict."""
        if self.clock is None:
            return None
        return self.clock.confirm_scale(timing) if confirm else self.clock.scale(timing)

    def capabilities(self) -> set[str]:
        caps = set(self.profile.capabilities) | set(self.profile.drive)
        caps |= set(self.profile.mcp.get("capabilities") or [])
        caps |= set(self.profile.history.get("capabilities") or [])
        if self.clock is not None:
            caps.add("time_scale")
        if self.profile.dialect != "openai_chat":
            # The runner serves a run in dialect D only to agents declaring dialect:D.
            caps.add(f"dialect:{self.profile.dialect}")
        return caps

    def resolve_bin(self) -> str:
        """The agent's installed executable; FileNotFoundError saying how to install it."""
        if self._bin:
            return self._bin
        path = self.profile.bin_path
        if not path.exists():
            raise FileNotFoundError(
                f"{self.name}: {self.profile.npm} is not installed at {path}; run "
                f"`python scripts/install_agents.py {self.profile.name}`"
            )
        return str(path)

    def _values(self, req: RunRequest, home: Path, config_home: Path, binp: str) -> dict[str, str]:
        config = req.start.get("config") or {}
        return {
            "prompt": str(req.start.get("prompt", "")),
            "base_url": req.base_url,
            "model": str(req.start.get("model", "conformance-model")),
            "api_key": req.api_key,
            "home": str(home),
            "config_home": str(config_home),
            "workdir": str(req.workdir),
            "install": str(self.profile.install_dir),
            "bin": binp,
            "ca_file": req.ca_file or "",
            # Agents that append /v1/... themselves (Claude Code) take the session root.
            "base_url_root": _strip_v1(req.base_url),
            "fallback_model": str(config.get("fallback_model") or ""),
            "context_window": str(config.get("context_window") or ""),
            # The tool time limit in milliseconds (nominal: on a fast clock the agent's own).
            "tool_timeout_ms": _ms(config.get("tool_timeout_s")),
            # The same in seconds, as a TOML/JSON float (Codex's MCP tool_timeout_sec).
            "tool_timeout_s": _seconds(config.get("tool_timeout_s")),
            "max_output_tokens": str(config.get("max_output_tokens") or ""),
            "tool_endpoint": str(req.start.get("tool_endpoint") or ""),
            "credential_url": str(req.start.get("credential_url") or ""),
            "mcp_endpoint": mcp_endpoint(req.start),
            "debug_dir": str(req.start.get("debug_dir") or ""),
            # The harness's own interpreter: a hook command the profile writes runs on it.
            "python": sys.executable,
            # A history resumed (_write_history): filled in for runs with one.
            "session_id": "",
            "workdir_key": "",
            "session_date": "",
            "session_time": "",
        }

    def _drives(self, req: RunRequest) -> dict[str, dict[str, Any]]:
        """The profile's drives this run uses: abort always, the others unless their ``when``
        names a config key the scenario leaves unset (null or false), or a value it does not
        have."""
        config = req.start.get("config") or {}
        return {
            cap: m
            for cap, m in self.profile.drive.items()
            if _applies(m.get("when"), config)
            # Its files go to the run's debug directory: none given, no debug dump.
            and (cap != "debug_dump" or req.start.get("debug_dir"))
        }

    def _carried(self, req: RunRequest) -> dict[str, dict[str, Any]]:
        """The profile's ``config_carried`` mappings of the config keys this run sets."""
        config = req.start.get("config") or {}
        return {k: m for k, m in self.profile.config_carried.items() if _applies(k, config)}

    def _write_files(
        self,
        values: dict[str, str],
        roots: dict[str, Path],
        specs: list[dict[str, Any]],
        written: set[Path],
    ) -> None:
        for spec in specs:
            target = self._target(spec, values, roots, "file")
            written.add(target)
            if "json" in spec:
                target.write_text(json.dumps(render(spec["json"], values), indent=2), "utf-8")
            elif "text" in spec:
                target.write_text(render(spec["text"], values), "utf-8")
            else:
                target.symlink_to(render(spec["link"], values))

    def _target(
        self, spec: dict[str, Any], values: dict[str, str], roots: dict[str, Path], what: str
    ) -> Path:
        """Where a profile's ``root`` + ``path`` lands in this run, its folder made; ValueError
        for a path that leaves its root."""
        root = roots[spec["root"]]
        target = (root / str(render(spec["path"], values))).resolve()
        if not target.is_relative_to(root.resolve()):
            raise ValueError(f"{self.profile.source}: {what} {spec['path']!r} leaves its root")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _write_history(
        self, req: RunRequest, values: dict[str, str], roots: dict[str, Path], written: set[Path]
    ) -> dict[str, Any]:
        """Write the scenario's history where the profile's ``history`` says, in its format,
        under a new session id (``values`` gain ``session_id``, ``workdir_key``, and when it
        was saved: ``session_date``, ``session_time``); what the hello says of it. Untellable:
        the format cannot carry it whole."""
        spec = self.profile.history
        write, key_of = FORMATS[spec["format"]]
        # The directory the agent runs in, as it reads its own working directory.
        cwd = str(req.workdir.resolve())
        now = datetime.now(UTC)
        values["session_id"] = str(uuid.uuid4())
        values["workdir_key"] = key_of(cwd)
        values["session_date"] = now.strftime("%Y/%m/%d")
        values["session_time"] = now.strftime("%Y-%m-%dT%H-%M-%S")
        transcript = write(
            list(req.start["history"]),
            values["session_id"],
            cwd,
            values["model"],
            self.profile.version,
            now,
        )
        target = self._target(spec, values, roots, "history path")
        target.write_text(transcript.text, "utf-8")
        written.add(target)
        where = render(spec["path"], values)
        return {
            "format": spec["format"],
            "messages": transcript.messages,
            "how": f"{_how(spec, values)}; the transcript written to {where} under {spec['root']}",
        }

    def run(self, req: RunRequest) -> RunOutcome:
        with self._lock:
            self.last_guard = {}
        outcome = self._start(req)
        if outcome.outside_attempts is None:
            outcome.outside_attempts = []  # the agent was not started: nothing tried to leave
        return outcome

    def _start(self, req: RunRequest) -> RunOutcome:
        key = req.api_key
        hello: dict[str, Any] = {
            "type": "hello",
            "agent": self.profile.package,
            "version": self.profile.version,
            "capabilities": sorted(self.capabilities()),
            "t_ns": time.monotonic_ns(),
        }
        scale = float(req.start.get("time_scale") or 1.0)
        warp = self.clock.warp_for(scale) if self.clock else None
        if warp is not None:
            hello["time_warp"] = warp.speed
        events: list[dict[str, Any]] = [hello]
        asked = str(req.start.get("dialect") or "openai_chat")
        if asked != self.profile.dialect:
            # The agent speaks one wire API whatever we ask: judging it as another would mislead.
            return RunOutcome(
                "unsupported",
                events,
                hello,
                "",
                f"{self.name} speaks {self.profile.dialect} only; this run asks for {asked} "
                f"(run it with --dialect {self.profile.dialect})",
            )
        try:
            binp = self.resolve_bin()
        except FileNotFoundError as exc:
            return RunOutcome("error", events, hello, "", str(exc))
        with tempfile.TemporaryDirectory(prefix="shipped-home-") as tmp:
            home = Path(tmp) / "home"
            config_home = home / ".config"
            config_home.mkdir(parents=True)
            values = self._values(req, home, config_home, binp)
            drives = self._drives(req)
            carried = self._carried(req)
            # The MCP tool host, for a scenario that offers tools (the others have none to call).
            mcp = self.profile.mcp if req.start.get("tools") else {}
            files = list(self.profile.files) + list(mcp.get("files") or [])
            for m in (*drives.values(), *carried.values()):
                files.extend(m.get("files") or [])
            roots = {"home": home, "config_home": config_home, "workdir": req.workdir}
            history = self.profile.history if req.start.get("history") else {}
            written: set[Path] = set()  # the harness's files: never collected as the agent's
            try:
                if history:
                    hello["history"] = self._write_history(req, values, roots, written)
                self._write_files(values, roots, files, written)
            except Untellable as exc:
                # Told in part, the history would be judged as if the agent had had all of it.
                why = f"{self.name} cannot be given this history: {exc}"
                return RunOutcome("unsupported", events, hello, "", why)
            except (OSError, ValueError) as exc:
                return RunOutcome("error", events, hello, "", redact(str(exc), key))
            env = _base_env(home, Path(tmp), req.ca_file)
            env.update(render(self.profile.env, values))
            argv = render(self.profile.command, values)
            env.update(render(mcp.get("env") or {}, values))
            argv.extend(render(mcp.get("args") or [], values))
            env.update(render(history.get("env") or {}, values))
            argv.extend(render(history.get("args") or [], values))
            for m in (*drives.values(), *carried.values()):
                env.update(render(m.get("env") or {}, values))
                argv.extend(render(m.get("args") or [], values))
            if warp is not None:
                env.update(warp_env(warp))
            # The abort is recorded once it is sent (_run); the others are in the run from its start.
            hello["driven"] = {cap: _how(m, values) for cap, m in drives.items() if cap != "abort"}
            if carried:
                hello["config_carried"] = {k: _how(m, values) for k, m in carried.items()}
            if mcp:
                hello["mcp"] = {"endpoint": values["mcp_endpoint"], "how": _how(mcp, values)}
            outcome = self._run(req, argv, env, events, hello, warp)
            dump = drives.get("debug_dump")
            if dump is not None:
                _collect(dump, roots, Path(values["debug_dir"]), written)
                outcome.debug_format = dump.get("format")
            return outcome

    def _run(
        self,
        req: RunRequest,
        argv: list[str],
        env: dict[str, str],
        events: list[dict[str, Any]],
        hello: dict[str, Any],
        warp: Warp | None = None,
    ) -> RunOutcome:
        key = req.api_key
        port = _port_of(req.base_url)
        guard = LoopbackGuard(use_netns=self.use_netns, forward_ports=(port,) if port else ())
        out, err = bytearray(), bytearray()
        began = time.monotonic()
        try:
            set_clock = req.agent_clock if warp is not None else None
            speed = warp.speed if warp is not None else 1.0
            if set_clock is not None:
                set_clock(time.time(), speed)  # a first estimate, refined below
            try:
                gp = _spawn(guard, argv, env, req)
            except (OSError, RuntimeError) as exc:
                return RunOutcome(
                    "error", events, hello, "", redact(f"cannot start {argv[0]!r}: {exc}", key)
                )
            if set_clock is not None:
                # The agent's fast clock starts when its process loads libfaketime, just after
                # the exec _spawn returns on. Before that lie the guard's namespace set-up and
                # the fork (27-34 ms measured, a test run beside): counted from the first
                # estimate, the gateway's HTTP-dates would be (speed - 1) times that ahead of
                # the agent's clock: over half a second at x20, more on a loaded machine.
                set_clock(time.time(), speed)
            proc = gp.proc
            self.last_pgid = proc.pid
            readers = _start_readers(proc, out, err)
            try:
                rc, limit = self._wait_driven(proc, req, warp, hello, began)
            finally:
                # Also on Ctrl-C / SIGTERM: no agent (nor its children) outlives the run.
                kill_group(proc)
            elapsed = time.monotonic() - began
            for t in readers:
                t.join(2)
            stdout = out.decode("utf-8", errors="replace")
            status, error = self._read_output(rc, limit, stdout, err, events)
            attempts = guard.attempts()
            guard_info = {"netns": gp.netns, "note": gp.netns_note}
        finally:
            guard.close()
        with self._lock:
            self.last_guard = guard_info
            self.outside_attempts.extend(attempts)
        log = (
            f"[shipped] {self.name} {self.profile.version}; "
            f"{f'time warp x{warp.speed:g}' if warp else 'real time'}; "
            f"guard: {guard_info['note']}; "
            f"exit {rc if rc is not None else 'killed'} after {elapsed:.1f} s\n"
            f"[shipped] outside attempts: {json.dumps(attempts)}\n"
            "--- stdout ---\n"
            + stdout[:_MAX_LOG]
            + "\n--- stderr ---\n"
            + err.decode("utf-8", errors="replace")
        )
        return RunOutcome(
            status=as_status(status),
            events=events,
            hello=hello,
            log=log,
            error=redact(error, key) if error else None,
            outside_attempts=attempts,
        )

    def _wait_driven(
        self,
        proc: subprocess.Popen[bytes],
        req: RunRequest,
        warp: Warp | None,
        hello: dict[str, Any],
        began: float,
    ) -> tuple[int | None, float]:
        """Wait for the agent's exit (None: the deadline passed first) under the run's limit,
        which is also returned; the scenario's abort is sent as the profile's signal, and
        recorded in the hello's ``driven`` once sent."""
        # The profile's floor is in the agent's seconds: on a fast clock, fewer real ones;
        # but its start and its own work are not sped up: they get real seconds.
        floor = self.profile.min_deadline_s / (warp.speed if warp else 1.0)
        limit = max(req.deadline_s, floor) + (WARP_ALLOWANCE_S if warp else 0.0)
        abort = (self.profile.drive.get("abort") or {}).get("signal")
        sent: list[float] = []
        rc = _wait(proc, req, limit, getattr(signal, abort) if abort else None, sent)
        if sent:
            hello.setdefault("driven", {})["abort"] = (
                f"{abort} sent to the agent's process group when the abort fired, "
                f"{sent[0] - began:.2f} s into the run"
            )
        return rc, limit

    def _read_output(
        self,
        rc: int | None,
        limit: float,
        stdout: str,
        err: bytearray,
        events: list[dict[str, Any]],
    ) -> tuple[str, str | None]:
        """Append the events the agent's output maps to (and its ``turn_end``, when it exited)
        to ``events``; the run's status and error."""
        if rc is None:
            # What it printed before the kill stays in the results (no turn_end: it never
            # ended its turn).
            try:
                for e in parse_output(self.profile.output, stdout):
                    e["t_ns"] = time.monotonic_ns()
                    events.append(e)
            except ValueError:
                pass
            return "timeout", f"the agent did not exit within {limit:g} s (process group killed)"
        parsed = parse_output(self.profile.output, stdout)
        for e in parsed:
            e["t_ns"] = time.monotonic_ns()
        events.extend(parsed)
        if rc != 0:
            if not any(e["type"] == "error" for e in parsed):
                tail = err.decode("utf-8", errors="replace").strip().splitlines()[-3:]
                ev = error_event(" | ".join(tail) or f"exit status {rc}")
                ev["t_ns"] = time.monotonic_ns()
                events.append(ev)
            events.append({"type": "turn_end", "reason": "error", "t_ns": time.monotonic_ns()})
        else:
            events.append({"type": "turn_end", "reason": "completed", "t_ns": time.monotonic_ns()})
        return "ran", None


def _collect(
    dump: dict[str, Any], roots: dict[str, Path], debug_dir: Path, written: set[Path]
) -> None:
    """Copy, byte for byte, the files the agent wrote that the debug dump's ``collect`` globs
    match into ``debug_dir`` (at their path under their root), before its HOME is deleted.
    Never a file the harness wrote (``written``), a link, or a file outside its root."""
    for spec in dump.get("collect") or []:
        root = roots[spec["root"]].resolve()
        for path in sorted(roots[spec["root"]].glob(spec["glob"])):
            if path.is_symlink() or not path.is_file() or path.resolve() in written:
                continue
            if not path.resolve().is_relative_to(root):
                continue
            target = debug_dir / path.resolve().relative_to(root)
            with contextlib.suppress(OSError):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())


def _base_env(home: Path, tmp: Path, ca_file: str | None) -> dict[str, str]:
    """The agent's environment before the profile's: a few inherited variables, the fresh
    ``HOME`` and its XDG folders, and the gateway's CA for TLS scenarios."""
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        TMPDIR=str(tmp),
    )
    if ca_file:
        env.update(SSL_CERT_FILE=ca_file, NODE_EXTRA_CA_CERTS=ca_file)
    return env


def _spawn(
    guard: LoopbackGuard, argv: list[str], env: dict[str, str], req: RunRequest
) -> GuardedProcess:
    """Start the agent under ``guard`` in its own session (process group), output piped."""
    return guard.popen(
        argv,
        env=env,
        cwd=str(req.workdir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _start_readers(
    proc: subprocess.Popen[bytes], out: bytearray, err: bytearray
) -> list[threading.Thread]:
    """Threads draining the agent's stdout into ``out`` and its stderr into ``err`` (capped)."""
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out, 10 * _MAX_LOG), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err, _MAX_LOG), daemon=True),
    ]
    for t in readers:
        t.start()
    return readers


def mcp_endpoint(start: dict[str, Any]) -> str:
    """The session's MCP tool host: the start's ``mcp_endpoint``, else the gateway's sibling of
    its tool endpoint (``.../s/<sid>/tools`` → ``.../s/<sid>/mcp``, fakes.server); "" without."""
    given = start.get("mcp_endpoint")
    if given:
        return str(given)
    tools = str(start.get("tool_endpoint") or "").rstrip("/")
    if not tools.endswith("/tools"):
        return ""
    return tools[: -len("/tools")] + "/mcp"


def _strip_v1(base_url: str) -> str:
    """The base URL without its trailing ``/v1`` (the gateway session's root)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _port_of(base_url: str) -> int | None:
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.hostname not in ("127.0.0.1", "localhost"):
        return None
    return parts.port or (443 if parts.scheme == "https" else 80)


def _ms(seconds: object) -> str:
    """Seconds as whole milliseconds ("" for none)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        return ""
    return str(round(seconds * 1000))


def _seconds(seconds: object) -> str:
    """Seconds as a float literal, "10.0" ("" for none)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        return ""
    return repr(float(seconds))


def _applies(when: str | dict[str, Any] | None, config: dict[str, Any]) -> bool:
    """Whether a drive's ``when`` holds for the run's config (absent: always)."""
    if not when:
        return True
    if isinstance(when, dict):
        ((key, value),) = when.items()
        return key in config and config[key] == value
    return config.get(when) not in (None, False)


def _how(mapping: dict[str, Any], values: dict[str, str]) -> str:
    """How a drive drove its capability, for the hello and the results (the run's secret is
    redacted from events by the runner)."""
    if mapping.get("note"):
        return str(mapping["note"])
    parts = []
    if mapping.get("args"):
        parts.append("arguments " + " ".join(render(mapping["args"], values)))
    if mapping.get("env"):
        parts.append("environment " + ", ".join(sorted(mapping["env"])))
    if mapping.get("files"):
        parts.append("files " + ", ".join(f["path"] for f in mapping["files"]))
    return "; ".join(parts)


def _wait(
    proc: subprocess.Popen[bytes],
    req: RunRequest,
    limit: float | None = None,
    abort_signal: int | None = None,
    sent: list[float] | None = None,
) -> int | None:
    """The exit status, or None once the run's wall-clock deadline has passed. With
    ``abort_signal``, the scenario's abort sends it to the agent's process group (once), as a
    terminal's Ctrl-C does (its time is appended to ``sent``); the agent then ends its turn in its
    own time, within the deadline."""
    deadline = time.monotonic() + (req.deadline_s if limit is None else limit)
    aborted = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if abort_signal is not None and not aborted and req.abort.is_set():
            aborted = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, abort_signal)
                if sent is not None:
                    sent.append(time.monotonic())
        try:
            return proc.wait(timeout=min(0.05, remaining))
        except subprocess.TimeoutExpired:
            continue
