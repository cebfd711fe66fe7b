"""Shipped agents on a fast clock: the preload check, the calibration's rules, and a real
dynamically linked program (a Node script) run under libfaketime through the shipped adapter,
its waits scaled and judged."""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance.adapters.shipped import ShippedAdapter
from conformance.adapters.warp import (
    Clock,
    Warp,
    WarpRefused,
    _elf_has_interpreter,
    find_library,
    preloadable,
    warp_env,
)
from conformance.calibration import ASKED_S, SPREAD_LIMIT_S, WARMUP_S, choose_clock, judge
from conformance.runner import RunConfig, run_checked
from fakes import SyncGateway, load_scenario
from scenarios import SCENARIO_DIR

RTY = SCENARIO_DIR / "criteria" / "rty"


def _elf(program_headers: list[int], bits: int = 64) -> bytes:
    """A minimal ELF image with program headers of the given types."""
    if bits == 64:
        head = bytearray(64)
        head[:6] = b"\x7fELF\x02\x01"
        struct.pack_into("<Q", head, 32, 64)  # e_phoff
        struct.pack_into("<HH", head, 54, 56, len(program_headers))
        table = b"".join(struct.pack("<I", t) + bytes(52) for t in program_headers)
    else:
        head = bytearray(52)
        head[:6] = b"\x7fELF\x01\x01"
        struct.pack_into("<I", head, 28, 52)
        struct.pack_into("<HH", head, 42, 32, len(program_headers))
        table = b"".join(struct.pack("<I", t) + bytes(28) for t in program_headers)
    return bytes(head) + table


def test_a_dynamic_elf_names_its_loader_and_a_static_one_does_not() -> None:
    assert _elf_has_interpreter(_elf([6, 3, 1])) is True  # PHDR, INTERP, LOAD
    assert _elf_has_interpreter(_elf([1, 1])) is False
    assert _elf_has_interpreter(_elf([3], bits=32)) is True
    assert _elf_has_interpreter(b"#!/bin/sh\n") is None


def test_preloadable_follows_a_script_to_its_interpreter(tmp_path: Path) -> None:
    static = tmp_path / "static-agent"
    static.write_bytes(_elf([1]))
    static.chmod(0o755)
    ok, why = preloadable(str(static))
    assert not ok and "statically linked" in why
    script = tmp_path / "agent"
    script.write_text("#!/usr/bin/env static-agent\n")
    ok, why = preloadable(str(script), env_path=str(tmp_path))
    assert not ok and "statically linked" in why, why
    ok, why = preloadable(sys.executable)
    assert ok, why
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert preloadable(str(text)) == (False, f"{text} is neither an ELF executable nor a #! script")


def test_a_missing_library_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONFORMANCE_FAKETIME_LIB", str(tmp_path / "nope.so"))
    with pytest.raises(WarpRefused, match="nope.so"):
        find_library()


def test_the_environment_puts_the_process_on_the_fast_clock() -> None:
    env = warp_env(Warp(20, "/lib/libfaketimeMT.so.1"))
    assert env == {
        "LD_PRELOAD": "/lib/libfaketimeMT.so.1",
        "FAKETIME": "+0 x20",
        "BUN_FEATURE_FLAG_DISABLE_EPOLL_PWAIT2": "1",
    }
    clock = Clock("/lib/x.so", speed=20, timing_speed=None)
    assert clock.scale(timing=False) == pytest.approx(0.05)
    assert clock.scale(timing=True) == 1.0  # timing too loose at any speed: real time
    assert clock.warp_for(0.05) == Warp(20, "/lib/x.so")
    assert clock.warp_for(1.0) is None


