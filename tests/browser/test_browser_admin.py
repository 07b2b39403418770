"""Browser journey of an admin (Ada) on the demo: add a user with a role and clearance, set
how many independent labels a case needs, and set how long traces are kept. Each is said
under its form and is what the database then holds; the pictures are the admin guide's
(docs/guides/admin.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from review.admin import users
from review.labels import labeling
from review.traces import retention
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, wait_idle
from tests.helpers.guideshots import guide_shot

pytestmark = pytest.mark.browser

ADA = "ada.admin@brightwave.example"
NEW = "lena.wolf@brightwave.example"
WAIT = 60_000


@pytest.fixture
def page(server: str) -> Iterator[Page]:
    with chromium_page(1400, 1000, base=server) as pg:
        yield pg
    assert pg.errors == []  # type: ignore[attr-defined]


def test_an_admin_adds_a_user_sets_the_overlap_and_keeps_traces_for_a_year(
    page: Page, server: str, demo_url: str
) -> None:
    pg = page
    eng = make_engine(demo_url)
    ada = users.get_by_email(eng, ADA)
    assert ada is not None
    open_as(pg, f"{server}/admin?as={ada.id}")
    expect(pg.get_by_role("heading", name="Admin")).to_be_visible(timeout=WAIT)
    wait_idle(pg)

    # a new annotator with clearance
    form = pg.locator("[data-testid='stForm']").filter(has_text="Add a user")
    form.get_by_label("Email").fill(NEW)
    form.get_by_label("Name").fill("Lena Wolf")
    form.get_by_role("combobox").first.click()
    pg.get_by_role("option", name="Annotator", exact=True).click()
    pg.keyboard.press("Escape")
    form.get_by_text("Clearance for restricted content").click()
    # the roles list has closed and is gone from the page, its closing animation over (no
    # option fading out over the form in the guide's picture)
    expect(pg.locator("[data-baseweb='popover']")).to_have_count(0, timeout=WAIT)
    guide_shot(pg, "admin-add-user")
    form.get_by_role("button", name="Add user").click()
    # the address is shown broken, so that no mail link is made (ui.plain)
    expect(pg.get_by_text(re.compile(r"^Added lena"))).to_be_visible(timeout=WAIT)
    added = users.get_by_email(eng, NEW)
    assert added is not None and added.clearance and added.roles == ("annotator",)

    # three independent labels per case
    wait_idle(pg)
    pg.get_by_role("tab", name="Settings").click()
    overlap = pg.get_by_label("Independent labels per case (overlap)")
    overlap.fill("3")
    overlap.press("Tab")
    pg.get_by_role("button", name="Save labeling settings").click()
    expect(pg.get_by_text("Labeling settings saved.")).to_be_visible(timeout=WAIT)
    guide_shot(pg, "admin-settings")
    assert labeling.get_settings(eng).overlap == 3

    # traces kept for 365 days (the Traces page's retention panel)
    open_as(pg, f"{server}/traces?as={ada.id}")
    wait_idle(pg)
    pg.get_by_text("Retention", exact=True).click()
    days = pg.get_by_label("Keep traces for (days; 0 = no rule)")
    days.fill("365")
    days.press("Tab")
    pg.get_by_role("button", name="Save retention rule").click()
    expect(pg.get_by_text("Retention rule saved.")).to_be_visible(timeout=WAIT)
    pg.get_by_text("Retention rule saved.").scroll_into_view_if_needed()
    guide_shot(pg, "admin-retention")
    assert retention.get_retention(eng).days == 365
    eng.dispose()
