"""A gateway under test started as a command: the failover probe's :class:`Target` for
``conformance probe failover``.

The probe writes the gateway's config (``failover_config``, by ``kind``) into a temporary
folder, starts ``command`` with ``{config}`` (the config file's path) and ``{port}`` (a free
127.0.0.1 port) put in, waits until the port answers HTTP, and stops the process afterwards.
Portkey takes its config per request (the ``x-portkey-config`` header) instead of from a file.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from conformance.probe.exchange import ProbeError
from conformance.probe.failover import GatewayRequest
from conformance.probe.failover_cases import Policy
from conformance.probe.failover_config import Route, litellm_config, portkey_config, proxy_config

__all__ = ["KINDS", "LITELLM_KEY_ENV", "CommandTarget", "free_port"]

KINDS = ("litellm", "portkey", "proxy")
LITELLM_KEY_ENV = "LITELLM_MASTER_KEY"
_MASK = "[REDACTED]"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CommandTarget:
    """Configure and start a gateway by command; ``log`` receives its output."""

    def __init__(
        self,
        kind: str,
        command: str,
        policy: Policy,
        *,
        name: str | None = None,
        version: str = "",
        log: Path | None = None,
        ready_timeout: float = 180.0,
        env: dict[str, str] | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ProbeError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if "{port}" not in command:
            raise ProbeError("--gateway-command must contain {port} (where the gateway listens)")
        if kind != "portkey" and "{config}" not in command:
            raise ProbeError(f"--gateway-command must contain {{config}} for --kind {kind}")
        self.kind, self.command, self.policy = kind, command, policy
        self.name, self.version = name or kind, version
        self.key: str | None = "sk-" + secrets.token_hex(16)
        self.secrets: list[str] = []
        self.log_path, self.ready_timeout, self.env = log, ready_timeout, env or {}
        self.port = 0
        self.configs: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def start(self, routes: dict[str, Route]) -> str:
        self._tmp = tempfile.TemporaryDirectory(prefix="failover-gateway-")
        cfg = Path(self._tmp.name) / ("config.yaml" if self.kind == "litellm" else "config.json")
        env = {**os.environ, **self.env, "NO_PROXY": "127.0.0.1,localhost"}
        if self.kind == "litellm":
            text = litellm_config(self.policy, routes, LITELLM_KEY_ENV)
            env[LITELLM_KEY_ENV] = self.key or ""
        elif self.kind == "portkey":
            self.configs = {
                c: portkey_config(self.policy, r, self.key or "") for c, r in routes.items()
            }
            text = json.dumps({c: json.loads(v) for c, v in self.configs.items()}, indent=2)
        else:
            text = proxy_config(self.policy, routes)
        cfg.write_text(text, encoding="utf-8")
        self.port = free_port()
        argv = [
            a.replace("{config}", str(cfg)).replace("{port}", str(self.port))
            for a in shlex.split(self.command)
        ]
        out: IO[str] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("w", encoding="utf-8")
            out = self._log
        try:
            self.proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self._tmp.name
            )
        except OSError as e:
            raise ProbeError(f"--gateway-command: cannot start {argv[0]!r}: {e}") from e
        self._wait_ready()
        return text.replace(self.key or "", _MASK) if self.key else text

    def _wait_ready(self) -> None:
        """Until the port answers HTTP at all (any status): the gateway is listening."""
        end = time.monotonic() + self.ready_timeout
        url = f"http://127.0.0.1:{self.port}/"
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ProbeError(
                    f"the gateway exited with status {self.proc.returncode} before it listened "
                    f"on 127.0.0.1:{self.port}"
                    + (f" (its output: {self.log_path})" if self.log_path else "")
                )
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answered
            except OSError:
                pass
            if time.monotonic() >= end:
                raise ProbeError(
                    f"the gateway did not answer on 127.0.0.1:{self.port} within "
                    f"{self.ready_timeout:.0f} s"
                )
            time.sleep(0.1)  # a process of its own starting: polling is all there is

    def request(self, case_id: str) -> GatewayRequest:
        base = f"http://127.0.0.1:{self.port}/v1"
        if self.kind == "portkey":
            return GatewayRequest(base, "fake-model", {"x-portkey-config": self.configs[case_id]})
        return GatewayRequest(base, case_id)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
            assert self.log_path is not None
            text = self.log_path.read_text("utf-8", errors="replace")
            self.log_path.write_text(text.replace(self.key or "", _MASK), "utf-8")
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
