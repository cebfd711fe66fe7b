"""The scenario library (YAML data) and its JSON Schema; this module only locates them."""

from pathlib import Path

SCENARIO_DIR = Path(__file__).resolve().parent
SCHEMA_PATH = SCENARIO_DIR / "schema.json"
