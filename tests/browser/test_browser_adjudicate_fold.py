"""Browser check of the Adjudicate page at 1280x720 (issue 35, item 5): the gold form's
decision is in view when a case opens, without scrolling, on every case of the reviewer's
list, with every label beside it on screen too (nothing the reviewer needs is hidden to make
room: the labels move above the evidence, the gold form to the top of its column).

Every assertion waits (Playwright's expect): a loaded machine makes them slower, not red.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from review.admin import users
from review.core.taxonomy import Taxonomy
from review.labels import adjudication, labeling
from storage.db import make_engine
from tests.helpers.browser import open_as, wait_idle

pytestmark = pytest.mark.browser

RAVI = "ravi.menon@brightwave.example"
WAIT = 60_000  # ms an assertion may wait for a rerun on a loaded machine


def test_the_gold_decision_is_in_view_when_a_case_opens(
    page: Page, server: str, demo_url: str, tax: Taxonomy
) -> None:
    pg = page
    eng = make_engine(demo_url)
    row = users.get_by_email(eng, RAVI)
    assert row is not None
    found = labeling.disagreements(eng, limit=200)
    queue = adjudication.reviewer_queue(eng, users.to_actor(row), found, 200)
    assert len(queue.entries) >= 2
    open_as(pg, f"{server}/adjudicate?as={row.id}")
    for n, entry in enumerate(queue.entries):
        if n:
            pg.get_by_role("button", name="Next").click()
        expect(pg.locator("h3", has_text=f"Case {entry.key}")).to_be_visible(timeout=WAIT)
        wait_idle(pg)
        assert pg.evaluate("window.scrollY") == 0
        form = pg.locator("[data-testid='stForm']")
        expect(form.get_by_text("Gold decision")).to_be_in_viewport(timeout=WAIT)
        # the decision control whole, every option (Ctrl+Enter sets it from anywhere)
        decision = form.get_by_role("radiogroup", name="Gold decision")
        expect(decision).to_be_in_viewport(ratio=1)
        for d in tax.decisions.values():
            pill = decision.get_by_role("radio", name=re.compile(rf"· {re.escape(d.label)}$"))
            expect(pill).to_be_in_viewport(ratio=1)
        # the labels the reviewer weighs are on screen beside it
        for lab in labeling.current_labels(eng, entry.case_id):
            term = tax.decisions[lab.decision].label
            card = pg.locator(".st-key-adj_labels").get_by_text(term, exact=True).first
            expect(card).to_be_in_viewport()
        # and the question above the evidence
        expect(pg.get_by_text("Question", exact=True)).to_be_visible()
    eng.dispose()
