"""Browser journey: build a variant in the Case builder and see it in its family.

Runs the page through the one-page router (tests/apps/one_page.py) with Debian's chromium, so
it works whether or not the page is registered in app.py yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.databases import copy_db
from tests.helpers.paths import ROOT
from tests.helpers.transact import write


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


def _earlier_variant(demo_url: str) -> str:
    """A variant of the family that already awaits confirmation (so the form has a choice)."""
    from review.admin import users
    from review.builder import variants
    from review.cases import cases
    from review.core.identity import SYSTEM
    from review.core.taxonomy import taxonomy
    from review.corpus import corpus
    from storage.db import make_engine

    eng = make_engine(demo_url)
    try:
        who = users.get_by_email(eng, "ines.duarte@brightwave.example")
        doc = corpus.find_document(eng, SYSTEM, "POL-REFUND-MONTHLY@2")
        base = cases.get_case(eng, key="CASE-001")
        assert who is not None and doc is not None and base is not None
        a = doc.body.index("14 days of the charge date")
        spec = variants.VariantSpec(
            "edited", operator="change_number", start=a, end=a + 7, params={"to_number": "30"}
        )
        saved = write(eng, variants.build_variant, users.to_actor(who), taxonomy(), base.id, spec)
        return saved.key
    finally:
        eng.dispose()


def test_build_a_variant_and_confirm_it_in_its_family(builder_server: str, demo_url: str) -> None:
    """A domain expert picks the operator by its name with the keyboard, previews and saves a
    variant; the family view's confirmation form is on that variant (not on the one that was
    already waiting) and shows its evidence state; confirming it by mouse saves the label."""
    from review.cases import cases
    from storage.db import make_engine

    earlier = _earlier_variant(demo_url)
    assert earlier == "CASE-001-CF-1"
    eng = make_engine(demo_url)
    base = cases.get_case(eng, key="CASE-001")
    assert base is not None
    with chromium_page(1400, 1100) as pg:
        pg.goto(f"{builder_server}/?case={base.id}")
        wait_idle(pg)
        expect(pg.get_by_role("heading", name="Base case CASE-001")).to_be_visible()
        # the operator by its display name, typed
        pg.get_by_role("combobox", name="Operator").click()
        expect(pg.get_by_role("option", name="Change the unit", exact=True)).to_be_visible()
        expect(pg.get_by_role("option", name="change_unit", exact=True)).to_have_count(0)
        pg.keyboard.type("Change the unit")
        pg.keyboard.press("Enter")
        wait_idle(pg)
        expect(pg.get_by_text("found by Change the unit")).to_be_visible()
        pg.get_by_role("combobox", name="to unit").click()
        pg.get_by_role("option", name="weeks", exact=True).click()
        pg.get_by_role("button", name="Preview the edit").click()
        wait_idle(pg)
        expect(pg.get_by_text("{+weeks+}").first).to_be_visible()
        pg.get_by_role("button", name="Save as a variant of FAM-REFUND-WINDOW").click()
        wait_idle(pg)
        expect(
            pg.get_by_text("Saved CASE-001-CF-2 (draft; Evidence removed; suggested Abstain)")
        ).to_be_visible()
        expect(pg.get_by_role("heading", name="Family FAM-REFUND-WINDOW")).to_be_visible()
        # the confirmation form is on the variant just saved, with its evidence state
        picker = pg.get_by_role("combobox", name="Variant", exact=True)
        expect(picker).to_have_value("CASE-001-CF-2 · Evidence removed")
        expect(pg.get_by_text("Evidence state: Evidence removed")).to_be_visible()
        expect(pg.get_by_text("Suggested by the operator Change the unit")).to_be_visible()
        pg.get_by_role("button", name="Confirm", exact=True).click()
        wait_idle(pg)
        expect(pg.get_by_text("CASE-001-CF-2: confirmed as Abstain; status ready.")).to_be_visible()
        # the earlier variant still waits: the form moves to it
        expect(picker).to_have_value(f"{earlier} · no evidence state")
        assert "family=FAM-REFUND-WINDOW" in pg.url
        expect(pg.locator("[data-testid='stException']")).to_have_count(0)
        assert pg.errors == []  # type: ignore[attr-defined]
    view = cases.get_case(eng, key="CASE-001-CF-2")
    eng.dispose()
    assert view is not None and view.family == "FAM-REFUND-WINDOW"
    assert (view.status, view.expected_decision, view.evidence_state) == (
        "ready",
        "abstain",
        "removed",
    )
