"""Browser journey of a domain expert: Inés labels cases by keyboard and mouse at 1280x720.

She opens a case (blind: no document roles, no author's notes), sees the decision, reasons and
submit without scrolling, picks a decision by key (a second key pressed during the rerun the
first one starts is applied after it, none is lost), is told at the form that Abstain needs a
reason, picks one with the mouse, submits with Ctrl+Enter while the reason still has the focus
(the submit changes none of the reasons), lands on the next case, goes back one case with P,
sees the author's judgement now that she has labeled it, changes her label, labels the next
one with a rationale submitted by Ctrl+Enter from the text field, and opens the keys overlay
with `?`. Every assertion waits (Playwright's expect), so a loaded machine makes it slower, not
red.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from review.admin import users
from review.labels import labeling
from storage.db import make_engine
from tests.helpers.browser import open_as
from tests.helpers.guideshots import guide_shot
from tests.helpers.labeling import unlabeled_case_with_roles

pytestmark = pytest.mark.browser

INES = "ines.duarte@brightwave.example"
WAIT = 60_000  # ms an assertion may wait for a rerun on a loaded machine


def _press(pg: Page, key: str) -> None:
    """A key pressed on the page itself (no field has the focus)."""
    pg.locator("h1").first.click()
    pg.keyboard.press(key)


def _picked(pg: Page, reason: str):
    """The reason's pill, when it is picked."""
    return pg.get_by_role("button", name=reason, pressed=True)


def _case_shown(pg: Page, key: str) -> None:
    expect(pg.locator("strong", has_text=re.compile(rf"^Case {key}$"))).to_be_visible(timeout=WAIT)