@pytest.mark.parametrize(
    ("overheads_ms", "accepted", "timing_ok", "why"),
    [
        ([20, 22, 21, 20], True, True, "accepted"),
        ([20, 90, 21, 20], True, False, "not fit for timing"),
        ([20, 20 - 100, 20, 20 - 100], False, False, "effective speed"),  # 4 s waits too short
    ],
)
def test_the_calibration_judges_speed_and_spread(overheads_ms, accepted, timing_ok, why) -> None:
    speed = 10.0
    waits = [a / speed + o / 1000 for a, o in zip(ASKED_S, overheads_ms, strict=True)]
    cal = judge(speed, waits)
    assert (cal.accepted, cal.timing_ok) == (accepted, timing_ok), cal
    assert why in cal.reason
    if accepted:
        # An uneven overhead blurs the speed as well; an even one leaves it exact.
        assert cal.effective_speed == pytest.approx(speed, rel=0.05 if timing_ok else 0.25)
        assert cal.overhead_s == pytest.approx(sum(overheads_ms) / 4000)
        assert (cal.spread_s * speed <= SPREAD_LIMIT_S) == timing_ok


def test_the_calibration_measures_against_the_delays_the_agent_announced() -> None:
    # An agent that waits max(Retry-After, its own backoff) plus jitter (Claude Code) does so
    # on its fast clock: against Retry-After its waits look uneven, against what it printed
    # the real overhead is small and even.
    speed = 10.0
    announced = [1.08, 4.505, 2.48, 4.74]
    waits = [a / speed + 0.010 for a in announced]
    against_asked = judge(speed, waits)
    assert not against_asked.timing_ok  # 2.48 s where 1 s was asked looks like overhead
    cal = judge(speed, waits, announced)
    assert cal.accepted and cal.timing_ok, cal
    assert cal.overhead_s == pytest.approx(0.010)
    assert cal.spread_s == pytest.approx(0.0, abs=1e-9)
    assert cal.effective_speed == pytest.approx(speed)
    assert cal.as_dict()["announced_ms"] == [1080.0, 4505.0, 2480.0, 4740.0]
    # A count that does not match the waits is not used: back to Retry-After.
    assert judge(speed, waits, announced[:3]).asked_s == []


def test_announced_delays_are_read_from_retry_events() -> None:
    from conformance.calibration import _announced

    events = [
        {"type": "retry", "delay_s": 1.5},
        {"type": "message"},
        {"type": "retry", "delay_s": 4},
    ]
    assert _announced({"events": events}) == [1.5, 4.0]
    assert _announced({"events": [{"type": "retry", "delay_s": None}]}) is None
    assert _announced({"events": []}) is None


def test_a_calibration_without_its_retries_is_refused() -> None:
    cal = judge(10.0, [0.1, 0.4])
    assert not cal.accepted and "2 waits measured, 5 expected" in cal.reason


def test_the_first_retrys_one_off_work_blurs_the_spread_not_the_speed() -> None:
    # opencode under four processes calibrating at once: its first retry 1.4 s late, the next
    # four 20-30 ms. Counted in the speed, it would read as a clock running 3 times too fast.
    speed = 20.0
    late = [0.02, 0.03, 0.02, 0.03]
    first = WARMUP_S / speed + 1.4
    rest = [a / speed + o for a, o in zip(ASKED_S, late, strict=True)]
    cal = judge(speed, [first, *rest])
    assert cal.accepted and not cal.timing_ok, cal
    assert cal.effective_speed == pytest.approx(speed, rel=0.25)
    assert cal.spread_s == pytest.approx(1.4 - 0.02)  # the judging slack still knows of it
    assert not judge(speed, [first, *rest[1:]]).accepted  # as the first of four: refused


class _FakeClock:
    """Just what choose_clock() asks of an adapter and its fast clock."""

    def __init__(self, speeds: list[float]) -> None:
        self.speeds: list[float] = speeds
        self.used: float | None = None

    @property
    def fast_clock(self) -> _FakeClock:
        return self

    def warp_speeds(self) -> list[float]:
        return self.speeds

    def try_speed(self, speed: float | None) -> None:
        pass

    def use_clock(
        self, speed: float | None, timing: float | None, cals: dict[float, Any], note: str
    ) -> None:
        self.used = speed


