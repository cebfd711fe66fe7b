"""Install the pinned shipped agents of conformance/profiles/ from the npm registry.

Each profile's package (and its `extra` packages) goes into its own folder of the project's
cache, `.cache/agents/<profile>-<version>/` (or $CONFORMANCE_AGENT_CACHE), with exact versions,
so that a certification always runs the version its profile names. Usage:

    python scripts/install_agents.py              # every profile
    python scripts/install_agents.py qwen-code    # some
    python scripts/install_agents.py --check      # report, install nothing (exit 1 if missing)
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.adapters.shipped import ProfileError, load_profile, which_profiles  # noqa: E402


def install(name: str, *, force: bool = False) -> Path:
    """Install one profile's agent; return its executable."""
    prof = load_profile(name)
    dest = prof.install_dir
    if force and dest.exists():
        shutil.rmtree(dest)
    if not prof.bin_path.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("install_agents: npm is not on PATH (Node 20 or later is needed)")
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [npm, "install", "--prefix", str(dest), "--save-exact", "--no-audit", "--no-fund"]
        cmd += ["--loglevel=error", prof.npm, *prof.extra]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "DO_NOT_TRACK": "1"})
    for pattern in prof.chmod_x:
        for path in glob.glob(str(dest / pattern)):
            mode = os.stat(path).st_mode
            os.chmod(path, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if not prof.bin_path.exists():
        raise SystemExit(f"install_agents: {prof.npm} installed but {prof.bin_path} is missing")
    return prof.bin_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="*", help=f"profiles (default: all of {which_profiles()})")
    ap.add_argument("--check", action="store_true", help="only report what is installed")
    ap.add_argument("--force", action="store_true", help="reinstall from scratch")
    args = ap.parse_args(argv)
    missing = 0
    for name in args.profiles or which_profiles():
        try:
            prof = load_profile(name)
        except ProfileError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.check:
            ok = prof.bin_path.exists()
            missing += not ok
            print(f"{name}: {prof.npm} {'installed' if ok else 'MISSING'} at {prof.install_dir}")
            continue
        print(f"{name}: {install(name, force=args.force)}")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
