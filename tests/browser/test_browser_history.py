"""Browser journey of a threshold change into the History (issue 35, item 7): a product owner
proposes a change on the Thresholds page, another product owner signs it (set up through the
service), compliance approves it in the browser, and the History tab then opens on the
version in force compared with the version it replaced, in the words every header uses
("sign-off v5 · file version 3 (in force)" against "... (approved, replaced by version 5)"),
never against the proposal that was not approved.

Playwright drives Debian's chromium against `streamlit run app.py`; every assertion waits
(``expect``), so a loaded machine makes it slower, not flaky."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from review.admin import users
from review.core.taxonomy import load_taxonomy
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.thresholds import signing
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

PAULA = "paula.kim@brightwave.example"
OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"
TIMEOUT = 60_000


@pytest.fixture
def people(demo_url: str) -> dict[str, int]:
    """The signers' user ids (for ``?as=``); the demo's pending proposal stays pending, so the
    History has a proposal that was never approved beside the change in force."""
    eng = make_engine(demo_url)
    try:
        ids = {}
        for email in (PAULA, OMAR, CHEN):
            row = users.get_by_email(eng, email)
            assert row is not None
            ids[email] = row.id
        return ids
    finally:
        eng.dispose()


@pytest.fixture
def server(demo_url: str, people: dict[str, int], tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        yield base


@pytest.fixture
def pg(server: str) -> Iterator[Page]:
    with chromium_page(1280, 720, base=server) as page:
        yield page
    assert page.errors == []  # type: ignore[attr-defined]


def test_an_approved_change_opens_the_history_on_the_change_in_force(
    pg: Page, server: str, people: dict[str, int], demo_url: str
) -> None:
    eng = make_engine(demo_url)
    (stale,) = [v for v in signoff.versions(eng, inforce.KIND) if v.status == "pending"]
    before = inforce.in_force(eng).version
    assert before is not None
    # --- Paula proposes 0.55 -> 0.56 by keyboard on the Calibrate tab
    open_as(pg, f"{server}/thresholds?as={people[PAULA]}")
    wait_idle(pg)
    thumb = pg.get_by_role("slider").first
    thumb.focus()
    for _ in range(2):
        thumb.press("ArrowRight")
        wait_idle(pg)
    expect(thumb).to_have_value("0.56", timeout=TIMEOUT)
    pg.get_by_label("Rationale (goes into the change record)").fill("One step stricter.")
    pg.get_by_role("button", name="Propose for sign-off").click()
    wait_idle(pg)
    expect(pg.get_by_text(re.compile(r"Proposed as version \d+"))).to_be_visible(timeout=TIMEOUT)
    proposed = signoff.versions(eng, inforce.KIND)[0]
    assert proposed.author == PAULA and "refuse_below: 0.56" in proposed.yaml_text
    n = proposed.number
    # --- Omar signs as the other product owner
    omar = users.to_actor(users.get_by_email(eng, OMAR))  # type: ignore[arg-type]
    signing.sign_thresholds(
        eng,
        omar,
        load_taxonomy(),
        proposed.id,
        "approve",
        note="Product agrees.",
        confirm_failing_targets=True,
    )
    # --- Chen (compliance) approves it in the browser
    open_as(pg, f"{server}/thresholds?as={people[CHEN]}")
    wait_idle(pg)
    pg.get_by_role("tab", name="Sign-off").click()
    item = pg.locator(f".st-key-thr_proposal_{n}")
    item.get_by_label(re.compile(r"^Reason")).fill("Compliance accepts the lower coverage.")
    item.get_by_text("I approve this change although it fails these targets").click()
    item.get_by_role("button", name="Approve").click()
    wait_idle(pg)
    expect(
        pg.get_by_text(f"Version {n} approved as Compliance: it is the policy in force now.")
    ).to_be_visible(timeout=TIMEOUT)
    # --- the History opens on the change in force, in the words of every header
    allv = signoff.versions(eng, inforce.KIND)
    now = next(v for v in allv if v.id == proposed.id)
    assert now.status == "approved" and now.parent_id == before.id
    heading_now = f"sign-off v{n} · file version {now.file_version} (in force)"
    heading_was = (
        f"sign-off v{before.number} · file version {before.file_version} "
        f"(approved, replaced by version {n})"
    )
    heading_stale = (
        f"sign-off v{stale.number} · file version {stale.file_version} "
        f"(stale: superseded by version {n})"
    )
    assert policy_display.version_heading(now, now.id, versions=allv) == heading_now
    pg.get_by_role("tab", name="History").click()
    wait_idle(pg)
    expect(
        pg.get_by_text(
            f"The change in force: {heading_now} against the version it replaced, {heading_was}."
        )
    ).to_be_visible(timeout=TIMEOUT)
    # the pickers start from the same change
    expect(pg.get_by_role("combobox", name="Compare")).to_have_value(heading_was)
    expect(pg.get_by_role("combobox", name="with")).to_have_value(heading_now)
    diff = pg.locator("[data-testid='stCode']").filter(has_text=f"--- {heading_was}")
    expect(diff).to_contain_text(f"+++ {heading_now}")
    expect(diff).to_contain_text("+    refuse_below: 0.56")
    expect(diff).not_to_contain_text(heading_stale)
    # the proposal never approved is offered in the same words, not as the default
    pg.get_by_role("combobox", name="Compare").click()
    expect(pg.get_by_role("option", name=heading_stale)).to_be_visible(timeout=TIMEOUT)
    pg.keyboard.press("Escape")
    eng.dispose()
