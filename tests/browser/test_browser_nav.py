"""Browser journeys of the navigation: deep links on a freshly started server, the sidebar
by role, and an upload over the size limit. Each test starts its own server (as `make run`
does, through serve.py) and opens it straight at the address under test."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from review.admin import users
from review.cases import cases
from storage.db import make_engine
from tests.helpers.browser import CHROMIUM_ARGS, streamlit_server, wait_idle
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser


@pytest.fixture
def server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        yield base


@pytest.fixture
def page(server: str) -> Iterator[Page]:
    """A browser page; nothing has been opened on the server yet (a cold server)."""
    chromium = shutil.which("chromium")
    if not chromium:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is required in CI (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield pg
        browser.close()


def _user_id(url: str, email: str) -> int:
    eng = make_engine(url)
    try:
        row = users.get_by_email(eng, email)
        assert row is not None
        return row.id
    finally:
        eng.dispose()


def _case_id(url: str, key: str) -> int:
    eng = make_engine(url)
    try:
        case = cases.get_case(eng, key=key)
        assert case is not None
        return case.id
    finally:
        eng.dispose()


@pytest.mark.cold
def test_a_deep_link_on_a_cold_server_opens_the_page_without_page_not_found(
    page: Page, server: str, demo_url: str
) -> None:
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    case = _case_id(demo_url, "CASE-001")
    page.goto(f"{server}/cases?case={case}&as={ines}")
    wait_idle(page)
    expect(page.locator("h3", has_text="Case CASE-001")).to_be_visible()
    expect(page.get_by_text("Page not found")).not_to_be_visible()
    expect(page.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")
    assert f"case={case}" in page.url


def test_the_sidebar_lists_the_persons_work_first_and_always_shows_the_page_they_are_on(
    page: Page, server: str, demo_url: str
) -> None:
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    # the last page of the table, which is not an annotator's work
    page.goto(f"{server}/review?as={ines}")
    wait_idle(page)
    expect(page.get_by_role("heading", name="Monthly review", exact=True)).to_be_visible()
    links = page.locator("[data-testid='stSidebarNav'] [data-testid='stSidebarNavLink']")
    expect(links.nth(0)).to_have_accessible_name("Overview")
    expect(links.nth(1)).to_have_accessible_name("Label")
    current = page.locator("[data-testid='stSidebarNav'] a[aria-current='page']")
    expect(current).to_have_accessible_name("Monthly review")
    expect(current).to_be_visible()
    expect(page.get_by_test_id("stSidebarNavViewButton")).not_to_be_visible()  # never "View more"
    # a page an annotator cannot use is not listed; its link says who uses it
    expect(links.filter(has_text="Traces")).to_have_count(0)
    page.goto(f"{server}/traces?as={ines}")
    wait_idle(page)
    expect(page.get_by_text("Production traces are shown to reviewers")).to_be_visible()
    expect(page.get_by_text("Page not found")).not_to_be_visible()
    # a reviewer's own work comes first for them
    ravi = _user_id(demo_url, "ravi.menon@brightwave.example")
    page.goto(f"{server}/overview?as={ravi}")
    wait_idle(page)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(links).to_contain_text(["Overview", "Label", "Adjudicate", "Audit", "Monthly review"])
    expect(links.nth(2)).to_have_accessible_name("Adjudicate")
