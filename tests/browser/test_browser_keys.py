"""Browser journeys of the keys (issue 35, items 4 and 5), at 1280x720 in Debian's chromium.

- Audit: ten traces judged by keys (verdict, stage, claims) with Ctrl+Enter pressed at once,
  every other time with the focus left in a claim's verdict select (where Ctrl+Enter was
  swallowed before); each save is acknowledged next to the button, in view, and stored; a
  save without a verdict is refused there (it used to do nothing: the button was disabled).
- Label: reasons by their letters, shown on the pills; Next and Skip stay in view with every
  reason on screen; a decision key after Clarify changes the label that is saved.
- Adjudicate: the gold form starts empty, is refused when submitted empty (in view, next to
  its button), and sets the gold label by keys.

Every assertion waits (Playwright's expect): a loaded machine makes them slower, not red.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import func, select

from review.admin import users
from review.audits.plans import PlanSpec, create_plan, draw_plan
from review.audits.population import PopulationFilter
from review.core.taxonomy import Taxonomy
from review.labels import adjudication, keys, labeling
from storage.db import make_engine, read_session, run_write
from storage.models import AuditItem, AuditVerdict
from tests.helpers.browser import open_as
from tests.helpers.labeling import unlabeled_case_with_roles

pytestmark = pytest.mark.browser

INES = "ines.duarte@brightwave.example"
RAVI = "ravi.menon@brightwave.example"
WAIT = 60_000  # ms an assertion may wait for a rerun on a loaded machine
TRACES = 10
PICKED = "button[aria-pressed='true'], button[aria-checked='true']"  # a picked pill


def _user_id(url: str, email: str) -> int:
    eng = make_engine(url)
    row = users.get_by_email(eng, email)
    eng.dispose()
    assert row is not None
    return row.id


def _focus_page(pg: Page) -> None:
    """The focus on the page itself (no field has it)."""
    pg.locator("h1").first.click()


def _keys_ready(pg: Page) -> None:
    pg.wait_for_function("window.__wbKeys === true", timeout=WAIT)


def _verdicts(url: str, plan_id: int) -> int:
    eng = make_engine(url)
    with read_session(eng) as s:
        n = s.scalar(
            select(func.count(AuditVerdict.id))
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .where(AuditItem.plan_id == plan_id)
        )
    eng.dispose()
    return int(n or 0)


@pytest.fixture
def answers_plan(demo_url: str) -> int:
    """An open audit batch of answered traces for Ravi (none restricted)."""
    eng = make_engine(demo_url)
    row = users.get_by_email(eng, RAVI)
    assert row is not None
    ravi = users.to_actor(row)
    spec = PlanSpec(
        name="Keys journey",
        filter=PopulationFilter(decisions=("answer",), include_restricted=False),
        total=TRACES + 2,
        seed=11,
    )
    plan_id = run_write(eng, lambda s: create_plan(s, ravi, spec))
    drawn = run_write(eng, lambda s: draw_plan(s, ravi, plan_id))
    eng.dispose()
    assert drawn.items >= TRACES
    return plan_id


def test_audit_ten_traces_judged_by_keys_with_ctrl_enter_at_once(
    page: Page, server: str, demo_url: str, answers_plan: int
) -> None:
    pg = page
    open_as(pg, f"{server}/audit?as={_user_id(demo_url, RAVI)}&plan={answers_plan}")
    expect(pg.get_by_role("heading", name="Audit")).to_be_visible(timeout=WAIT)
    pg.get_by_role("tab", name="My queue").click()
    expect(pg.get_by_role("button", name="Next trace")).to_be_visible(timeout=WAIT)
    _keys_ready(pg)
    _focus_page(pg)
    pg.keyboard.press("n")
    save = pg.get_by_role("button", name=re.compile("^Save verdict"))
    expect(save).to_be_visible(timeout=WAIT)
    # Ctrl+Enter without a verdict: refused next to the button, in view (it did nothing)
    _focus_page(pg)
    pg.keyboard.press("Control+Enter")
    refused = pg.get_by_text(re.compile(r"Pick a verdict first \(keys A–G\); nothing was saved"))
    expect(refused).to_be_in_viewport(timeout=WAIT)
    assert _verdicts(demo_url, answers_plan) == 0
    seen: list[str] = []
    for n in range(TRACES):
        heading = pg.get_by_role("heading", name=re.compile(r"^Trace "))
        expect(heading).to_be_visible(timeout=WAIT)
        trace = heading.inner_text().removeprefix("Trace ").strip()
        assert trace not in seen
        seen.append(trace)
        claims = pg.get_by_text(re.compile(r"^Keys judge claim \d+ of \d+"))
        _focus_page(pg)
        if pg.get_by_label("Review the answer claim by claim").is_checked():
            expect(claims).to_be_visible(timeout=WAIT)
            # unsupported (D), retrieval missed (5), then every claim unsupported (2)
            pg.keyboard.press("d")
            pg.keyboard.press("5")
            if n % 2:
                # the focus left in a closed select: it must not take the keys
                pg.keyboard.press("2")
                select_box = pg.get_by_label("Verdict (claim 1)", exact=False).first
                expect(select_box).to_be_visible(timeout=WAIT)
                select_box.click()
                pg.keyboard.press("Escape")
            for _ in range(3):
                pg.keyboard.press("2")
        else:
            pg.keyboard.press("a")  # a correct refusal: no answer to judge
        pg.keyboard.press("Control+Enter")  # at once, while the reruns of the keys go on
        saved = pg.get_by_text(f"Saved your verdict on {trace}.")
        expect(saved).to_be_in_viewport(timeout=WAIT)
        assert _verdicts(demo_url, answers_plan) == n + 1
        _focus_page(pg)
        pg.keyboard.press("n")
        expect(pg.get_by_role("heading", name=f"Trace {trace}")).to_have_count(0, timeout=WAIT)
    eng = make_engine(demo_url)
    with read_session(eng) as s:
        stored = s.scalars(
            select(AuditVerdict.verdict)
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .where(AuditItem.plan_id == answers_plan)
        ).all()
    eng.dispose()
    assert len(stored) == TRACES
    assert set(stored) <= {"unsupported_answer", "correct_refusal"}


def test_label_reasons_by_their_letters_and_next_skip_in_view(
    page: Page, server: str, demo_url: str, tax: Taxonomy
) -> None:
    pg = page
    eng = make_engine(demo_url)
    target = unlabeled_case_with_roles(eng)
    row = users.get_by_email(eng, INES)
    assert row is not None
    ines = users.to_actor(row)
    open_as(pg, f"{server}/label?case={target.id}&as={ines.id}")
    _keys_ready(pg)
    expect(pg.get_by_role("button", name=re.compile("^Submit label"))).to_be_visible(timeout=WAIT)
    by_key = keys.reason_keys(tax)
    codes = list(by_key)
    first, last = codes[0], codes[-1]
    label_of = {c: t.label for c, t in tax.case_reason_codes().items()}
    _focus_page(pg)
    # Clarify shows every reason: the letters are on the pills; Next and Skip stay in view
    pg.keyboard.press("3")
    expect(pg.get_by_text("Why Clarify? (one or more reasons)")).to_be_visible(timeout=WAIT)
    for code, key in by_key.items():
        expect(pg.get_by_role("button", name=f"{key.upper()} · {label_of[code]}")).to_be_visible()
    expect(pg.get_by_role("button", name=re.compile("^Next case"))).to_be_in_viewport()
    expect(pg.get_by_role("button", name=re.compile("^Skip"))).to_be_in_viewport()
    # a decision key right after Clarify is the one saved (reasons go with it)
    pg.keyboard.press("2")
    expect(pg.get_by_text("Why Abstain? (one or more reasons)")).to_be_visible(timeout=WAIT)
    pg.keyboard.press(by_key[first])
    pg.keyboard.press(by_key[last])
    pg.keyboard.press(by_key[last])  # unpicked again
    pg.keyboard.press(by_key[last])
    pg.keyboard.press("Control+Enter")
    expect(pg.get_by_text(f"Saved your label on {target.key}: Abstain")).to_be_in_viewport(
        timeout=WAIT
    )
    mine = labeling.my_label(eng, ines, target.id)
    assert mine is not None
    assert (mine.decision, set(mine.reason_codes)) == ("abstain", {first, last})
    # the key list fits the window whole, its grid as tall as all its lines (none scrolled
    # away inside the grid; the frame around it scrolls)
    expect(pg).to_have_url(re.compile(rf"case=(?!{target.id}\b)\d+"), timeout=WAIT)
    _focus_page(pg)
    pg.keyboard.press("?")
    dialog = pg.get_by_role("dialog")
    expect(dialog).to_be_in_viewport(ratio=1, timeout=WAIT)
    expect(dialog.get_by_text("Keys work when no text field has the focus")).to_be_in_viewport()
    grid = dialog.locator("[data-testid='stDataFrame']")
    expect(grid).to_be_visible()
    lines = len(keys.label_keys(tax)) + len(by_key)
    assert grid.evaluate("e => e.getBoundingClientRect().height") >= 38 + 35 * lines
    eng.dispose()


def test_adjudicate_gold_starts_empty_is_refused_empty_and_is_set_by_keys(
    page: Page, server: str, demo_url: str, tax: Taxonomy
) -> None:
    pg = page
    eng = make_engine(demo_url)
    row = users.get_by_email(eng, RAVI)
    assert row is not None
    found = labeling.disagreements(eng, limit=200)
    queue = adjudication.reviewer_queue(eng, users.to_actor(row), found, 200)
    first, second = queue.entries[0], queue.entries[1]
    open_as(pg, f"{server}/adjudicate?as={row.id}")
    expect(pg.locator("h3", has_text=f"Case {first.key}")).to_be_visible(timeout=WAIT)
    _keys_ready(pg)
    # empty at the start: no decision picked, no reason
    form = pg.locator("[data-testid='stForm']")
    expect(form.get_by_text("Gold decision")).to_be_attached()
    expect(form.locator(PICKED)).to_have_count(0)
    # submitted empty by its key: refused next to the button, brought into view
    _focus_page(pg)
    pg.keyboard.press("Control+Enter")
    refused = pg.get_by_text(re.compile(r"Pick a gold decision first \(keys 1–5\)"))
    expect(refused).to_be_in_viewport(timeout=WAIT)
    assert labeling.gold_history(eng, first.case_id) == []
    # by keys: abstain (2) with the first reason (A), the note typed, Ctrl+Enter
    reason = next(iter(keys.reason_keys(tax)))
    pg.get_by_label("Note (why this is the gold label)").fill("The decisive clause is missing.")
    _focus_page(pg)
    pg.keyboard.press("2")
    pg.keyboard.press("a")
    pg.keyboard.press("Control+Enter")
    done = pg.get_by_text(f"Gold label set on {first.key}.")
    expect(done).to_be_in_viewport(timeout=WAIT)
    expect(pg.locator("h3", has_text=f"Case {second.key}")).to_be_visible(timeout=WAIT)
    gold = labeling.gold_history(eng, first.case_id)
    assert [(g.decision, g.reason_codes, g.adjudicator) for g in gold] == [
        ("abstain", (reason,), RAVI)
    ]
    # the next case's form starts empty again
    expect(form.locator(PICKED)).to_have_count(0)
    eng.dispose()
