"""AppTest of a single page through tests/apps/one_page.py, signed in as a given user."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


def page_app(
    url: str, monkeypatch: pytest.MonkeyPatch, page: str, user: str, **query: str
) -> AppTest:
    """``page`` is relative to the project root, e.g. "pages/traces.py"."""
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    monkeypatch.setenv("WB_TEST_PAGE", str(ROOT / page))
    monkeypatch.setenv("WB_TEST_USER", user)
    at = AppTest.from_file(str(ROOT / "tests" / "apps" / "one_page.py"), default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at
