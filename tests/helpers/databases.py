"""Copies of the template databases the session fixtures build."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_db(template: Path, tmp_path: Path) -> str:
    target = tmp_path / "demo.db"
    shutil.copy(template, target)
    return f"sqlite:///{target}"
