"""The reference agent is a plain client: it imports nothing from fakes, reports or the suite."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "conformance" / "reference"
FORBIDDEN = ("fakes", "reports", "conformance")


def test_reference_imports_no_harness_module() -> None:
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in FORBIDDEN and not n.startswith("conformance.reference"):
                    offenders.append(f"{path.name}: {n}")
    assert offenders == []
    assert (PKG / "agent.py").exists()