def test_a_speed_refused_once_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import conformance.calibration as calibration

    good = [a / 10 + 0.02 for a in (WARMUP_S, *ASKED_S)]
    bad = [WARMUP_S / 10 + 0.02, 0.1 + 0.3, 0.4, 0.1, 0.4]  # a 1 s wait 300 ms late
    runs = iter([bad, good])
    monkeypatch.setattr(calibration, "_measure", lambda *a: judge(10.0, next(runs)))
    clock = _FakeClock([10.0])
    choice = choose_clock(None, clock, "openai_chat")  # type: ignore[arg-type]
    assert choice is not None and list(choice.accepted) == [10.0] and clock.used == 10.0


# -- a real dynamically linked program under libfaketime ---------------------------------------

NODE_AGENT = r"""#!/usr/bin/env node
// A fake shipped agent: chat completions, honouring Retry-After in seconds or as an HTTP-date,
// waiting with setTimeout (which libfaketime speeds up) and reading dates with Date.now.
const base = process.env.FAKE_BASE_URL, key = process.env.FAKE_API_KEY;
async function main() {
  for (let i = 0; i < 12; i++) {
    const r = await fetch(base + "/chat/completions", {
      method: "POST",
      headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json"},
      body: JSON.stringify({model: "m", stream: false,
                            messages: [{role: "user", content: process.argv.at(-1)}]}),
    });
    if (r.status === 429) {
      const ra = r.headers.get("retry-after") || "1";
      const ms = /^\d+$/.test(ra) ? Number(ra) * 1000 : Date.parse(ra) - Date.now();
      await r.text();
      await new Promise((done) => setTimeout(done, Math.max(0, ms)));
      continue;
    }
    console.log((await r.json()).choices[0].message.content);
    return;
  }
  process.exit(1);
}
main();
"""

NODE_PROFILE = """\
name: node-fake
description: a Node fake shipped agent
install:
  npm: "node-fake@1.0.0"
  bin: node-fake
command: ["{bin}", "{prompt}"]
env:
  FAKE_BASE_URL: "{base_url}"
  FAKE_API_KEY: "{api_key}"
capabilities: []
output: text
time_warp: [10]
"""


def _warp_ready() -> str | None:
    if shutil.which("node") is None:
        return "needs node"
    try:
        find_library()
    except WarpRefused as exc:
        return str(exc)
    return None


needs_warp = pytest.mark.skipif(_warp_ready() is not None, reason=str(_warp_ready()))


@pytest.fixture
def node_agent(tmp_path: Path) -> ShippedAdapter:
    return node_agent_at(tmp_path)


def node_agent_at(tmp_path: Path) -> ShippedAdapter:
    """The Node fake shipped agent, its script and profile written in ``tmp_path``."""
    script = tmp_path / "node-fake"
    script.write_text(NODE_AGENT)
    script.chmod(0o755)
    profile = tmp_path / "node-fake.yaml"
    profile.write_text(NODE_PROFILE)
    return ShippedAdapter(profile, bin_path=str(script), use_netns=False)


