"""Where things are: the project's own folders, and every results/ and reports/ path."""

from __future__ import annotations

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
TEMPLATES_DIR = PROJECT_DIR / "templates"
REPORT_TEMPLATES_DIR = TEMPLATES_DIR / "report"
SCHEMA_PATH = PROJECT_DIR / "config" / "schema.yaml"
