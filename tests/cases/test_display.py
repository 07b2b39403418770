"""What the Cases page shows, as plain data (review.cases.display): the list's filter and
tables, a case's documents (restricted titles hidden without clearance), details, family and
reason codes, and the texts of the split assignment."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pandas as pd

from review.cases import display
from review.cases.cases import CaseDocView, CaseFilter, CaseRow, CaseView
from review.cases.splits import SplitPlan
from review.core.clearance import REDACTED
from review.core.escape import markdown_text
from review.core.taxonomy import Taxonomy, Term, taxonomy
from tests.helpers.actors import make_actor

ROW = CaseRow(
    id=4,
    key="CASE-004",
    question="Can I get a refund?",
    expected_decision="abstain",
    category="in_scope",
    split="test",
    status="ready",
    family=None,
    evidence_state=None,
    slices=("numeric", "temporal_mismatch"),
    documents=2,
)
DOC = CaseDocView(
    document_id=9,
    ref="MEMO@1",
    title="Pricing memo",
    access_scope="restricted",
    effective_date=dt.date(2026, 1, 1),
    authority="policy",
    jurisdiction="EU",
    visibility="visible",
    role="decisive",
    is_current=True,
)
VIEW = CaseView(
    id=4,
    key="CASE-004",
    question="Can I get a refund?",
    required_claims=(),
    identity_name="customer",
    identity_scopes=("public",),
    documents=(DOC,),
    expected_decision="abstain",
    expected_message="R1",
    reason_codes=(),
    category="in_scope",
    slices=(),
    split="test",
    status="ready",
    family=None,
    evidence_state=None,
    notes="",
    version=3,
    created_by="ines",
    updated_at=dt.datetime(2026, 2, 3, 4, 5),
    updated_by=None,
    record={},
)


def link(i: int) -> str:
    return f"/x?id={i}"


def test_the_filter_takes_empty_choices_as_any() -> None:
    assert display.case_filter("refund") == CaseFilter(text="refund")
    assert display.case_filter("", "abstain", "", "numeric", "test", "ready", "FAM") == (
        CaseFilter(
            expected_decision="abstain", slice="numeric", split="test", status="ready", family="FAM"
        )
    )


def test_the_case_list_table() -> None:
    table = display.case_table([ROW], link)
    assert table.to_dict("records") == [
        {
            "open": "/x?id=4",
            "case": "CASE-004",
            "question": "Can I get a refund?",
            "decision": "abstain",
            "label from": "author",
            "author expected": "",
            "category": "in_scope",
            "slices": "numeric, temporal_mismatch",
            "split": "test",
            "status": "ready",
            "family": "",
            "evidence": "",
            "docs": 2,
        }
    ]
    # once adjudicated: the agreed decision, the author's beside it where they differ
    adjudicated = dataclasses.replace(ROW, agreed_decision="clarify", agreed_by="adjudication")
    row = display.case_table([adjudicated], link).to_dict("records")[0]
    assert (row["decision"], row["label from"], row["author expected"]) == (
        "clarify",
        "adjudication",
        "abstain",
    )
    same = dataclasses.replace(ROW, agreed_decision="abstain", agreed_by="annotators")
    row = display.case_table([same], link).to_dict("records")[0]
    assert (row["decision"], row["label from"], row["author expected"]) == (
        "abstain",
        "annotators",
        "",
    )


def test_an_empty_list_says_whether_filters_hide_the_cases() -> None:
    assert display.empty_list_message(0, 12) == "No cases match these filters."
    assert display.empty_list_message(0, 0).startswith("No cases yet")
    assert display.empty_list_message(5, 0).startswith("No cases yet")


def test_a_restricted_title_shows_only_with_clearance() -> None:
    public = dataclasses.replace(DOC, document_id=10, ref="POL@2", access_scope="public")
    hidden = display.documents_table([DOC, public], make_actor("annotator"), link)
    assert list(hidden["title"]) == [REDACTED, "Pricing memo"]
    assert list(hidden["open"]) == ["/x?id=9", "/x?id=10"]
    shown = display.documents_table([DOC], make_actor("annotator", clearance=True), link)
    assert shown.iloc[0].to_dict() == {
        "open": "/x?id=9",
        "document": "MEMO@1",
        "title": "Pricing memo",
        "visibility": "visible",
        "role": "decisive",
        "access": "restricted",
        "effective": "2026-01-01",
        "current version": True,
    }
    labelled = display.documents_table(
        [DOC], make_actor("annotator", clearance=True), link, tax=taxonomy()
    ).iloc[0]
    assert labelled["role"] == taxonomy().document_roles["decisive"].label
    assert labelled["access"] == taxonomy().access_scopes["restricted"].label


def test_details_labels_and_reasons(tax: Taxonomy) -> None:
    details = dict(display.details_table(VIEW).values.tolist())
    assert details == {
        "category": "in_scope",
        "expected wording": "R1",
        "slices": "—",
        "split": "test",
        "status": "ready",
        "family": "—",
        "evidence state": "—",
        "question language": "not stated",
        "version": "3",
        "last change": "2026-02-03 04:05 UTC by —",
    }
    named = dict(display.details_table(VIEW, tax, {}).values.tolist())
    assert named["category"] == tax.categories["in_scope"].label
    assert named["split"] == tax.label("splits", "test")
    assert named["status"] == tax.label("case_statuses", "ready")
    stated = dataclasses.replace(VIEW, record={**VIEW.record, "language": "de"})
    assert dict(display.details_table(stated).values.tolist())["question language"] == "de"
    assert display.decision_label(tax, "abstain") == tax.decisions["abstain"].label
    assert display.decision_label(tax, "unknown") == "unknown"
    code = next(iter(tax.reason_codes))
    assert display.reason_text([code], tax) == f"{code}: {tax.definition('reason_codes', code)}"
    assert display.reason_text([], tax) == "(none)"
    lines = display.terms_help(tax.slices).splitlines()
    assert len(lines) == len(tax.slices)
    first = next(iter(tax.slices.values()))
    assert lines[0] == f"- **{markdown_text(first.label)}**: {markdown_text(first.definition)}"


def test_taxonomy_help_shows_hostile_terms_as_typed(tax: Taxonomy) -> None:
    """The taxonomy is edited by people; its labels and definitions sit in Markdown tooltips
    (the help of the selects): they are escaped, only the list's own bold marks stay."""
    hostile = Term(label="**![x](http://evil.example/x.png)**", definition="[go](javascript:x) <b>")
    (line,) = display.terms_help({"t": hostile}).splitlines()
    assert line.startswith("- **\\*\\*\\!\\[x\\]\\(http\\:\u2060//evil")
    assert "](" not in line and "<b>" not in line
    category = next(iter(tax.categories))
    hostile_tax = tax.model_copy(
        update={
            "categories": {
                category: tax.categories[category].model_copy(
                    update={"label": "![c](http://evil.example/c.png)"}
                )
            }
        }
    )
    shown = display.category_defaults_help(hostile_tax)
    assert "\\!\\[c\\]\\(http\\:\u2060//evil\\.example/c\\.png\\)" in shown
    assert "](" not in shown


