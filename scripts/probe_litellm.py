"""Probe a real LiteLLM proxy in front of the fake gateway, all on loopback.

Theory of operation: LiteLLM (``litellm[proxy]``, pinned) lives in its own virtual
environment, made on first use, because its dependency pins are not ours. The fake gateway
serves the ``litellm-upstream`` personality (the long reasoning stream dies mid-body with a
reset; the rate-limit request gets a 429 with ``Retry-After: 3``). The proxy is started on a
free 127.0.0.1 port with a random master key, the local model cost map and no telemetry; then
``conformance probe`` runs against it, and the report, the recorded scenario and the fake
gateway's journal (what the upstream really sent) are written to ``--out``.

Usage: ``python scripts/probe_litellm.py [--out DIR] [--venv DIR]`` (or ``tox -e probe-litellm``).
Exit status: the probe's (0 all habits relied on present, 1 some missing, 2 could not run).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance import probe  # noqa: E402
from fakes import Gateway, Scenario, load_scenario  # noqa: E402

LITELLM = "litellm[proxy]==1.81.13"


def ensure_venv(venv: Path) -> Path:
    """The venv's ``litellm`` executable, installing the pinned proxy first if needed."""
    exe = venv / "bin" / "litellm"
    py = venv / "bin" / "python"
    want = LITELLM.split("==")[1]
    if exe.exists():
        got = subprocess.run(
            [py, "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if got == want:
            return exe
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", LITELLM], check=True)
    return exe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"probe_litellm: the proxy exited early with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)  # a real process starting: polling is the only way to know
    raise SystemExit(f"probe_litellm: the proxy did not answer {url} within {timeout:.0f}s")


# Upstream personalities, one model name each: normal habits, then three ways an upstream
# stream can die mid-body (reset, clean close without the final chunk, in-band error event).
UPSTREAMS = {
    "well-behaved": ("well-behaved", None),
    "dies-reset": ("litellm-upstream", "reset"),
    "dies-close": ("litellm-upstream", "close"),
    "dies-in-band": ("in-band-error", None),
}


def upstream(name: str, mode: str | None) -> Scenario:
    sc = load_scenario(ROOT / "scenarios" / "gateways" / f"{name}.yaml")
    if mode is None:
        return sc
    raw = copy.deepcopy(sc.raw)
    for step in raw["script"]:
        if "cut" in (step.get("fault") or {}):
            step["fault"]["cut"]["mode"] = mode
    return Scenario.from_dict(raw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".tox" / "probe-litellm")
    ap.add_argument("--venv", type=Path, default=ROOT / ".tox" / "litellm-proxy-venv")
    args = ap.parse_args(argv)
    exe = ensure_venv(args.venv.absolute())
    out = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    master = "sk-" + secrets.token_hex(16)
    results: dict[str, dict] = {}
    with Gateway.running() as gw, tempfile.TemporaryDirectory(prefix="litellm-probe-") as tmp:
        sessions = {k: gw.create_session(upstream(*v)) for k, v in UPSTREAMS.items()}
        models = "".join(
            f"  - model_name: {k}\n"
            "    litellm_params:\n"
            "      model: openai/fake-model\n"
            f"      api_base: {s.base_url}\n"
            "      api_key: upstream-placeholder\n"
            "      max_retries: 0\n"
            for k, s in sessions.items()
        )
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(
            "model_list:\n" + models + "litellm_settings:\n"
            "  num_retries: 0\n"
            "  request_timeout: 30\n"
            "  telemetry: false\n"
            "general_settings:\n"
            "  master_key: os.environ/LITELLM_MASTER_KEY\n",
            encoding="utf-8",
        )
        port = free_port()
        env = {
            **os.environ,
            "LITELLM_MASTER_KEY": master,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        env.pop("DATABASE_URL", None)
        log = (out / "proxy.log").open("w", encoding="utf-8")
        proc = subprocess.Popen(
            [str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)]
            + ["--telemetry", "False"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        try:
            wait_ready(f"http://127.0.0.1:{port}/health/liveliness", proc)
            for k in UPSTREAMS:
                print(f"== upstream {k}")
                rec = out / k / f"litellm-{k}.yaml"
                args = probe._parser().parse_args(
                    ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", k]
                    + ["--out", str(out / k), "--record", str(rec)]
                    + ["--rate", "5", "--timeout", "30"]
                )
                rc, seen = probe.execute(args, master)
                doc = json.loads((out / k / "probe.json").read_text("utf-8"))
                # Replay the recording on the fake gateway: the same bytes must come back.
                replay = gw.create_session(load_scenario(rec))
                again = {x.name: x for x in probe.Probe(replay.base_url, k, rate=1000).run()}
                same = [
                    x.name for x in seen if x.name != "bad-request" and again[x.name].body == x.body
                ]
                results[k] = {
                    "exit": rc,
                    "verdicts": {o["id"]: o["verdict"] for o in doc["observations"]},
                    "replayed_byte_for_byte": f"{len(same)} of {len(seen) - 1}",
                }
                journal = sessions[k].journal()
                (out / k / "upstream-journal.json").write_text(
                    json.dumps(journal, indent=2) + "\n", "utf-8"
                )
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
    text = (out / "proxy.log").read_text(encoding="utf-8", errors="replace")
    (out / "proxy.log").write_text(text.replace(master, "[REDACTED]"), encoding="utf-8")
    summary = {"litellm": LITELLM.split("==")[1], "upstreams": results}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    print(json.dumps(summary, indent=2))
    # The report is the product: missing habits (exit 1) are findings, not a failure here.
    return 2 if any(r["exit"] == 2 for r in results.values()) or not results else 0


if __name__ == "__main__":
    sys.exit(main())
