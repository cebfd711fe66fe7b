"""Take PNG screenshots of a rendered report with headless Chromium.

``python -m reports.screenshots REPORT_DIR [--criterion ID] [--out DIR]`` writes
``index.png`` and ``<ID>.png`` (1280x2000) into ``--out`` (default: REPORT_DIR).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reports.errors import ScreenshotError

__all__ = ["find_chromium", "main", "screenshot"]


def find_chromium() -> str | None:
    """Path of a chromium / chromium-browser binary on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(browser: str, page: Path, png: Path, *, timeout: float = 90.0) -> None:
    """Render ``page`` headless at 1280x2000 into ``png``; raise ScreenshotError on failure."""
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--window-size=1280,2000",
                f"--screenshot={png}",
                page.absolute().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0 or not png.is_file():
        raise ScreenshotError(f"chromium failed on {page}: {proc.stderr.strip()[-500:]}")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; exit 2 on bad input or a missing browser."""
    p = argparse.ArgumentParser(prog="python -m reports.screenshots", description=__doc__)
    p.add_argument("report", type=Path, help="a rendered report directory")
    p.add_argument("--criterion", help="criterion page to capture (default: the first)")
    p.add_argument("--out", type=Path, help="where to write the PNGs (default: the report)")
    args = p.parse_args(argv)
    browser = find_chromium()
    if browser is None:
        print("error: no chromium or chromium-browser on PATH", file=sys.stderr)
        return 2
    index = args.report / "index.html"
    pages = sorted((args.report / "criteria").glob("*.html"))
    if not index.is_file() or not pages:
        print(f"error: {args.report}: not a rendered report (no index.html)", file=sys.stderr)
        return 2
    crit = args.report / "criteria" / f"{args.criterion}.html" if args.criterion else pages[0]
    if not crit.is_file():
        print(f"error: {crit}: no such criterion page", file=sys.stderr)
        return 2
    out = args.out or args.report
    out.mkdir(parents=True, exist_ok=True)
    try:
        screenshot(browser, index, out / "index.png")
        screenshot(browser, crit, out / f"{crit.stem}.png")
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out / "index.png")
    print(out / f"{crit.stem}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
