"""Where things are: the project root and the test data."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TRACE_DATA = DATA / "traces"
