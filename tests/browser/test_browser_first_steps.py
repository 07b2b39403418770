"""Browser journey of a new workbench (issue 35, items 8 and 10): Overview shows the one next
step first; following it, a document imported on the Corpus page reads as its structure
(headings and footnotes without their ``#`` and ``[^1]`` marks); then Overview moves on to
the next step. And a page the signed-in person cannot use says who can, with a link to Admin
for an administrator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import FilePayload, expect

from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.corpus import GOOD
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser


@pytest.fixture
def server(empty_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=empty_url) as base:
        yield base


def test_a_new_workbench_leads_from_the_first_step_to_the_next(server: str) -> None:
    with chromium_page() as page:
        open_as(page, f"{server}/overview?as=1")
        wait_idle(page)
        expect(page.get_by_role("heading", name="First step")).to_be_visible()
        expect(page.get_by_text("Start here: import your documents")).to_be_visible()
        expect(page.get_by_text("has 0 ready")).to_have_count(0)
        page.get_by_role("link", name="Open Corpus").click()
        wait_idle(page)
        page.locator("input[type='file']").set_input_files(
            files=[FilePayload(name="refund.md", mimeType="text/markdown", buffer=GOOD.encode())]
        )
        expect(page.get_by_text("refund.md", exact=True)).to_be_visible()
        page.get_by_role("button", name="Import", exact=True).click()
        wait_idle(page)
        expect(page.get_by_text("1 document version")).to_be_visible()
        page.goto(f"{server}/corpus?as=1&doc=1")  # the list's "open" cells are drawn, not links
        wait_idle(page)
        shown = page.get_by_role("tabpanel", name="Structured")  # the Raw text tab is raw
        expect(shown.get_by_role("heading", name="Monthly plans")).to_be_visible()
        expect(shown.get_by_text("[1] Counted from the first invoice date.")).to_be_visible()
        expect(shown.get_by_text("## Monthly plans")).to_have_count(0)
        expect(shown.get_by_text("[^1]")).to_have_count(0)
        page.get_by_role("link", name="Overview").first.click()
        wait_idle(page)
        expect(page.get_by_text("Next: make your first evaluation cases")).to_be_visible()


def test_a_page_an_admin_cannot_use_links_to_admin(server: str) -> None:
    """The empty database's one user is an administrator and annotator: Adjudicate is not
    theirs; the page says who adjudicates and its link opens the Admin page."""
    with chromium_page() as page:
        open_as(page, f"{server}/adjudicate?as=1")
        wait_idle(page)
        expect(page.get_by_text("Adjudication is for reviewers.")).to_be_visible()
        page.get_by_role("link", name="Open Admin").click()
        wait_idle(page)
        expect(page.get_by_role("heading", name="Admin")).to_be_visible()
