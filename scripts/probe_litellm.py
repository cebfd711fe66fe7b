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
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from gateway_behind import ROOT, free_port, probe_one, scrub_file, stop, upstream, wait_ready
from gateway_behind import UPSTREAMS as PERSONALITIES

from fakes import Gateway

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


# Upstream personalities, one model name each: normal habits, then three ways an upstream
# stream can die mid-body (reset, clean close without the final chunk, in-band error event).
UPSTREAMS = {
    k: PERSONALITIES[k] for k in ("well-behaved", "dies-reset", "dies-close", "dies-in-band")
}


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
            wait_ready(f"http://127.0.0.1:{port}/health/liveliness", proc, "probe_litellm")
            for k in UPSTREAMS:
                print(f"== upstream {k}")
                results[k] = probe_one(
                    gw,
                    sessions[k],
                    ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", k],
                    master,
                    out / k,
                    out / k / f"litellm-{k}.yaml",
                )
        finally:
            stop(proc)
            log.close()
    scrub_file(out / "proxy.log", [master])
    summary = {"litellm": LITELLM.split("==")[1], "upstreams": results}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    print(json.dumps(summary, indent=2))
    # The report is the product: missing habits (exit 1) are findings, not a failure here.
    return 2 if any(r["exit"] == 2 for r in results.values()) or not results else 0


if __name__ == "__main__":
    sys.exit(main())
