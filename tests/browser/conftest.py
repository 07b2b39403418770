"""What most browser journeys start from: the app on a copy of the demo (``server``) and a
1280x720 chromium page on it that fails the test on a JavaScript error (``page``). A module
that needs another window, another database or a cold server defines its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.helpers.browser import chromium_page, streamlit_server
from tests.helpers.paths import ROOT


@pytest.fixture
def server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        yield base


@pytest.fixture
def page(server: str) -> Iterator[Page]:
    with chromium_page(1280, 720, base=server) as pg:
        yield pg
    assert pg.errors == []  # type: ignore[attr-defined]
