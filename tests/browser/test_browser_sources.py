"""Browser journey of the Traces page's live sources: an admin adds an OTLP receiver source,
sees it in the table with how to point an exporter at it, and pauses it; each step is said
under its control. A reviewer sees the same table and no control."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

ADMIN = 1  # Ada Okafor on the demo
REVIEWER = 4  # Ravi Menon
SHOTS = os.environ.get("WB_SOURCES_SHOTS")  # a folder: save what the journey saw there


@pytest.fixture
def server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        yield base


def _shot(page: Page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _open_panel(page: Page) -> None:
    page.get_by_text("Live sources", exact=False).first.click()
    wait_idle(page)


def test_an_admin_adds_a_receiver_source_and_pauses_it(server: str) -> None:
    with chromium_page() as page:
        open_as(page, f"{server}/traces?as={ADMIN}")
        wait_idle(page)
        _open_panel(page)
        expect(page.get_by_text("No live source yet")).to_be_visible()
        page.get_by_role("combobox", name="Kind").click()
        page.get_by_role("option", name="OTLP/HTTP receiver").click()
        page.get_by_role("textbox", name="Name", exact=True).fill("Checkout bot receiver")
        page.get_by_role("textbox", name="Secret name (optional)").fill("RECEIVER_TOKEN")
        page.get_by_role("button", name="Add source").click()
        wait_idle(page)
        _shot(page, "sources-after-add")
        expect(page.get_by_text("Source Checkout bot receiver added")).to_be_visible()
        # the table, and how an exporter reaches the receiver
        expect(page.get_by_text("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").first).to_be_visible()
        expect(page.get_by_text("Authorization: Bearer").first).to_be_visible()
        _shot(page, "sources-added")
        page.get_by_role("button", name="Pause").click()
        wait_idle(page)
        expect(page.get_by_text("Source Checkout bot receiver paused")).to_be_visible()
        expect(page.get_by_role("button", name="Resume")).to_be_visible()
        _shot(page, "sources-paused")

        # a reviewer reads the same panel, without the controls
        open_as(page, f"{server}/traces?as={REVIEWER}")
        wait_idle(page)
        _open_panel(page)
        expect(page.get_by_text("Live sources: 1 (1 paused)")).to_be_visible()
        expect(page.get_by_role("button", name="Resume")).to_have_count(0)
        expect(page.get_by_role("button", name="Add source")).to_have_count(0)
        _shot(page, "sources-reviewer")
