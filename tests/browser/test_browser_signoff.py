"""Browser journey of product owners and compliance: a product owner proposes a threshold
change that fails release targets and sees its headline with the failing targets in red; the
other product owner opens it from Overview's "needs your attention" straight onto the Sign-off
tab and cannot approve it without a reason and the confirmation; compliance does the same and
approves with a reason; the controls then show the version in force.

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
    """The demo's signers by email (user ids for ``?as=``), with the demo's pending proposal
    rejected so the journey's proposal is the one waiting."""
    eng = make_engine(demo_url)
    try:
        ids = {}
        for email in (PAULA, OMAR, CHEN):
            row = users.get_by_email(eng, email)
            assert row is not None
            ids[email] = row.id
        chen = users.to_actor(users.get_by_email(eng, CHEN))  # type: ignore[arg-type]
        for v in signoff.versions(eng, inforce.KIND):
            if v.status == "pending":
                signing.sign_thresholds(
                    eng, chen, load_taxonomy(), v.id, "reject", note="Cleared for the journey."
                )
        return ids
    finally:
        eng.dispose()


@pytest.fixture
def server(demo_url: str, people: dict[str, int], tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        yield base


@pytest.fixture
def pg(server: str) -> Iterator[Page]:
    with chromium_page(base=server) as page:
        yield page
    assert page.errors == []  # type: ignore[attr-defined]


def _open_from_overview(pg: Page, base: str, who: int, number: int) -> None:
    """Overview's attention item for version ``number`` opens the Sign-off tab on it."""
    open_as(pg, f"{base}/?as={who}")
    wait_idle(pg)
    expect(pg.get_by_role("heading", name="Needs your attention")).to_be_visible(timeout=TIMEOUT)
    pg.get_by_role("link", name=f"Open Thresholds: version {number} on the Sign-off tab").click()
    wait_idle(pg)
    expect(pg.get_by_role("heading", name="Thresholds", exact=True)).to_be_visible(timeout=TIMEOUT)
    expect(pg.get_by_role("tab", name="Sign-off")).to_have_attribute(
        "aria-selected", "true", timeout=TIMEOUT
    )
    expect(pg.get_by_text("Opened from a link to this proposal.")).to_be_visible(timeout=TIMEOUT)


def _sign_form(pg: Page, number: int):
    return pg.locator(f".st-key-thr_proposal_{number}")


def test_a_change_that_fails_targets_is_approved_only_with_reasons(
    pg: Page, server: str, people: dict[str, int], demo_url: str
) -> None:
    # --- Paula proposes: with nothing proposed the page says so; her change fails targets
    open_as(pg, f"{server}/thresholds?as={people[PAULA]}")
    wait_idle(pg)
    expect(pg.get_by_text("Nothing is proposed: the sliders are at the thresholds")).to_be_visible(
        timeout=TIMEOUT
    )
    expect(pg.get_by_text(re.compile(r"\d+ of \d+ targets? fail"))).to_have_count(0)
    thumb = pg.get_by_role("slider").first
    thumb.focus()
    for _ in range(40):  # 0.55 -> 0.60 in steps of 0.005, by keyboard
        value = float(thumb.input_value())
        if abs(value - 0.6) < 1e-9:
            break
        thumb.press("ArrowRight" if value < 0.6 else "ArrowLeft")
        wait_idle(pg)
    expect(thumb).to_have_value("0.6", timeout=TIMEOUT)
    headline = pg.locator(".st-key-thr_headline_calibrate")
    expect(headline.get_by_text("Coverage", exact=True)).to_be_visible(timeout=TIMEOUT)
    failing = headline.get_by_text("fails target", exact=True).first
    expect(failing).to_be_visible(timeout=TIMEOUT)
    # red: the badge's colour is a red (Streamlit's red badge)
    colour = failing.evaluate("e => getComputedStyle(e).color")
    r, g, b = (int(x) for x in re.findall(r"\d+", colour)[:3])
    assert r > 150 and g < 120 and b < 120, colour
    expect(
        headline.get_by_text(re.compile(r"The proposal fails \d+ of \d+ release"))
    ).to_be_visible()
    pg.get_by_label("Rationale (goes into the change record)").fill(
        "Fewer unsupported answers on plan questions, at a cost in coverage."
    )
    pg.get_by_role("button", name="Propose for sign-off").click()
    wait_idle(pg)
    expect(pg.get_by_text(re.compile(r"Proposed as version \d+"))).to_be_visible(timeout=TIMEOUT)
    eng = make_engine(demo_url)
    try:
        v = signoff.versions(eng, inforce.KIND)[0]
    finally:
        eng.dispose()
    assert v.author == PAULA and v.status == "pending" and "refuse_below: 0.6" in v.yaml_text
    n = v.number
    # her Overview says it waits, for whom
    open_as(pg, f"{server}/?as={people[PAULA]}")
    wait_idle(pg)
    expect(
        pg.get_by_text(f"Your proposal v{n} (threshold change) waits for compliance and product")
    ).to_be_visible(timeout=TIMEOUT)

    # --- Omar (product owner) opens it from Overview; Approve needs a reason and the tick
    _open_from_overview(pg, server, people[OMAR], n)
    item = _sign_form(pg, n)
    expect(
        item.locator(".st-key-thr_headline_" + str(n)).get_by_text("fails target").first
    ).to_be_visible(timeout=TIMEOUT)
    item.get_by_role("button", name="Approve").click()
    wait_idle(pg)
    expect(item.get_by_text(f"Version {n} was not approved")).to_be_visible(timeout=TIMEOUT)
    expect(item.get_by_text("needs a written reason and the confirmation")).to_be_visible()
    item.get_by_label(re.compile(r"^Reason")).fill("Support agreed: unsupported answers first.")
    item.get_by_role("button", name="Approve").click()
    wait_idle(pg)
    expect(item.get_by_text("needs the confirmation that you approve it anyway")).to_be_visible(
        timeout=TIMEOUT
    )
    item.get_by_text("I approve this change although it fails these targets").click()
    item.get_by_role("button", name="Approve").click()
    wait_idle(pg)
    expect(
        pg.get_by_text(f"Version {n} approved as Product owner; it still needs: Compliance.")
    ).to_be_visible(timeout=TIMEOUT)

    # --- Chen (compliance) opens it from Overview and approves with a reason
    _open_from_overview(pg, server, people[CHEN], n)
    item = _sign_form(pg, n)
    item.get_by_label(re.compile(r"^Reason")).fill("Compliance accepts the lower coverage.")
    item.get_by_text("I approve this change although it fails these targets").click()
    item.get_by_role("button", name="Approve").click()
    wait_idle(pg)
    expect(
        pg.get_by_text(f"Version {n} approved as Compliance: it is the policy in force now.")
    ).to_be_visible(timeout=TIMEOUT)
    # the controls show the version in force
    expect(pg.get_by_text(re.compile(rf"In force: sign-off v{n}\b"))).to_be_visible(timeout=TIMEOUT)
    expect(
        pg.get_by_text("Nothing is proposed: no change is waiting for sign-off.")
    ).to_be_visible()
    pg.get_by_role("tab", name="Calibrate and propose").click()
    expect(pg.get_by_role("slider").first).to_have_value("0.6")
    expect(pg.get_by_text("current: 0.6)").first).to_be_visible()
    expect(pg.get_by_text("Nothing is proposed: the sliders are at the thresholds")).to_be_visible()

    eng = make_engine(demo_url)
    try:
        done = signoff.get_version(eng, v.id)
        assert done.status == "approved"
        assert sorted(s.note for s in done.signatures) == [
            "Compliance accepts the lower coverage.",
            "Support agreed: unsupported answers first.",
        ]
        assert all(s.metrics_snapshot["approved_despite"]["confirmed"] for s in done.signatures)
        assert signoff.verify_chain(eng) == []
    finally:
        eng.dispose()
