"""Browser journey of the Traces page's filters: what "Clear filters" clears stays cleared in
the browser, not only on the server (AppTest cannot see the browser's own widget values)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

REVIEWER = 4  # Ravi Menon on the demo


@pytest.fixture
def page(demo_url: str, tmp_path: Path) -> Iterator[Page]:
    with (
        streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base,
        chromium_page() as pg,
    ):
        open_as(pg, f"{base}/traces?as={REVIEWER}")
        wait_idle(pg)
        yield pg


def test_cleared_filters_stay_cleared_on_the_next_run(page: Page) -> None:
    box = page.get_by_role("textbox", name="Search question, answer or trace id")
    box.fill("refund")
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Clear filters").click()
    # the box shows the search is gone ...
    expect(box).to_have_value("")
    wait_idle(page)
    # ... and the next run, which sends every widget's value from the browser (as a change of
    # any other filter does), does not bring it back from the browser's memory
    page.locator("body").press("r")
    wait_idle(page)
    expect(box).to_have_value("")
    expect(page.get_by_text("Showing 1–")).to_be_visible()  # the list is there, unfiltered
