"""Browser journey: build a variant in the Case builder and see it in its family.

Runs the page through the one-page router (tests/apps/one_page.py) with Debian's chromium, so
it works whether or not the page is registered in app.py yet.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import CHROMIUM_ARGS, streamlit_server, wait_idle
from tests.helpers.databases import copy_db
from tests.helpers.paths import ROOT


@pytest.fixture
def demo_url(tmp_path: Path, demo_base_template: Path) -> str:
    """This journey builds its own variant: start from the demo without the demo variants."""
    return copy_db(demo_base_template, tmp_path)


pytestmark = pytest.mark.browser


@pytest.fixture
def builder_server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(
        ROOT / "tests" / "apps" / "one_page.py",
        tmp_path,
        WORKBENCH_DATABASE_URL=demo_url,
        WB_TEST_PAGE=str(ROOT / "pages" / "builder_page.py"),
        WB_TEST_USER="ines.duarte@brightwave.example",
    ) as base:
        yield base


def test_build_a_variant_and_see_it_in_its_family(builder_server: str, demo_url: str) -> None:
    chromium = shutil.which("chromium")
    if not chromium:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is required in CI (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from review.cases import cases
    from storage.db import make_engine

    eng = make_engine(demo_url)
    base = cases.get_case(eng, key="CASE-001")
    assert base is not None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1100})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(f"{builder_server}/?case={base.id}")
        wait_idle(pg)
        expect(pg.get_by_role("heading", name="Base case CASE-001")).to_be_visible()
        pg.get_by_role("combobox", name="Operator").click()
        pg.get_by_role("option", name="change_unit", exact=True).click()
        wait_idle(pg)
        pg.get_by_role("combobox", name="to unit").click()
        pg.get_by_role("option", name="weeks", exact=True).click()
        pg.get_by_role("button", name="Preview the edit").click()
        wait_idle(pg)
        expect(pg.get_by_text("{+weeks+}").first).to_be_visible()
        pg.get_by_role("button", name="Save as a variant of FAM-REFUND-WINDOW").click()
        wait_idle(pg)
        expect(pg.get_by_text("Saved CASE-001-CF-1 (draft, suggested abstain)")).to_be_visible()
        expect(pg.get_by_role("heading", name="Family FAM-REFUND-WINDOW")).to_be_visible()
        expect(pg.get_by_text("CASE-001-CF-1 · removed · draft")).to_be_visible()
        assert "family=FAM-REFUND-WINDOW" in pg.url
        assert not pg.locator("[data-testid='stException']").count()
        assert errors == []
        browser.close()
    view = cases.get_case(eng, key="CASE-001-CF-1")
    eng.dispose()
    assert view is not None and view.family == "FAM-REFUND-WINDOW"
