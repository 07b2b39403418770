"""AppTest of the Case builder page: landing, builder view, family view, every form's happy and
error path, roles, clearance, and escaped diffs. Runs the page through the one-page router
(tests/pagetest.py) so it works before and after the page is registered in app.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.builder import blinding, variants
from review.cases import cases
from review.core import clearance
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from review.demo import case_families
from review.labels import blind, labeling
from storage.db import make_engine, migrate, read_session
from storage.models import Case, CaseSuggestion
from tests.helpers.actors import make_actor
from tests.helpers.databases import copy_db
from tests.helpers.pages import ADA, INES, PAULA, no_exception, page_app, readable
from tests.helpers.placement import said_under
from tests.helpers.transact import write


@pytest.fixture
def demo_url(tmp_path: Path, demo_base_template: Path) -> str:
    """These tests build their own variants: start from the demo without them."""
    return copy_db(demo_base_template, tmp_path)


PAGE = "pages/builder_page.py"
RAVI = "ravi.menon@brightwave.example"
FAMILY = "FAM-REFUND-WINDOW"


def open_page(url: str, monkeypatch: pytest.MonkeyPatch, user: str, **query: str) -> AppTest:
    at = page_app(url, monkeypatch, PAGE, user, **query).run()
    no_exception(at)
    assert readable(at.title[0]) == "Case builder"
    return at


def cid(engine: Engine, key: str) -> int:
    with read_session(engine) as s:
        found = s.scalar(select(Case.id).where(Case.key == key))
    assert found is not None
    return int(found)


def by_label(widgets: object, label: str) -> object:
    for w in widgets:  # type: ignore[attr-defined]
        if readable(w.label).startswith(label):
            return w
    raise AssertionError(f"no widget labelled {label!r}")


def click(at: AppTest, label: str) -> AppTest:
    button = next(b for b in at.button if readable(b.label).startswith(label))
    button.click().run()
    no_exception(at)
    return at


def codes(at: AppTest) -> list[str]:
    return [c.value for c in at.code]


def add_variant(engine: Engine, tax: Taxonomy) -> variants.SavedVariant:
    who = users.get_by_email(engine, INES)
    assert who is not None
    doc = corpus.find_document(engine, SYSTEM, "POL-REFUND-MONTHLY@2")
    assert doc is not None
    a = doc.body.index("14 days of the charge date")
    spec = variants.VariantSpec(
        "edited", operator="change_unit", start=a, end=a + 26, params={"to_unit": "weeks"}
    )
    return write(
        engine, variants.build_variant, users.to_actor(who), tax, cid(engine, "CASE-001"), spec
    )


@pytest.fixture
def blank_url(tmp_path: Path) -> str:
    """One admin/annotator with clearance and nothing else."""
    url = f"sqlite:///{tmp_path / 'blank.db'}"
    eng = make_engine(url)
    migrate(eng)
    users.add_user(eng, SYSTEM, "solo@example.org", "Solo", ["admin", "annotator"], True)
    eng.dispose()
    return url


# ------------------------------------------------------------------------------------------
# Rendering


CONFIRM_HEADING = "**Confirm a suggested label**"


def saved_message(at: AppTest) -> str:
    """What saving a variant said: under the heading of the family view's form that confirms
    its label (where the next step is), not at the top of the page (issue 35 item 4)."""
    said = said_under(at, CONFIRM_HEADING)
    assert len(said) == 1, said
    return said[0]


def test_landing_lists_base_cases_and_families(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, ADA)
    assert not at.error
    base, fams = at.dataframe[0].value, at.dataframe[1].value
    assert list(base["case"])[:2] == ["CASE-001", "CASE-005"] and len(base) == 15
    assert FAMILY in list(fams["family"]) and len(fams) == 15


def test_the_landing_stops_counting_base_cases_at_its_limit(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the limit the caption says "more than" and the pages reach the counted cases
    (each case is tested for blindness: an exact count read all 500,000 in 1.3 s)."""
    monkeypatch.setattr(blinding, "BASE_COUNT_LIMIT", 10)
    at = open_page(demo_url, monkeypatch, ADA)
    assert not at.error
    shown = [readable(c) for c in at.caption]
    assert "Showing 1–10 of more than 10 (counting stopped there) · page 1 of more than 1" in shown
    monkeypatch.setattr(blinding, "BASE_COUNT_LIMIT", 15)  # exactly the 15 there are
    at = open_page(demo_url, monkeypatch, ADA)
    assert "Showing 1–15 of 15 · page 1 of 1" in [readable(c) for c in at.caption]