@needs_warp
def test_a_node_agent_runs_on_the_fast_clock_and_its_waits_are_judged(
    gateway: SyncGateway, node_agent: ShippedAdapter
) -> None:
    choice = choose_clock(gateway, node_agent, "openai_chat")
    assert choice is not None
    accepted = choice.accepted
    cal = accepted.get(10.0)
    assert cal is not None, node_agent.warp_note
    # Its clock ran about ten times as fast: 4 s and 1 s asked, about 0.3 s apart on the wire.
    assert cal.effective_speed == pytest.approx(10, rel=0.25)
    # Judge its timing on the fast clock whatever the spread on this machine was.
    node_agent.use_clock(10.0, 10.0, accepted, node_agent.warp_note)
    for name, criterion in (
        ("rty-01-retry-after-seconds", "RTY-01"),
        ("rty-02-retry-after-http-date", "RTY-02"),
    ):
        # As a run judges it: a failed timing verdict stands only when its confirmation
        # reproduces it (a loaded machine can make one wait late once).
        entry, verdicts = run_checked(
            gateway, node_agent, load_scenario(RTY / f"{name}.yaml"), RunConfig()
        )
        assert entry["journal"]["time_scale"] == pytest.approx(0.1)
        assert entry["clock"]["time_warp"] == 10.0
        assert verdicts[criterion]["verdict"] == "PASS", verdicts[criterion]
        chat = [e for e in entry["journal"]["entries"] if e["kind"] == "chat"]
        # The gateway wrote its HTTP-dates in the agent's clock, and says when that was.
        first = chat[0]["response"]
        assert first["t_agent_wall_headers"] > first["t_wall_headers"]
        real_s = (chat[1]["t_arrival_ns"] - chat[0]["response"]["t_end_ns"]) / 1e9
        # A 2 s (RTY-01) or about 3 s (RTY-02) wait took a tenth of that in real time.
        assert real_s < 1.0, real_s


