"""Browser journey: a reviewer reads a closed monthly review (issue 17, items 12 and 17):
people by name, the validation result as a coloured badge, its rates as percentages with
their counts, the policy version labelled, and no "nan" or raw float anywhere on the tab.

Runs the Monthly review page through the one-page router (tests/apps/one_page.py) with
Debian's chromium.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.guideshots import guide_shot
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser


@pytest.fixture
def review_server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(
        ROOT / "tests" / "apps" / "one_page.py",
        tmp_path,
        WORKBENCH_DATABASE_URL=demo_url,
        WB_TEST_PAGE=str(ROOT / "pages" / "review_page.py"),
        WB_TEST_USER="ravi.menon@brightwave.example",
    ) as base:
        yield base


def test_a_closed_review_reads_in_words_people_and_percentages(review_server: str) -> None:
    with chromium_page(1400, 1400, base=review_server) as pg:
        expect(pg.get_by_role("heading", name="Monthly review")).to_be_visible()
        # pick a closed review: read-only, closed by a person named as such
        pg.locator("[data-testid='stMain'] [data-testid='stSelectbox']").first.click()
        pg.get_by_role("option", name=re.compile(r"· closed$")).first.click()
        wait_idle(pg)
        expect(pg.get_by_text(re.compile(r"Closed by Ravi Menon on"))).to_be_visible()
        pg.get_by_role("tab", name="Findings and actions").click()
        expect(pg.get_by_text(re.compile(r"Attendees: .*Ravi Menon"))).to_be_visible()
        guide_shot(pg, "monthly-findings")
        pg.get_by_role("tab", name="Validation check").click()
        wait_idle(pg)
        badge = pg.locator("[data-testid='stMarkdownContainer']", has_text="Result:")
        expect(badge.get_by_text(re.compile(r"^(pass|fail)$"))).to_be_visible()
        text = pg.locator("[data-testid='stMain']").inner_text()
        assert "@brightwave.example" not in text  # names, never addresses
        assert not re.search(r"\bnan\b", text)
        assert not re.search(r"\d\.\d{4,}", text)
        assert pg.errors == []  # type: ignore[attr-defined]
