"""Browser journeys of a reviewer (issue 17, items 6 and 15): Ravi adjudicates a disagreement
with its evidence beside the labels and moves next/previous by key and by mouse; a monthly
review for a new month opens with no error shown, and closing it needs a confirmation.

Assertions wait (Playwright's ``expect``), so a loaded machine slows them down but does not
fail them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from review.admin import users
from review.labels import adjudication, labeling
from review.monthly import reviews
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.guideshots import guide_shot
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

RAVI = "ravi.menon@brightwave.example"


@pytest.fixture
def server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        yield base


@pytest.fixture
def page(server: str) -> Iterator[object]:
    with chromium_page(base=server) as pg:
        yield pg


def ravi_id(url: str) -> int:
    eng = make_engine(url)
    try:
        row = users.get_by_email(eng, RAVI)
        assert row is not None
        return row.id
    finally:
        eng.dispose()


def test_a_reviewer_adjudicates_a_disagreement_beside_its_evidence(page, demo_url: str) -> None:
    pg = page
    eng = make_engine(demo_url)
    row = users.get_by_email(eng, RAVI)
    assert row is not None
    found = labeling.disagreements(eng, limit=200)
    queue = adjudication.reviewer_queue(eng, users.to_actor(row), found, 200)
    assert len(queue.entries) >= 2
    first, second = queue.entries[0], queue.entries[1]
    open_as(pg, f"{pg.base}/adjudicate?as={row.id}")
    heading = pg.locator("h3", has_text=f"Case {first.key}")
    expect(heading).to_be_visible(timeout=60_000)
    # the evidence beside the labels
    main = pg.locator("[data-testid='stMain']")
    expect(main.get_by_text("Question", exact=True)).to_be_visible()
    expect(main.get_by_text("Required claims", exact=True)).to_be_visible()
    expect(main.get_by_text("Documents available to retrieval", exact=False)).to_be_visible()
    expect(main.get_by_text("Labels side by side")).to_be_visible()
    expect(main.get_by_text("Tom Becker", exact=True).first).to_be_visible()
    expect(main.get_by_text("you labeled yourself wait for another reviewer")).to_be_visible()
    expect(main.get_by_text(f"Case 1 of {len(queue.entries)} in your list.")).to_be_visible()
    guide_shot(pg, "reviewer-adjudicate")
    # next by key, previous by mouse
    wait_idle(pg)
    heading.click()  # focus on the page, not in a field
    pg.keyboard.press("n")
    expect(pg.locator("h3", has_text=f"Case {second.key}")).to_be_visible()
    expect(main.get_by_text(f"Case 2 of {len(queue.entries)} in your list.")).to_be_visible()
    wait_idle(pg)
    pg.get_by_role("button", name="Previous").click()
    expect(pg.locator("h3", has_text=f"Case {first.key}")).to_be_visible()
    wait_idle(pg)
    # the gold label, with the reason, moves on to the next case (the form starts empty)
    main.locator("[data-testid='stForm']").get_by_text("1 · Answer", exact=True).click()
    pg.get_by_label("Note (why this is the gold label)").fill("The decisive clause settles it.")
    pg.get_by_role("button", name="Set gold label").click()
    expect(main.get_by_text(f"Gold label set on {first.key}.")).to_be_visible()
    expect(pg.locator("h3", has_text=f"Case {second.key}")).to_be_visible()
    gold = labeling.gold_history(eng, first.case_id)
    assert len(gold) == 1 and gold[0].adjudicator == RAVI
    eng.dispose()


def test_a_new_month_opens_without_an_error_and_closing_needs_confirmation(
    page, demo_url: str
) -> None:
    pg = page
    month = "2031-04"
    open_as(pg, f"{pg.base}/review?as={ravi_id(demo_url)}")
    expect(pg.get_by_role("heading", name="Monthly review")).to_be_visible(timeout=60_000)
    wait_idle(pg)
    pg.get_by_label("Open the review of month (YYYY-MM)").fill(month)
    pg.get_by_role("button", name="Open review").click()
    main = pg.locator("[data-testid='stMain']")
    expect(main.get_by_text(f"Opened the review of {month}.")).to_be_visible()
    expect(pg.locator("[data-testid='stException']")).to_have_count(0)
    expect(main.locator("[data-testid='stAlertContentError']")).to_have_count(0)
    expect(pg.get_by_role("combobox", name="Review")).to_have_value(f"{month} · open")
    guide_shot(pg, "monthly-opened")
    # closing asks first, and says it cannot be undone
    wait_idle(pg)
    pg.get_by_role("tab", name="Validation check").click()
    pg.get_by_role("button", name="Run and store the validation check").click()
    close = pg.get_by_role("button", name="Close this review…")
    wait_idle(pg)  # the dry run has run and is stored
    eng = make_engine(demo_url)
    stored = reviews.get_session(eng, month)
    assert stored is not None and stored.validation is not None
    expect(close).to_be_visible()
    guide_shot(pg, "monthly-validation")
    close.click()
    warning = main.get_by_text("This cannot be undone")
    expect(warning).to_be_visible()
    warning.scroll_into_view_if_needed()
    guide_shot(pg, "monthly-close")
    wait_idle(pg)  # a click while the page still runs may be lost (issue 17, item 3)
    pg.get_by_role("button", name="Cancel").click()
    expect(warning).to_have_count(0)
    still = reviews.get_session(eng, month)
    assert still is not None and not still.closed
    wait_idle(pg)
    close.click()
    expect(warning).to_be_visible()
    wait_idle(pg)
    pg.get_by_role("button", name="Yes, close it for good").click()
    closed_note = main.get_by_test_id("stAlertContentInfo").get_by_text("Closed by")
    expect(closed_note).to_be_visible(timeout=60_000)
    expect(warning).to_have_count(0)
    closed = reviews.get_session(eng, month)
    assert closed is not None and closed.closed
    eng.dispose()
