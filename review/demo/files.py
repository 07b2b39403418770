"""Where the demo's files are: the Brightwave documents (Markdown with front matter) and cases."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEMO_CASES", "DEMO_DIR", "DEMO_DOCS"]

DEMO_DIR = Path(__file__).resolve().parent
DEMO_DOCS = DEMO_DIR / "docs"
DEMO_CASES = DEMO_DIR / "cases.jsonl"