def test_the_base_case_count_equals_the_listing_up_to_any_limit(demo_engine: Engine) -> None:
    """As each role sees them: the blind cases are neither listed nor counted."""
    with demo_engine.begin() as c:  # CASE-005 waits for its labels: blind to the annotators
        c.execute(
            text("DELETE FROM labels WHERE case_id = :c"), {"c": cid(demo_engine, "CASE-005")}
        )
        c.execute(text("UPDATE cases SET created_by = 'someone@else' WHERE key = 'CASE-005'"))
    blinded = 0
    waiting_for_clearance = 0  # base cases relying on a restricted document, not labeled yet
    for who in (ADA, INES, PAULA, RAVI):
        person = users.get_by_email(demo_engine, who)
        assert person is not None, who
        actor = users.to_actor(person)
        seen = blind.sight(demo_engine, actor)
        listed = blinding.base_cases(demo_engine, seen, page_size=500, viewer=actor)
        if who == ADA:  # blind to nobody's labels: every base case
            with read_session(demo_engine) as s:
                hidden = clearance.restricted_cases(s, [b.id for b in listed])
            waiting_for_clearance = sum(
                1
                for b in listed
                if b.id in hidden and not labeling.current_labels(demo_engine, b.id)
            )
        n = len(listed)
        blinded += 15 - n  # the demo's 15 base cases, less those blind to this user
        assert blinding.count_base_cases(demo_engine, seen, limit=10_000) == (n, False)
        assert blinding.count_base_cases(demo_engine, seen, limit=n) == (n, False)
        if n:
            assert blinding.count_base_cases(demo_engine, seen, limit=n - 1) == (n - 1, True)
        assert blinding.count_base_cases(demo_engine, seen, "refund", limit=10_000)[0] == len(
            blinding.base_cases(demo_engine, seen, "refund", page_size=500, viewer=actor)
        )
    # Ines and Ravi label; Ada and Paula do not. Besides CASE-005, a base case that relies on
    # a restricted document waits for annotators with clearance: blind to both until labeled
    assert waiting_for_clearance >= 1
    assert blinded == 2 + 2 * waiting_for_clearance


