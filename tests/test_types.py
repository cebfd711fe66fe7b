"""The type checker passes: mypy over the packages, as configured in pyproject.toml.

``[tool.mypy]`` says what is checked and how strictly (``fakes``, ``conformance.checks`` and
``conformance.judging.evidence`` are held to --strict). The cache lives in pytest's cache directory, so
a second run takes about a second instead of a cold half minute.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_passes(pytestconfig: pytest.Config, tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy not found: install the project with its 'test' extra")
    cache = pytestconfig.cache.mkdir("mypy") if getattr(pytestconfig, "cache", None) else tmp_path
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
