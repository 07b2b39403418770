"""Browser journey: build a variant in the Case builder and see it in its family.

Runs the page through the one-page router (tests/apps/one_page.py) with Debian's chromium, so
it works whether or not the page is registered in app.py yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.databases import copy_db
from tests.helpers.guideshots import guide_shot
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
        pg.get_by_text("{+weeks+}").first.scroll_into_view_if_needed()
        guide_shot(pg, "expert-preview")
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
        guide_shot(pg, "expert-confirm")
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


# ------------------------------------------------------------------------------------------
# Issue 35, item 1: a question answered by three documents, one edit over all of them

CITIES = ["Moscow", "Paris", "Berlin"]


def _three_sources(demo_url: str) -> int:
    """A case whose answer three documents each state (a multi-hop data set's shape), written
    by the domain expert who builds from it (Ines)."""
    from review.admin import users
    from review.cases import cases
    from review.core.identity import SYSTEM
    from review.core.taxonomy import taxonomy
    from review.corpus import corpus
    from review.corpus.docformat import parse_markdown
    from storage.db import make_engine

    tax = taxonomy()
    eng = make_engine(demo_url)
    try:
        docs = [
            parse_markdown(
                f"---\ndoc_id: HOP-{i}\nversion: 1\ntitle: Hop {i}\nauthority: faq\nowner: Ops\n"
                "access_scope: public\njurisdiction: global\n---\n# Hop "
                f"{i}\n\nWhat happened in 2018?\n\nSource {i} states that the 2018 final was "
                f"played in {city} before a full house.\n\nThe rest is about the group stage.\n",
                f"hop{i}.md",
                tax,
            )
            for i, city in enumerate(CITIES)
        ]
        corpus.import_documents(eng, SYSTEM, docs)
        item = cases.validate_case(
            {
                "key": "HOP-CASE",
                "question": "Where was the 2018 final played?",
                "required_claims": ["The 2018 final was played in Moscow."],
                "identity": {"name": "customer", "scopes": ["public"]},
                "documents": [
                    {
                        "doc_id": f"HOP-{i}",
                        "version": 1,
                        "visibility": "visible",
                        "role": "decisive",
                    }
                    for i in range(3)
                ],
                "expected_decision": "answer",
                "category": "in_scope",
                "split": "train",
                "family": "FAM-HOP",
                "evidence_state": "present",
            },
            "hop",
            1,
            tax,
        )
        ines = users.get_by_email(eng, "ines.duarte@brightwave.example")
        assert ines is not None
        return int(write(eng, cases.create_case, users.to_actor(ines), item, tax))
    finally:
        eng.dispose()


def test_remove_the_answer_from_three_decisive_documents_in_one_edit(
    builder_server: str, demo_url: str
) -> None:
    """A domain expert opens the builder on a case that three documents answer, picks "Remove
    the answer", which starts on every decisive document; sees three previews, saves, and
    finds the suggestion Abstain and one edit of the three documents in the family view."""
    case_id = _three_sources(demo_url)
    with chromium_page(1400, 1100) as pg:
        pg.goto(f"{builder_server}/?case={case_id}")
        wait_idle(pg)
        expect(pg.get_by_role("heading", name="Base case HOP-CASE")).to_be_visible()
        pg.get_by_role("combobox", name="Operator").click()
        pg.keyboard.type("Remove the answer")
        pg.keyboard.press("Enter")
        wait_idle(pg)
        pg.get_by_role("combobox", name="Candidate spans").click()
        pg.get_by_role("option", name="Source 0 states that the 2018 final").click()
        wait_idle(pg)
        # the other two decisive documents are in the same edit from the start
        also = pg.get_by_role("combobox", name="Also take it out of these decisive documents")
        expect(also).to_be_visible()
        expect(pg.get_by_text("HOP-1@1", exact=True).first).to_be_visible()
        expect(pg.get_by_text("HOP-2@1", exact=True).first).to_be_visible()
        pg.get_by_role("button", name="Preview the edit").click()
        wait_idle(pg)
        expect(pg.get_by_text("One edit of 3 decisive documents")).to_be_visible()
        for i, city in enumerate(CITIES):
            # the reference as the page writes it: a word joiner after "@" (no mail link)
            expect(pg.locator("strong", has_text=f"{i + 1}. HOP-{i}@\u20601")).to_be_visible()
            expect(
                pg.get_by_text(f"[-Source {i} states that the 2018 final was played in {city}")
            ).not_to_have_count(0)
        pg.get_by_role("button", name="Save as a variant of FAM-HOP").click()
        wait_idle(pg)
        expect(
            pg.get_by_text("Saved HOP-CASE-CF-1 (draft; Evidence removed; suggested Abstain)")
        ).to_be_visible()
        expect(pg.get_by_role("heading", name="Family FAM-HOP")).to_be_visible()
        expect(
            pg.get_by_text(
                "Suggested by the operator Remove the answer: Abstain (No answer-bearing evidence)"
            )
        ).to_be_visible()
        pg.get_by_text("HOP-CASE-CF-1 · Evidence removed · Draft", exact=True).click()
        expect(
            pg.get_by_text(
                "One edit of 3 documents: Remove the answer on HOP-0@1, HOP-1@1, HOP-2@1 by "
                "Inés Duarte"
            )
        ).to_be_visible()
        expect(pg.locator("[data-testid='stException']")).to_have_count(0)
        assert pg.errors == []  # type: ignore[attr-defined]


def test_forbid_three_decisive_documents_after_seeing_what_happens_to_each(
    builder_server: str, demo_url: str
) -> None:
    """The evidence-state form works on every decisive document too: forbidding the answer
    to the identity previews what happens to each of the three (a restricted copy replaces
    each public one), then saves one variant suggesting Abstain whose checks all pass."""
    case_id = _three_sources(demo_url)
    with chromium_page(1400, 1100) as pg:
        pg.goto(f"{builder_server}/?case={case_id}")
        wait_idle(pg)
        pg.get_by_role("tab", name="Evidence-state variant").click()
        pg.get_by_text("Evidence forbidden", exact=True).click()
        wait_idle(pg)
        expect(
            pg.get_by_role("combobox", name="Decisive documents to forbid to the identity")
        ).to_be_visible()
        for i, city in enumerate(CITIES):  # each document's decisive passage, for the checks
            box = pg.get_by_role("textbox", name=re.compile(rf"Decisive passage.*HOP\W{{0,2}}{i}@"))
            box.fill(
                f"Source {i} states that the 2018 final was played in {city} before a full house."
            )
        pg.get_by_role("button", name="Preview the variant").click()
        wait_idle(pg)
        for i in range(3):
            expect(pg.locator("strong", has_text=f"{i + 1}. HOP-{i}@\u20601")).to_be_visible()
            expect(
                pg.get_by_text(f"replaced by a copy HOP-{i}-CF-1@\u20601 in scope 'restricted'")
            ).to_be_visible()
        pg.get_by_role("button", name="Build and save the variant").click()
        wait_idle(pg)
        expect(
            pg.get_by_text("Saved HOP-CASE-CF-1 (draft; Evidence forbidden; suggested Abstain)")
        ).to_be_visible()
        expect(pg.get_by_role("heading", name="Family FAM-HOP")).to_be_visible()
        expect(pg.get_by_text(re.compile(r"^All \d+ checks pass\.$"))).to_be_visible()
        expect(pg.locator("[data-testid='stException']")).to_have_count(0)
        assert pg.errors == []  # type: ignore[attr-defined]
