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


MAX_FUNCTION_LINES = 80
PACKAGES = ("conformance", "fakes", "reports", "scenarios")


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_no_function_is_longer_than_a_screenful():
    # A longer function is split into named steps (as the run's gate, drive and judge are).
    long = [
        f"{path.relative_to(ROOT)}: {name} ({n} lines)"
        for pkg in PACKAGES
        for path in sorted((ROOT / pkg).rglob("*.py"))
        for name, n in _functions(path)
        if n > MAX_FUNCTION_LINES
    ]
    assert long == [], "\n".join(long)


def test_the_harness_asks_no_adapter_or_gateway_for_an_attribute_by_name():
    # Adapter traits and gateway handles are typed protocols (conformance.adapters.interface,
    # fakes.handles): what an adapter or a gateway offers is declared, not probed.
    probed = []
    for path in sorted((ROOT / "conformance").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and node.args
            ):
                target = ast.unparse(node.args[0])
                if "adapter" in target or "gateway" in target or target in ("session", "gw"):
                    probed.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert probed == [], "\n".join(probed)
