"""Screenshots of the role guides (docs/guides/), taken by the browser tests at the step a
guide shows, so a guide's picture is what a journey the tests run looks like.

They are written only when ``WORKBENCH_GUIDE_SHOTS`` names a folder (``make guide-shots``
sets it to docs/guides/img and runs the browser tests), so a test run leaves the repository
as it was. tests/test_docs.py holds every picture a guide shows to a name a browser test
takes here, and to a file in docs/guides/img."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: the environment variable naming the folder the pictures go to
FOLDER_ENV = "WORKBENCH_GUIDE_SHOTS"


def guide_shot(page: Any, name: str) -> None:
    """Save what ``page`` shows as ``<folder>/<name>.png`` when the folder is set."""
    folder = os.environ.get(FOLDER_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