def test_landing_on_an_empty_database(blank_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(blank_url, monkeypatch, "solo@example.org")
    assert not at.error
    assert any("No evidence-present cases yet" in readable(i) for i in at.info)
    assert any(readable(c) == "No families yet." for c in at.caption)


@pytest.mark.parametrize("query", [{"case": "1"}, {"family": FAMILY}, {"case": "2"}])
def test_views_render_with_demo_data(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, query: dict[str, str]
) -> None:
    at = open_page(demo_url, monkeypatch, ADA, **query)
    assert not at.error
    if query.get("case") == "2":  # not an evidence-present case: pointed at its family
        assert any("evidence-present case of a family" in readable(w) for w in at.warning)


def test_unknown_case_or_family_is_an_error(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, ADA, case="9999")
    assert readable(at.error[0]) == "Case 9999 does not exist."
    at = open_page(demo_url, monkeypatch, ADA, family="FAM-NOPE")
    assert readable(at.error[0]) == "Family FAM-NOPE does not exist."
    # the guide's ?case= takes a case key too, the name every list shows; an unknown key is said
    at = open_page(demo_url, monkeypatch, ADA, case="CASE-005")
    assert not at.error
    assert any(readable(h) == "Base case CASE-005" for h in at.subheader)
    at = open_page(demo_url, monkeypatch, ADA, case="CASE-NOPE")
    assert [readable(e) for e in at.error] == [
        "There is no case 'CASE-NOPE': the link names a case id (a number) or key."
    ]


# ------------------------------------------------------------------------------------------
# Edit a document: preview and save


def test_preview_marks_the_change_and_saves_a_variant(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = add_variant(demo_engine, tax)  # another variant already awaits confirmation
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    operator = by_label(at.selectbox, "Operator")
    assert "Change the unit" in operator.options  # type: ignore[attr-defined]
    assert "change_unit" not in operator.options  # type: ignore[attr-defined]
    operator.set_value("change_unit").run()  # type: ignore[attr-defined]
    spans = by_label(at.selectbox, "Candidate spans")
    assert readable(spans.label) == "Candidate spans (5 found by Change the unit)"  # type: ignore[attr-defined]
    by_label(at.selectbox, "to unit").set_value("weeks")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert not at.error
    before, after = codes(at)[1], codes(at)[2]
    assert "within **14 [-days-] of the charge date**" in before
    assert "within **14 {+weeks+} of the charge date**" in after
    diff = at.dataframe[0].value
    assert list(diff["change"]) == ["same", "changed", "same"]
    assert "Evidence removed" in list(at.dataframe[1].value["suggestion"])
    click(at, "Save as a variant of FAM-REFUND-WINDOW")
    assert at.query_params["family"] == FAMILY
    assert "Saved CASE-001-CF-2 (draft; Evidence removed; suggested Abstain)" in saved_message(at)
    view = cases.get_case(demo_engine, key="CASE-001-CF-2")
    assert view is not None and view.status == "draft"
    assert view.documents[0].ref == "POL-REFUND-MONTHLY-CF-2@1"
    # the confirmation form opens on the variant just saved, not on the earlier one
    picker = by_label(at.selectbox, "Variant")
    assert picker.value == view.id != earlier.case_id  # type: ignore[attr-defined]
    assert readable(picker.format_func(picker.value)) == "CASE-001-CF-2 · Evidence removed"  # type: ignore[attr-defined]
    assert any(readable(m) == "**Evidence state:** Evidence removed" for m in at.markdown)
    assert any("the operator Change the unit" in readable(c) for c in at.caption)


def test_preview_refusal_is_shown_and_nothing_is_saved(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    drafts = cases.count_cases(demo_engine, cases.CaseFilter(status="draft"))
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    by_label(at.selectbox, "Operator").set_value("change_unit").run()  # type: ignore[attr-defined]
    by_label(at.selectbox, "to unit").set_value("days")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert "Nothing changed." in readable(at.error[0])
    assert "already in 'days'" in readable(at.error[0])
    assert not [b for b in at.button if b.label.startswith("Save as a variant")]
    assert cases.count_cases(demo_engine, cases.CaseFilter(status="draft")) == drafts


def test_save_the_edited_document_only(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    by_label(at.selectbox, "Operator").set_value("swap_year").run()  # type: ignore[attr-defined]
    by_label(at.text_input, "to year").input("2023")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert not at.error
    click(at, "Save the edited document only")
    # said where the preview and its button were (the save closes the preview)
    (said,) = said_under(at, "Preview the edit")
    assert said.startswith("Saved POL-REFUND-MONTHLY-CF-1@1 with provenance")
    doc = corpus.find_document(demo_engine, SYSTEM, "POL-REFUND-MONTHLY-CF-1@1")
    assert doc is not None and "1 March 2023" in doc.body


def test_typed_parameters_are_checked_in_the_form(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    by_label(at.selectbox, "Operator").set_value("swap_year").run()  # type: ignore[attr-defined]
    by_label(at.text_input, "to year").input("next year")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert "parameter to_year: 'next year' is not a whole number" in readable(at.error[0])


def test_diff_text_is_escaped_and_never_rendered(
    blank_url: str, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(blank_url)
    doc = parse_markdown(
        "---\ndoc_id: EVIL\nversion: 1\ntitle: Tricky\nauthority: faq\nowner: Ops\n"
        "access_scope: public\njurisdiction: global\n---\n# Tricky\n\n"
        "The Team tier [-keeps-] {+this+} <script>alert(1)</script> "
        "![x](http://example.invalid/x.png) for 30 days.\n",
        "evil.md",
        tax,
    )
    corpus.import_documents(eng, SYSTEM, [doc])
    item = cases.validate_case(
        {
            "key": "T-1",
            "question": "How long does the Team tier keep it?",
            "required_claims": ["Team keeps it for 30 days."],
            "identity": {"name": "customer", "scopes": ["public"]},
            "documents": [
                {"doc_id": "EVIL", "version": 1, "visibility": "visible", "role": "decisive"}
            ],
            "expected_decision": "answer",
            "category": "in_scope",
            "split": "train",
            "family": "FAM-T",
            "evidence_state": "present",
        },
        "t",
        1,
        tax,
    )
    solo = users.get_by_email(eng, "solo@example.org")
    assert solo is not None
    # written by the annotator who builds from it: a ready case someone else wrote would be
    # blind to them until they label it (review/cases/sight.py)
    case_id = write(eng, cases.create_case, users.to_actor(solo), item, tax)
    eng.dispose()
    at = open_page(blank_url, monkeypatch, "solo@example.org", case=str(case_id))
    by_label(at.selectbox, "Operator").set_value("change_unit").run()  # type: ignore[attr-defined]
    by_label(at.selectbox, "to unit").set_value("weeks")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    before = codes(at)[1]
    assert "[\\-keeps\\-] {\\+this\\+} <script>alert(1)</script>" in before
    assert "30 [-days-]" in before
    rendered = " ".join(readable(m) for m in at.markdown)
    assert "<script>" not in rendered and "example.invalid" not in rendered


# ------------------------------------------------------------------------------------------
# Evidence-state variants and the decisive passage


def test_partial_variant_form(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    at.radio[0].set_value("partial").run()
    click(at, "Build and save the variant")
    assert "extra_claim: must not be empty" in readable(at.error[0])
    by_label(at.text_input, "New required claim").input(  # type: ignore[attr-defined]
        "Refunds arrive within 3 business days."
    )
    by_label(at.text_input, "Second part of the question").input(  # type: ignore[attr-defined]
        "how soon does the money arrive"
    )
    click(at, "Build and save the variant")
    assert at.query_params["family"] == FAMILY
    said = saved_message(at)
    assert "Saved CASE-001-CF-1 (draft; Evidence partial; suggested Partial answer)" in said
    assert any(readable(m) == "**Evidence state:** Evidence partial" for m in at.markdown)
    detail = next(e for e in at.expander if readable(e.label).startswith("CASE-001-CF-1"))
    claims = detail.dataframe[0].value
    assert list(claims["support"]) == ["supported", "loses support"]


def test_removed_variant_needs_an_exact_passage(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    area = by_label(at.text_area, "Decisive passage (copy it exactly")
    area.input("A customer may ask for a refund whenever they like.")  # type: ignore[attr-defined]
    click(at, "Build and save the variant")
    assert "does not occur in the document" in readable(at.error[0])
    area = by_label(at.text_area, "Decisive passage (copy it exactly")
    area.input("within **14 days of the charge date**")  # type: ignore[attr-defined]
    click(at, "Build and save the variant")
    assert "Saved CASE-001-CF-1 (draft; Evidence removed; suggested Abstain)" in saved_message(at)


def test_mark_the_decisive_passage(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, INES, case=str(cid(demo_engine, "CASE-001")))
    by_label(at.text_area, "Decisive passage (exact text").input("Not in any document.")  # type: ignore[attr-defined]
    click(at, "Mark as decisive")
    assert "does not occur in any visible document" in readable(at.error[0])
    by_label(at.text_area, "Decisive passage (exact text").input(  # type: ignore[attr-defined]
        "within **14 days of the charge date**"
    )
    click(at, "Mark as decisive")
    assert readable(at.success[0]) == "Marked the decisive passage in POL-REFUND-MONTHLY@2."
    fam = open_page(demo_url, monkeypatch, INES, family=FAMILY)
    assert any(c.value == "within **14 days of the charge date**" for c in fam.code)
    assert any("All" in readable(s) and "checks pass" in readable(s) for s in fam.success)


# ------------------------------------------------------------------------------------------
# Family view: checks, confirmation, claims, replay


def test_family_view_confirms_a_suggestion(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = add_variant(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, family=FAMILY)
    table = at.dataframe[0].value
    row = table[table["case"] == saved.key].iloc[0]
    assert row["expected"] == "awaiting confirmation"
    assert row["suggested"] == "Abstain (Required claim not covered)"
    assert row["evidence state"] == "Evidence removed"
    assert row["confirmed"] == "no"
    assert "POL-REFUND-MONTHLY-CF-1@1 (visible, distractor, public)" in row["documents"]
    # error path: a refusal without a reason
    by_label(at.multiselect, "Reason codes").set_value([])  # type: ignore[attr-defined]
    click(at, "Confirm")
    assert "needs at least one reason code" in readable(at.error[0])
    by_label(at.multiselect, "Reason codes").set_value(  # type: ignore[attr-defined]
        ["required_claim_not_covered"]
    )
    click(at, "Confirm")
    # the form is gone with the last suggestion: said where it was
    assert said_under(at, "Every suggestion in this family is confirmed.") == [
        f"{saved.key}: confirmed as Abstain; status ready."
    ]
    with read_session(demo_engine) as s:
        sug = s.get(CaseSuggestion, saved.case_id)
        assert sug is not None and sug.confirmed_by == RAVI
    table = at.dataframe[0].value
    row = table[table["case"] == saved.key].iloc[0]
    assert row["confirmed"] == "by Ravi Menon"  # a name, not an e-mail address
    assert row["expected"] == "Abstain (Required claim not covered)"


def test_family_view_claims_editor_and_replay(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = add_variant(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, INES, family=FAMILY)
    detail = next(e for e in at.expander if readable(e.label).startswith(saved.key))
    detail.text_area[0].input("Same claim.\nSame claim.")
    detail.button[0].click().run()
    no_exception(at)
    assert "listed twice" in readable(at.error[0])
    detail = next(e for e in at.expander if readable(e.label).startswith(saved.key))
    detail.text_area[0].input("First claim.\nSecond claim.")
    detail.button[0].click().run()
    no_exception(at)
    assert said_under(at, "Save the claims") == [f"Saved the required claims of {saved.key}."]
    view = cases.get_case(demo_engine, case_id=saved.case_id)
    assert view is not None and view.required_claims == ("First claim.", "Second claim.")
    replay = next(b for b in at.button if b.label == "Replay this edit")
    replay.click().run()
    no_exception(at)
    assert any("gives exactly POL-REFUND-MONTHLY-CF-1@1" in readable(s) for s in at.success)


def test_checks_against_another_passage(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page(demo_url, monkeypatch, INES, family=FAMILY)
    by_label(at.text_area, "Check against another passage").input(  # type: ignore[attr-defined]
        "This policy covers Team and Business"
    )
    click(at, "Run the checks with this passage")
    assert any("checks fail" in readable(e) for e in at.error)
    checks = at.dataframe[1].value
    failing = checks[checks["result"] == "FAIL"]
    assert "CASE-002" in list(failing["variant"])
    click(at, "Use the recorded passage")
    assert any(
        readable(c) == "Decisive passage used by the checks: none recorded" for c in at.caption
    )


# ------------------------------------------------------------------------------------------
# Roles and clearance


def test_product_owner_sees_but_cannot_build_or_confirm(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_variant(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, PAULA, case=str(cid(demo_engine, "CASE-001")))
    assert any("Building variants needs a role" in readable(i) for i in at.info)
    assert not [b for b in at.button if b.label.startswith(("Build", "Mark"))]
    fam = open_page(demo_url, monkeypatch, PAULA, family=FAMILY)
    assert any("Confirming labels needs a role" in readable(i) for i in fam.info)
    assert not [b for b in fam.button if b.label in ("Confirm", "Save the claims")]


def test_restricted_documents_need_clearance(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    memo_case = str(cid(demo_engine, "CASE-044"))
    # labeled by two annotators with clearance (its text relies on the restricted memo), so it
    # no longer waits for Ines's label and she may build from it
    for n in (1, 2):
        labeler = make_actor("annotator", f"cleared{n}@example.org", clearance=True)
        labeling.submit(demo_engine, labeler, int(memo_case), labeling.LabelIn("answer"), None, tax)
    at = open_page(demo_url, monkeypatch, INES, case=memo_case)
    options = by_label(at.selectbox, "Document to edit").options  # type: ignore[attr-defined]
    assert options == ["PROD-PLANS@2 · visible, context"]  # the memo is not offered
    assert all("list price changes for 2026" not in c.value for c in at.code)
    assert any("no visible decisive document you may read" in readable(i) for i in at.info)
    fam = open_page(demo_url, monkeypatch, INES, family="FAM-PRICING-2026")
    docs = " ".join(fam.dataframe[0].value["documents"])
    assert "MEMO-PRICING-2026@1" in docs  # the reference, never the text or title
    cleared = open_page(demo_url, monkeypatch, RAVI, case=memo_case)
    options = by_label(cleared.selectbox, "Document to edit").options  # type: ignore[attr-defined]
    assert options[0] == "MEMO-PRICING-2026@1 · visible, decisive"


def test_every_demo_family_renders_with_its_variants_and_passing_checks(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert case_families.build_demo_variants(demo_engine, tax) == 11
    for key in cases.family_keys(demo_engine):
        at = open_page(demo_url, monkeypatch, ADA, family=key)
        assert not at.error and not at.warning, key
        assert any(readable(s).endswith("checks pass.") for s in at.success), key
    at = open_page(demo_url, monkeypatch, ADA)
    fams = at.dataframe[1].value
    pending = dict(zip(fams["family"], fams["awaiting confirmation"], strict=True))
    assert pending["FAM-REFUND-WINDOW"] == 1 and pending["FAM-EDU-DISCOUNT"] == 0


# ------------------------------------------------------------------------------------------
# Two decisive documents: every decisive passage is accounted for


def agent_case(engine: Engine, tax: Taxonomy) -> int:
    """An agent's question that the public refund policy and the internal agent guide both
    answer (two decisive documents of the demo), written by Ravi, who builds from it (a ready
    case by someone else would be blind to him, an annotator, until he labels it)."""
    item = cases.validate_case(
        {
            "key": "AGENT-001",
            "question": "How old can a monthly charge be for an agent to approve its refund?",
            "required_claims": ["A monthly plan charge can be refunded up to 14 days after it."],
            "identity": {"name": "support-agent", "scopes": ["public", "internal"]},
            "documents": [
                {
                    "doc_id": "POL-REFUND-MONTHLY",
                    "version": 2,
                    "visibility": "visible",
                    "role": "decisive",
                },
                {
                    "doc_id": "SUP-GUIDE-REFUNDS",
                    "version": 1,
                    "visibility": "visible",
                    "role": "decisive",
                },
            ],
            "expected_decision": "answer",
            "category": "in_scope",
            "split": "train",
            "family": "FAM-AGENT-REFUND",
            "evidence_state": "present",
        },
        "agent",
        1,
        tax,
    )
    ravi = users.get_by_email(engine, RAVI)
    assert ravi is not None
    return write(engine, cases.create_case, users.to_actor(ravi), item, tax)


def test_an_edit_of_one_of_two_decisive_documents_keeps_the_answer_and_is_flagged(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = agent_case(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, case=str(case_id))
    by_label(at.selectbox, "Document to edit").set_value(  # type: ignore[attr-defined]
        next(
            o
            for o in by_label(at.selectbox, "Document to edit").options  # type: ignore[attr-defined]
            if o.startswith("SUP-GUIDE-REFUNDS@1")
        )
    )
    at.run()
    by_label(at.selectbox, "Operator").set_value("remove_answer").run()  # type: ignore[attr-defined]
    spans = by_label(at.selectbox, "Candidate spans")
    # a plain paragraph of the guide (no FAQ, no question heading) offers its sentences
    pick = next(
        o
        for o in spans.options  # type: ignore[attr-defined]
        if "no more than 14 days old" in o
    )
    spans.set_value(spans.options.index(pick)).run()  # type: ignore[attr-defined]
    # one of the two decisive documents only: the policy is left out of the edit
    by_label(at.multiselect, "Also take it out of these decisive documents").set_value(  # type: ignore[attr-defined]
        []
    ).run()
    click(at, "Preview the edit")
    assert not at.error
    suggestion = dict(at.dataframe[1].value.values.tolist())
    assert suggestion["decision"] == "keep the base's"
    assert "POL-REFUND-MONTHLY@2 still carries the answer" in suggestion["why"]
    assert "one step of a multi-step question" in suggestion["why"]  # when it is no backup
    click(at, "Save as a variant of FAM-AGENT-REFUND")
    assert "Saved AGENT-001-CF-1 (draft; no evidence state; suggested Answer)" in saved_message(at)
    assert any("checks fail" in readable(e) for e in at.error)
    checks = at.dataframe[1].value
    flagged = checks[checks["check"] == "Every decisive document accounted for"]
    assert list(flagged["result"]) == ["FAIL"] and list(flagged["variant"]) == ["AGENT-001-CF-1"]
    assert "POL-REFUND-MONTHLY@2 still carries the answer" in flagged.iloc[0]["detail"]


def test_the_evidence_state_form_asks_which_decisive_documents_and_warns(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = agent_case(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, case=str(case_id))
    at.radio[0].set_value("forbidden").run()
    picker = by_label(at.multiselect, "Decisive documents to forbid to the identity")
    assert picker.value == ["POL-REFUND-MONTHLY@2", "SUP-GUIDE-REFUNDS@1"]  # type: ignore[attr-defined]
    # every decisive document is forbidden: the evidence is gone, nothing to warn about
    assert not any("still carr" in readable(w) for w in at.warning)
    picker.set_value(["POL-REFUND-MONTHLY@2"]).run()  # type: ignore[attr-defined]
    assert any(
        readable(w).startswith("SUP-GUIDE-REFUNDS@1 still carries the answer") for w in at.warning
    )


# ------------------------------------------------------------------------------------------
# Issue 35, item 2: a passage stored as one long line, its year twice on line 1


FILLER = " ".join(["the tournament drew crowds in eleven host cities across the country"] * 300)
ONE_LINE = f"2018 FIFA World Cup. The final of the 2018 tournament was played in Moscow. {FILLER}"


def one_line_case(url: str, tax: Taxonomy) -> int:
    """A case whose decisive document is one long line (an imported QA passage) naming 2018
    twice on line 1, written by the annotator who builds from it."""
    eng = make_engine(url)
    doc = parse_markdown(
        "---\ndoc_id: WC-2018\nversion: 1\ntitle: World Cup 2018\nauthority: faq\nowner: Ops\n"
        f"access_scope: public\njurisdiction: global\n---\n{ONE_LINE}\n",
        "wc.md",
        tax,
    )
    corpus.import_documents(eng, SYSTEM, [doc])
    item = cases.validate_case(
        {
            "key": "WC-1",
            "question": "Where was the 2018 World Cup final played?",
            "required_claims": ["The 2018 final was played in Moscow."],
            "identity": {"name": "customer", "scopes": ["public"]},
            "documents": [
                {"doc_id": "WC-2018", "version": 1, "visibility": "visible", "role": "decisive"}
            ],
            "expected_decision": "answer",
            "category": "in_scope",
            "split": "train",
            "family": "FAM-WC",
            "evidence_state": "present",
        },
        "wc",
        1,
        tax,
    )
    solo = users.get_by_email(eng, "solo@example.org")
    assert solo is not None
    case_id = write(eng, cases.create_case, users.to_actor(solo), item, tax)
    eng.dispose()
    return case_id


def test_swap_the_year_on_a_one_line_passage_previews_the_chosen_year(
    blank_url: str, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = one_line_case(blank_url, tax)
    at = open_page(blank_url, monkeypatch, "solo@example.org", case=str(case_id))
    by_label(at.selectbox, "Operator").set_value("swap_year").run()  # type: ignore[attr-defined]
    spans = by_label(at.selectbox, "Candidate spans")
    labels = list(spans.options)  # type: ignore[attr-defined]
    # two years on line 1 are told apart by the words around them, never two equal labels
    assert len(set(labels)) == len(labels) == 3 and labels[-1] == "Custom offsets…"
    assert labels[0].startswith("line 1: 2018 · «2018» FIFA World Cup")
    assert labels[1].startswith("line 1: 2018 · …FIFA World Cup. The final of the «2018»")
    spans.set_value(1).run()  # type: ignore[attr-defined]
    by_label(at.text_input, "to year").input("2017")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert not at.error
    before, after = codes(at)[1], codes(at)[2]
    assert "The final of the {+2017+} tournament" in after
    assert after.startswith("   1 │ 2018 FIFA World Cup.")  # the first year is left as it was
    # the 20,000-character line is shown around its change, not whole
    assert len(before) < 1_000 and before.rstrip().endswith("…")
    assert list(at.dataframe[0].value["change"]) == ["changed"]


def test_every_operator_previews_or_says_why_not(
    blank_url: str, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = one_line_case(blank_url, tax)
    at = open_page(blank_url, monkeypatch, "solo@example.org", case=str(case_id))
    by_label(at.selectbox, "Operator").set_value("replace_tier").run()  # type: ignore[attr-defined]
    assert readable(by_label(at.selectbox, "Candidate spans").label) == (  # type: ignore[attr-defined]
        "Candidate spans (0 found by Replace the product tier)"
    )
    (warning,) = [readable(w) for w in at.warning]
    assert warning.startswith(
        "Replace the product tier finds no product tier (Starter, Team, Business, Enterprise) "
        "in WC-2018@1, so it has nothing to preview here"
    )
    click(at, "Preview the edit")  # on the empty custom span: refused, naming what is missing
    assert readable(at.error[0]) == (
        "Nothing changed. Replace the product tier: no product tier (Starter, Team, Business, "
        "Enterprise) in the span 0-0 ('')"
    )
    # a parameter that matches nothing in the span is named
    by_label(at.selectbox, "Operator").set_value("swap_year").run()  # type: ignore[attr-defined]
    by_label(at.text_input, "to year").input("2017")  # type: ignore[attr-defined]
    by_label(at.text_input, "from year").input("1999")  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert "Nothing changed. Swap the year: no year 1999 in the span 0-4 ('2018')" in readable(
        at.error[0]
    )
    assert not [b for b in at.button if b.label.startswith("Save as a variant")]


# ------------------------------------------------------------------------------------------
# Issue 35, item 1: one edit takes the answer out of every decisive document


def test_one_edit_of_both_decisive_documents_previews_each_and_suggests_abstain(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = agent_case(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, case=str(case_id))
    # the first operator finds no tier in the guide: left out to start with, and said so
    also = by_label(at.multiselect, "Also take it out of these decisive documents")
    assert also.value == []  # type: ignore[attr-defined]
    assert any(
        readable(w).startswith(
            "Replace the product tier finds no product tier (Starter, Team, Business, "
            "Enterprise) in SUP-GUIDE-REFUNDS@1: left out of the edit to start with"
        )
        for w in at.warning
    )
    by_label(at.selectbox, "Operator").set_value("remove_answer").run()  # type: ignore[attr-defined]
    spans = by_label(at.selectbox, "Candidate spans")
    pick = next(o for o in spans.options if "2.1 A customer may ask for a refund" in o)  # type: ignore[attr-defined]
    spans.set_value(spans.options.index(pick)).run()  # type: ignore[attr-defined]
    also = by_label(at.multiselect, "Also take it out of these decisive documents")
    assert also.value == ["SUP-GUIDE-REFUNDS@1"]  # type: ignore[attr-defined]  # default: all
    guide = by_label(at.selectbox, "Span in SUP-GUIDE-REFUNDS@1")
    guide_pick = next(o for o in guide.options if "no more than 14 days old" in o)  # type: ignore[attr-defined]
    guide.set_value(guide.options.index(guide_pick)).run()  # type: ignore[attr-defined]
    click(at, "Preview the edit")
    assert not at.error
    assert any(readable(m) == "**1. POL-REFUND-MONTHLY@2**" for m in at.markdown)
    assert any(readable(m) == "**2. SUP-GUIDE-REFUNDS@1**" for m in at.markdown)
    befores = [c for c in codes(at) if "│" in c][0::2]
    assert any("[-" in b and "14 days of the charge date" in b for b in befores)
    assert any("[-" in b and "no more than 14 days old" in b for b in befores)
    suggestion = dict(at.dataframe[-1].value.values.tolist())
    assert suggestion["decision"] == "Abstain"
    click(at, "Save as a variant of FAM-AGENT-REFUND")
    assert "Saved AGENT-001-CF-1 (draft; Evidence removed; suggested Abstain)" in saved_message(at)
    assert not any("checks fail" in readable(e) for e in at.error)
    checks = at.dataframe[1].value
    row = checks[checks["check"] == "Every decisive document accounted for"].iloc[0]
    assert row["result"] == "pass"
    assert row["detail"].startswith("no decisive document still carries the answer")
    detail = next(e for e in at.expander if readable(e.label).startswith("AGENT-001-CF-1"))
    assert any(
        t.value.startswith(
            "One edit of 2 documents: Remove the answer on POL-REFUND-MONTHLY@2, "
            "SUP-GUIDE-REFUNDS@1 by Ravi Menon"
        )
        for t in detail.text
    )


def test_evidence_removed_takes_several_decisive_documents(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = agent_case(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, case=str(case_id))
    chosen = by_label(at.multiselect, "Decisive documents to take the answer out of")
    assert chosen.value == ["POL-REFUND-MONTHLY@2", "SUP-GUIDE-REFUNDS@1"]  # type: ignore[attr-defined]
    chosen.set_value(["POL-REFUND-MONTHLY@2"]).run()  # type: ignore[attr-defined]
    assert any(
        readable(w).startswith("SUP-GUIDE-REFUNDS@1 still carries the answer") for w in at.warning
    )
    chosen = by_label(at.multiselect, "Decisive documents to take the answer out of")
    chosen.set_value(["POL-REFUND-MONTHLY@2", "SUP-GUIDE-REFUNDS@1"]).run()  # type: ignore[attr-defined]
    by_label(at.text_area, "Decisive passage (copy it exactly from POL-REFUND-MONTHLY@2").input(  # type: ignore[attr-defined]
        "within **14 days of the charge date**"
    )
    by_label(at.text_area, "Decisive passage (copy it exactly from SUP-GUIDE-REFUNDS@1").input(  # type: ignore[attr-defined]
        "not in the guide"
    )
    click(at, "Build and save the variant")
    assert readable(at.error[0]).startswith(
        "Nothing was saved. SUP-GUIDE-REFUNDS@1: the passage 'not in the guide' does not occur"
    )
    by_label(at.text_area, "Decisive passage (copy it exactly from SUP-GUIDE-REFUNDS@1").input(  # type: ignore[attr-defined]
        "Approve in the billing console when the charge is no more than 14 days old."
    )
    click(at, "Build and save the variant")
    assert "Saved AGENT-001-CF-1 (draft; Evidence removed; suggested Abstain)" in saved_message(at)
    assert not any("checks fail" in readable(e) for e in at.error)


def test_a_case_blind_to_me_links_to_labeling_it(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An annotator opening the builder on a case that waits for their label (imported by
    someone else, as a public data set is) learned only that it is blind: the page now links
    to labeling it, as the Cases page does (issue 35, found with the MuSiQue sample)."""
    from review.cases import sight
    from review.labels import blind

    ines = users.get_by_email(demo_engine, INES)
    assert ines is not None
    seen = blind.sight(demo_engine, users.to_actor(ines))
    with read_session(demo_engine) as s:
        ids = list(s.scalars(select(Case.id).where(Case.status == "ready")))
    blind_ids = sorted(seen.blind_ids(demo_engine, ids))
    assert blind_ids
    at = open_page(demo_url, monkeypatch, INES, case=str(blind_ids[0]))
    assert any(readable(m.value) == sight.BLIND_NOTE for m in at.info)
    links = [e for e in at.get("link_button") if e.proto.label == "Label this case"]
    assert len(links) == 1
    assert f"case={blind_ids[0]}" in links[0].proto.url and "label" in links[0].proto.url


def test_a_conflict_over_both_decisive_documents_previews_each_and_saves_one_edit(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = agent_case(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, case=str(case_id))
    at.radio[0].set_value("conflicted").run()
    by_label(at.selectbox, "How the conflict reads").set_value("unresolved").run()  # type: ignore[attr-defined]
    chosen = by_label(at.multiselect, "Decisive documents to contest with a conflicting copy")
    assert chosen.value == ["POL-REFUND-MONTHLY@2", "SUP-GUIDE-REFUNDS@1"]  # type: ignore[attr-defined]
    # leaving one out of an unresolved conflict leaves it settling the answer: said so
    chosen.set_value(["POL-REFUND-MONTHLY@2"]).run()  # type: ignore[attr-defined]
    assert any(
        readable(w).startswith("SUP-GUIDE-REFUNDS@1 is not contested: it still settles")
        for w in at.warning
    )
    chosen = by_label(at.multiselect, "Decisive documents to contest with a conflicting copy")
    chosen.set_value(["POL-REFUND-MONTHLY@2", "SUP-GUIDE-REFUNDS@1"]).run()  # type: ignore[attr-defined]
    by_label(at.text_area, "Decisive passage (copy it exactly from POL-REFUND-MONTHLY@2").input(  # type: ignore[attr-defined]
        "within **14 days of the charge date**"
    )
    by_label(at.text_area, "Decisive passage (copy it exactly from SUP-GUIDE-REFUNDS@1").input(  # type: ignore[attr-defined]
        "Approve in the billing console when the charge is no more than 14 days old."
    )
    by_label(at.text_input, "to number").input("30")  # type: ignore[attr-defined]
    click(at, "Preview the variant")
    assert not at.error
    assert any(readable(m) == "**1. POL-REFUND-MONTHLY@2**" for m in at.markdown)
    assert any(readable(m) == "**2. SUP-GUIDE-REFUNDS@1**" for m in at.markdown)
    afters = [c for c in codes(at) if "{+30+}" in c]
    assert len(afters) == 2  # one marked diff per document
    suggestion = dict(at.dataframe[-1].value.values.tolist())
    assert suggestion["decision"] == "Abstain"
    with read_session(demo_engine) as s:  # a preview saves nothing
        assert s.scalar(select(Case.id).where(Case.key == "AGENT-001-CF-1")) is None
    click(at, "Build and save the variant")
    said = saved_message(at)
    assert "Saved AGENT-001-CF-1 (draft; Evidence conflicted; suggested Abstain)" in said
    assert not any("checks fail" in readable(e) for e in at.error)
    checks = at.dataframe[1].value
    row = checks[
        (checks["check"] == "Every decisive document accounted for")
        & (checks["variant"] == "AGENT-001-CF-1")
    ].iloc[0]
    assert row["result"] == "pass"
    assert row["detail"].startswith("no decisive document settles the answer alone")
    detail = next(e for e in at.expander if readable(e.label).startswith("AGENT-001-CF-1"))
    assert any(
        t.value.startswith(
            "One edit of 2 documents: Change the number on POL-REFUND-MONTHLY@2, "
            "SUP-GUIDE-REFUNDS@1 by Ravi Menon"
        )
        for t in detail.text
    )


def test_forbidding_both_decisive_documents_previews_each_and_suggests_abstain(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = agent_case(demo_engine, tax)
    at = open_page(demo_url, monkeypatch, RAVI, case=str(case_id))
    at.radio[0].set_value("forbidden").run()
    click(at, "Preview the variant")
    assert not at.error
    outcomes = [readable(c) for c in at.caption]
    assert any(o.startswith("replaced by a copy POL-REFUND-MONTHLY-CF-") for o in outcomes)
    assert "stays, forbidden (scope 'internal')" in outcomes
    assert dict(at.dataframe[-1].value.values.tolist())["decision"] == "Abstain"
    click(at, "Build and save the variant")
    said = saved_message(at)
    assert "Saved AGENT-001-CF-1 (draft; Evidence forbidden; suggested Abstain)" in said
    assert not any("checks fail" in readable(e) for e in at.error)