def test_label_by_keyboard_and_mouse_go_back_and_change_it(
    page: Page, server: str, demo_url: str
) -> None:
    pg = page
    eng = make_engine(demo_url)
    target = unlabeled_case_with_roles(eng)
    row = users.get_by_email(eng, INES)
    assert row is not None
    ines = users.to_actor(row)
    open_as(pg, f"{server}/label?case={target.id}&as={ines.id}")
    # the page's key queue is in place once the page has drawn (before that no script of the
    # page runs, so nothing can hold a key); from then on a key pressed while the page reruns
    # is held until its button is drawn, and of two decision keys pressed at once the last one
    # wins: 1 reruns the page, 2 pressed during that rerun is applied after it
    _case_shown(pg, target.key)
    pg.wait_for_function("window.__labelKeys === true", timeout=WAIT)
    pg.locator("h1").first.click()
    pg.keyboard.press("1")
    pg.keyboard.press("2")
    _case_shown(pg, target.key)
    reasons = pg.get_by_text("Why Abstain? (one or more reasons)")
    expect(reasons).to_be_visible(timeout=WAIT)

    # blind: no roles, no notes; decision, reasons and submit fit the window
    submit = pg.get_by_role("button", name=re.compile("^Submit label"))
    expect(submit).to_be_in_viewport(timeout=WAIT)
    expect(pg.get_by_role("button", name=re.compile("^Abstain"))).to_be_in_viewport()
    expect(reasons).to_be_in_viewport()
    expect(pg.get_by_text("blind until you submit", exact=False)).to_be_visible()
    docs = pg.locator(".st-key-lab_docs")
    expect(docs).to_be_visible()
    for role in ("Decisive", "Distractor", "Superseded"):
        expect(docs.get_by_text(role, exact=False)).to_have_count(0)
    expect(pg.get_by_text(target.notes[:40], exact=False)).to_have_count(0)
    guide_shot(pg, "annotator-blind-form")

    # submitted without a reason: refused at the form, in view, nothing saved
    pg.keyboard.press("Control+Enter")
    refused = pg.get_by_text("Say why: Abstain needs at least one reason; nothing was saved.")
    expect(refused).to_be_in_viewport(timeout=WAIT)
    guide_shot(pg, "annotator-say-why")
    assert labeling.my_label(eng, ines, target.id) is None
    pg.get_by_role("button", name="No answer-bearing evidence").click()
    expect(_picked(pg, "No answer-bearing evidence")).to_be_visible(timeout=WAIT)
    # Ctrl+Enter with the focus still on the pill: submits, ticks nothing else
    pg.keyboard.press("Control+Enter")
    expect(pg.get_by_text(f"Saved your label on {target.key}: Abstain")).to_be_visible(timeout=WAIT)
    mine = labeling.my_label(eng, ines, target.id)
    assert mine is not None
    assert (mine.decision, mine.reason_codes) == ("abstain", ("no_answer_bearing_evidence",))

    # the next case opened
    expect(pg).to_have_url(re.compile(rf"case=(?!{target.id}\b)\d+"), timeout=WAIT)
    expect(pg.get_by_role("button", name=re.compile("^Submit label"))).to_be_visible()

    # P: back to the case just labeled; now the judgement shows, and the label can change
    _press(pg, "p")
    _case_shown(pg, target.key)
    expect(pg.get_by_role("button", name=re.compile("^Change my label"))).to_be_visible(
        timeout=WAIT
    )
    expect(pg.get_by_text("author's judgement", exact=False)).to_be_visible()
    expect(docs.get_by_text("Decisive", exact=False).first).to_be_visible()
    expect(_picked(pg, "No answer-bearing evidence")).to_be_visible()
    guide_shot(pg, "annotator-after-submit")
    _press(pg, "3")
    expect(pg.get_by_text("Why Clarify? (one or more reasons)")).to_be_visible(timeout=WAIT)
    pg.get_by_role("button", name="No answer-bearing evidence").click()  # unpick
    pg.get_by_role("button", name="Ambiguous question").click()
    expect(_picked(pg, "Ambiguous question")).to_be_visible(timeout=WAIT)
    expect(_picked(pg, "No answer-bearing evidence")).to_have_count(0)
    pg.get_by_role("button", name=re.compile("^Change my label")).click()
    expect(pg.get_by_text(f"Saved your label on {target.key}: Clarify (changed")).to_be_visible(
        timeout=WAIT
    )
    mine = labeling.my_label(eng, ines, target.id)
    assert mine is not None
    assert (mine.decision, mine.reason_codes) == ("clarify", ("ambiguous_question",))
    history = [h for h in labeling.history(eng, target.id) if h.annotator == INES]
    assert [h.decision for h in history] == ["abstain", "clarify"]

    # the next case again: Ctrl+Enter in the rationale keeps the text and submits
    expect(pg.get_by_role("button", name=re.compile("^Submit label"))).to_be_visible(timeout=WAIT)
    expect(pg).to_have_url(re.compile(rf"case=(?!{target.id}\b)\d+"))
    following = int(re.findall(r"case=(\d+)", pg.url)[0])
    _press(pg, "1")
    expect(pg.get_by_role("button", name=re.compile("^Answer"))).to_have_attribute(
        "kind", "primary", timeout=WAIT
    )
    pg.get_by_text("Category, rationale and claim support (optional)").click()
    pg.get_by_label("Rationale").fill("The decisive clause answers it.")
    pg.get_by_label("Rationale").press("Control+Enter")
    expect(pg.get_by_text(re.compile(r"Saved your label on CASE-\d+: Answer\."))).to_be_visible(
        timeout=WAIT
    )
    expect(pg).to_have_url(re.compile(rf"case=(?!{following}\b)\d+"), timeout=WAIT)
    mine = labeling.my_label(eng, ines, following)
    assert mine is not None
    assert (mine.decision, mine.rationale) == ("answer", "The decisive clause answers it.")

    # `?` lists the keys
    _press(pg, "?")
    dialog = pg.get_by_role("dialog")
    expect(dialog).to_be_visible(timeout=WAIT)
    expect(dialog.get_by_text("Keys of the Label page")).to_be_visible()
    # the caption names it (the keys table is a canvas grid whose cells also match "Ctrl+Enter")
    expect(dialog.get_by_text("Ctrl+Enter works everywhere")).to_be_visible()
    guide_shot(pg, "annotator-keys")
    # Esc closes the list (the guide says so); a key nothing on the page takes is then
    # refused where it can be seen (last, so its notice is in none of the guide's pictures)
    pg.keyboard.press("Escape")
    expect(dialog).to_have_count(0, timeout=WAIT)
    _press(pg, "7")
    expect(pg.get_by_role("alert").filter(has_text="The key 7 was not applied")).to_be_visible(
        timeout=WAIT
    )
    eng.dispose()
