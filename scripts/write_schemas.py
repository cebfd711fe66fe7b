"""Rewrite the generated parts of every committed JSON Schema (see ``fakes.schemas``).

python scripts/write_schemas.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fakes.schemas import write_schema  # noqa: E402

# Every schema file with a generated part; tests/test_schemas_generated.py reads this list.
SCHEMAS = (
    "scenarios/schema.json",
    "conformance/schemas/protocol/start.json",
    "reports/schemas/probe.schema.json",
)

if __name__ == "__main__":
    for name in SCHEMAS:
        write_schema(ROOT / name)
        print(f"wrote {name}", file=sys.stderr)
