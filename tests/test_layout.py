"""The import rules of the design are enforced here, not just written down."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.fail("lint-imports not found: install the project with its 'test' extra")
    proc = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_reference_agent_imports_nothing_of_the_harness():
    # import-linter cannot forbid a package's parent, so this rule is checked on the AST.
    offenders = []
    for path in sorted((ROOT / "conformance" / "reference").rglob("*.py")):
        for line, module in _imported_modules(path):
            top = module.split(".")
            if top[0] in {"fakes", "reports", "scenarios"} or (
                top[0] == "conformance"
                and module != "conformance.reference"
                and not module.startswith("conformance.reference.")
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: imports {module}")
    assert offenders == []


def test_one_list_of_credential_headers():
    # `reports` may import nothing of ours, so it keeps a copy: it must stay the same list.
    from conformance.probe.redact import SECRET_HEADERS as probe
    from fakes.session import SECRET_HEADERS as gateway
    from reports.redact import SECRET_HEADERS as report

    assert probe is gateway
    assert report == gateway
    assert "api-key" in report  # Azure OpenAI's header
