"""Where the demo's files are: the Brightwave documents (Markdown with front matter) and cases."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEMO_CASES", "DEMO_CASE_BATCH", "DEMO_DIR", "DEMO_DOCS"]

DEMO_DIR = Path(__file__).resolve().parent
DEMO_DOCS = DEMO_DIR / "docs"
DEMO_CASES = DEMO_DIR / "cases.jsonl"
#: The import batch of the demo cases (runs on a team's own cases can leave them out).
DEMO_CASE_BATCH = "Brightwave demo cases"