def test_the_family_table() -> None:
    variant = dataclasses.replace(ROW, id=5, key="CASE-005", evidence_state="removed")
    assert display.family_table([variant], link).to_dict("records") == [
        {
            "open": "/x?id=5",
            "case": "CASE-005",
            "evidence state": "removed",
            "expected": "abstain",
            "question": "Can I get a refund?",
        }
    ]


def test_split_texts() -> None:
    assert display.split_note(None).endswith("never move.")
    last = {"seed": 11, "by": "ada", "at": "2026-02-03T04:05:06+00:00", "moved": 4}
    assert display.split_note(last).endswith(
        " Last assignment: seed 11 by ada at 2026-02-03T04:05, 4 cases moved."
    )
    assert display.split_applied_message(3, 7, 3) == "3 cases moved; seed 7 recorded."
    assert display.split_applied_message(2, 7, 3) == (
        "2 cases moved; seed 7 recorded. The cases changed after the preview, which showed 3 moves."
    )


def test_a_kept_split_preview_holds_for_its_inputs_only() -> None:
    cases = pd.DataFrame({"case_id": [1, 2, 3], "locked": [True, False, True]})
    moves = cases.iloc[[1]]
    counts = pd.DataFrame({"train": [1]})
    plan = SplitPlan(7, {"train": 1.0}, True, cases, moves, counts)
    kept = display.split_preview(plan, 7, True)
    assert kept["locked"] == 2 and kept["moves"] is moves and kept["counts"] is counts
    assert (kept["seed"], kept["keep"]) == (7, True)
    assert display.split_preview_current(kept, 7, True)
    assert not display.split_preview_current(kept, 8, True)
    assert not display.split_preview_current(kept, 7, False)
    assert not display.split_preview_current(None, 7, True)


def test_the_case_list_reads_labels_and_names_not_keys_and_addresses(tax: Taxonomy) -> None:
    agreed = dataclasses.replace(
        ROW, agreed_decision="abstain", agreed_by="ravi.menon@brightwave.example"
    )
    row = display.case_table(
        [agreed], link, tax, {"ravi.menon@brightwave.example": "Ravi Menon"}
    ).to_dict("records")[0]
    assert row["decision"] == tax.decisions["abstain"].label
    assert row["label from"] == "Ravi Menon"
    assert row["category"] == tax.label("categories", ROW.category)
    assert row["slices"] == ", ".join(tax.label("slices", k) for k in ROW.slices)
    assert "temporal_mismatch" not in row["slices"]
