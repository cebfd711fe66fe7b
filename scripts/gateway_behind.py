"""What the real-gateway probes (``probe_litellm.py``, ``probe_portkey.py``) share: a free
loopback port, waiting for the gateway process to answer, the upstream personalities the fake
gateway serves behind it, probing one upstream through it, replaying the recording on the fake
gateway and comparing bytes, and scrubbing secrets from the gateway's log.
"""

from __future__ import annotations

import argparse
import copy
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance import probe  # noqa: E402
from fakes import Scenario, load_scenario  # noqa: E402

MASK = "[REDACTED]"

# Upstream personalities (scenarios/gateways/), each with how its long reasoning stream dies
# when it does: ``reset`` (RST) or ``close`` (clean close without the last chunk of the body).
UPSTREAMS: dict[str, tuple[str, str | None]] = {
    "well-behaved": ("well-behaved", None),
    "never-finish-reason": ("never-finish-reason", None),
    "drops-retry-after": ("drops-retry-after", None),
    "no-done": ("no-done", None),
    "dies-reset": ("litellm-upstream", "reset"),
    "dies-close": ("litellm-upstream", "close"),
    "dies-in-band": ("in-band-error", None),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, who: str, timeout: float = 180.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"{who}: the gateway exited early with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)  # a real process starting: polling is the only way to know
    raise SystemExit(f"{who}: the gateway did not answer {url} within {timeout:.0f}s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def upstream(name: str, mode: str | None) -> Scenario:
    sc = load_scenario(ROOT / "scenarios" / "gateways" / f"{name}.yaml")
    if mode is None:
        return sc
    raw = copy.deepcopy(sc.raw)
    for step in raw["script"]:
        if "cut" in (step.get("fault") or {}):
            step["fault"]["cut"]["mode"] = mode
    return Scenario.from_dict(raw)


def probe_one(
    gw: Any, session: Any, argv: list[str], key: str, out: Path, rec: Path
) -> dict[str, Any]:
    """Probe through the gateway (``argv``: the probe's options), replay the recording on the
    fake gateway and compare bytes, keep the upstream's journal; return the summary entry."""
    args: argparse.Namespace = probe.parser().parse_args(
        [*argv, "--out", str(out), "--record", str(rec), "--rate", "5", "--timeout", "30"]
    )
    rc, seen = probe.execute(args, key)
    doc = json.loads((out / "probe.json").read_text("utf-8"))
    entry: dict[str, Any] = {
        "exit": rc,
        "verdicts": {o["id"]: o["verdict"] for o in doc["observations"]},
    }
    if rec.exists():
        # Replay the recording on the fake gateway: the same bytes must come back.
        replay = gw.create_session(load_scenario(rec))
        again = {
            x.name: x
            for x in probe.Probe(replay.base_url, "m", rate=1000, dialect=args.dialect).run()
        }
        compared = [x for x in seen if x.name != "bad-request"]
        differ = [x.name for x in compared if again[x.name].body != x.body]
        entry["replayed_byte_for_byte"] = f"{len(compared) - len(differ)} of {len(compared)}"
        entry["replay_differs"] = differ  # a secret masked in the recording shows here
    (out / "upstream-journal.json").write_text(
        json.dumps(session.journal(), indent=2) + "\n", "utf-8"
    )
    return entry


def scrub_file(path: Path, secrets: list[str]) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(s, MASK)
    path.write_text(text, encoding="utf-8")