@needs_warp
def test_without_the_warp_the_same_agent_runs_in_real_time(
    gateway: SyncGateway, node_agent: ShippedAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFORMANCE_FAKETIME_LIB", "/nonexistent/libfaketimeMT.so.1")
    choice = choose_clock(gateway, node_agent, "openai_chat")
    assert choice is not None and choice.accepted == {}
    assert "refused" in node_agent.warp_note and "/nonexistent" in node_agent.warp_note
    assert node_agent.fixed_time_scale(False) is None
    assert "time_scale" not in node_agent.capabilities()


# -- the raw-clock shim: a program whose clock reads and sleeps are raw system calls ------------

RAW_CLOCK_PROGRAM = r"""
#include <errno.h>
#include <stdio.h>
#include <time.h>
/* As Bun's Zig code does: CLOCK_MONOTONIC read and a sleep made by inline syscalls (out of
   libc's, so of libfaketime's, reach), and a wait in epoll_pwait2. */
static long raw(long nr, long a, long b, long c, long d) {
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}
static double now(void) {
    struct timespec t;
    long r;
    __asm__ volatile("mov $228, %%eax\n\tsyscall" : "=a"(r) : "D"(1L), "S"(&t)
                     : "rcx", "r11", "memory");
    return t.tv_sec + t.tv_nsec / 1e9;
}
static void nap(long s) {
    struct timespec t = {s, 0};
    long r;
    register long r10 __asm__("r10") = 0;
    __asm__ volatile("mov $230, %%eax\n\tsyscall" : "=a"(r) : "D"(1L), "S"(0L), "d"(&t),
                     "r"(r10) : "rcx", "r11", "memory");
}
int main(void) {
    double t0 = now();
    nap(4);
    printf("%.3f %ld\n", now() - t0, -raw(441, -1, 0, 0, 0)); /* epoll_pwait2 on no fd */
    return 0;
}
"""


def _shim_ready() -> str | None:
    import platform

    if platform.machine() != "x86_64":
        return "the raw-clock shim is x86_64 only"
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "needs a C compiler"
    try:
        find_library()
    except WarpRefused as exc:
        return str(exc)
    return None


needs_shim = pytest.mark.skipif(_shim_ready() is not None, reason=str(_shim_ready()))


@needs_shim
def test_the_raw_clock_shim_puts_raw_system_calls_on_the_fast_clock(tmp_path: Path) -> None:
    import os
    import subprocess
    import time

    from conformance.adapters.warp import build_shim

    shim = build_shim(tmp_path / "cache")
    assert build_shim(tmp_path / "cache") == shim  # built once per source
    assert "warp_shim" in Path(shim).name
    src = tmp_path / "raw.c"
    src.write_text(RAW_CLOCK_PROGRAM)
    program = tmp_path / "raw"
    compiler = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([str(compiler), "-O1", "-o", str(program), str(src)], check=True)
    env = {**os.environ, **warp_env(Warp(50, find_library(), shim))}
    began = time.monotonic()
    out = subprocess.run([str(program)], env=env, capture_output=True, text=True, timeout=60)
    real_s = time.monotonic() - began
    assert out.returncode == 0, out.stderr
    elapsed, epoll_errno = out.stdout.split()
    # 4 s of its clock passed on its raw clock, in a fraction of that (0.08 s nominal at x50);
    # its epoll_pwait2 was refused, so a Bun loop falls back to the wait libfaketime scales.
    assert float(elapsed) >= 4.0
    assert real_s < 3.0, real_s
    assert int(epoll_errno) == 38  # ENOSYS
    # A program without raw clock calls is left alone (a child such as bash or git).
    assert subprocess.run(["true"], env=env, timeout=30).returncode == 0


def test_a_shim_that_cannot_be_built_refuses_the_warp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance.adapters import warp

    monkeypatch.setattr(warp.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(warp.shutil, "which", lambda name: None)
    with pytest.raises(WarpRefused, match="needs a C compiler"):
        warp.build_shim(tmp_path)
    monkeypatch.setattr(warp.platform, "machine", lambda: "aarch64")
    with pytest.raises(WarpRefused, match="x86_64 only"):
        warp.build_shim(tmp_path)


def test_a_failed_timing_verdict_is_confirmed_on_the_slowest_clock_calibrated() -> None:
    fit, loose = judge(5.0, [0.2, 0.8, 0.2, 0.8]), judge(20.0, [0.05, 0.2, 0.05, 0.2])
    assert fit.timing_ok and loose.timing_ok
    clock = Clock("/lib/x.so", speed=20, timing_speed=20, calibrations={20.0: loose, 5.0: fit})
    assert clock.confirm_scale(timing=True) == pytest.approx(0.2)  # x5
    on_slowest = Clock("/lib/x.so", speed=20, timing_speed=5, calibrations={20.0: loose, 5.0: fit})
    # Nothing slower: the same clock again (a failure stands when it reproduces).
    assert on_slowest.confirm_scale(timing=True) == pytest.approx(0.2)
    assert Clock("/lib/x.so").confirm_scale(timing=True) == 1.0  # in real time: real time


def test_the_spread_widens_the_slack_by_no_more_than_the_limit(tmp_path: Path) -> None:
    adapter = ShippedAdapter("qwen-code", bin_path="/bin/true", use_netns=False, time_warp=5)
    steady, loose = judge(5.0, [0.21, 0.81, 0.21, 0.81]), judge(5.0, [0.2, 1.0, 0.2, 0.8])
    adapter.clock = Clock("/lib/x.so")
    adapter.use_clock(5.0, 5.0, {5.0: steady}, "n")
    assert adapter.overhead(0.2)[1] == pytest.approx(steady.spread_s)
    adapter.use_clock(5.0, 5.0, {5.0: loose}, "n")
    assert loose.spread_s * 5 > SPREAD_LIMIT_S
    assert adapter.overhead(0.2)[1] == pytest.approx(SPREAD_LIMIT_S / 5)
    assert adapter.overhead(1.0) == (0.0, 0.0)


def test_the_shim_follows_the_library_in_the_preload() -> None:
    env = warp_env(Warp(20, "/lib/libfaketimeMT.so.1", "/c/warp_shim-1.so"))
    assert env["LD_PRELOAD"] == "/lib/libfaketimeMT.so.1:/c/warp_shim-1.so"
    clock = Clock("/lib/x.so", speed=20, shim="/c/warp_shim-1.so")
    assert clock.warp_for(0.05) == Warp(20, "/lib/x.so", "/c/warp_shim-1.so")
