"""The Cases page's form as plain data (review.cases.form): starting values from a record or
a new case, document rows and claims read back, and validation like an imported case."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from review.cases import form
from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus

RECORD: dict[str, object] = {
    "key": "CASE-T1",
    "question": "How long is the refund window?",
    "required_claims": ["Monthly plans have a 14-day window.", "It starts at the charge."],
    "identity": {"name": "customer-eu", "scopes": ["public", "internal"]},
    "documents": [
        {"doc_id": "POL-REFUND", "version": 2, "visibility": "visible", "role": "decisive"}
    ],
    "expected_decision": "abstain",
    "reason_codes": ["no_answer_bearing_evidence"],
    "category": "in_scope",
    "slices": ["numeric"],
    "split": "test",
    "family": "FAM-1",
    "evidence_state": "removed",
    "status": "ready",
    "notes": "Look at the date.",
}


def values(**over: object) -> form.FormValues:
    base = form.FormValues(
        key=None,
        question="How long is the refund window?",
        claims="Monthly plans have a 14-day window.\n\n  It starts at the charge.  \n",
        identity_name="customer",
        identity_scopes=["public"],
        documents=[],
        expected_decision="abstain",
        category="out_of_scope",
        split="train",
        reason_codes=["no_answer_bearing_evidence"],
    )
    return dataclasses.replace(base, **over)  # type: ignore[arg-type]


def test_a_stored_case_starts_the_form_with_its_values() -> None:
    s = form.form_start(RECORD)
    assert (s.key, s.question, s.identity_name, s.identity_scopes) == (
        "CASE-T1",
        "How long is the refund window?",
        "customer-eu",
        ["public", "internal"],
    )
    assert s.claims == "Monthly plans have a 14-day window.\nIt starts at the charge."
    assert s.documents == RECORD["documents"]
    assert (s.expected_decision, s.category, s.split, s.status) == (
        "abstain",
        "in_scope",
        "test",
        "ready",
    )
    assert (s.reason_codes, s.slices, s.family, s.evidence_state, s.notes) == (
        ["no_answer_bearing_evidence"],
        ["numeric"],
        "FAM-1",
        "removed",
        "Look at the date.",
    )


def test_a_new_case_starts_as_a_public_customer_expecting_its_category_default() -> None:
    s = form.form_start({"status": CaseStatus.draft})
    assert s.key is None and s.question == "" and s.claims == ""
    assert (s.identity_name, s.identity_scopes) == ("customer", ["public"])
    assert s.documents == [] and s.reason_codes == [] and s.slices == []
    assert (s.expected_decision, s.expected_message, s.status) == ("", "", "draft")
    assert (s.category, s.split, s.family, s.evidence_state, s.notes) == ("", "", "", "", "")
    assert form.form_start({"identity": None, "family": None}).identity_name == "customer"


def test_option_index_falls_back_to_the_first_option(tax: Taxonomy) -> None:
    splits = list(tax.splits)
    assert form.option_index(splits, "test") == splits.index("test")
    assert form.option_index(splits, "") == 0
    assert form.option_index(["", "removed"], "removed") == 1


def test_the_document_editor_starts_with_the_case_documents() -> None:
    frame = form.documents_frame(form.form_start(RECORD).documents)
    assert list(frame.columns) == ["doc_id", "version", "visibility", "role"]
    assert frame.to_dict("records") == RECORD["documents"]
    empty = form.documents_frame([])
    assert empty.empty and list(empty.columns) == form.DOCUMENT_COLUMNS


def test_claims_are_one_a_line_without_blank_lines() -> None:
    assert form.parse_claims(" First. \n\n   \nSecond.\n") == ["First.", "Second."]
    assert form.parse_claims("") == []


def test_document_rows_skip_empty_ids_and_read_versions_from_the_id() -> None:
    frame = pd.DataFrame(
        [
            {"doc_id": " POL-A ", "version": 2.0, "visibility": "forbidden", "role": "decisive"},
            {"doc_id": None, "version": 1, "visibility": None, "role": None},
            {"doc_id": "   ", "version": 1, "visibility": None, "role": None},
            {"doc_id": "POL-B@3", "version": math.nan, "visibility": None, "role": None},
            {"doc_id": "POL-C@9", "version": 4, "visibility": "visible", "role": "context"},
        ],
        index=[10, 11, 12, 13, 14],
    )
    assert form.document_rows(frame) == [
        {"doc_id": "POL-A", "version": 2, "visibility": "forbidden", "role": "decisive"},
        {"doc_id": "POL-B", "version": 3, "visibility": "visible", "role": "context"},
        {"doc_id": "POL-C", "version": 4, "visibility": "visible", "role": "context"},
    ]
    assert form.document_rows(pd.DataFrame(columns=form.DOCUMENT_COLUMNS)) == []


@pytest.mark.parametrize(
    ("doc_id", "version", "message"),
    [
        ("POL-A", math.nan, "Document row 2: give the version of POL-A."),
        ("POL-A", None, "Document row 2: give the version of POL-A."),
        ("POL-A@x", math.nan, "Document row 2: the version of POL-A must be a whole number."),
        ("POL-A@", None, "Document row 2: the version of POL-A must be a whole number."),
        ("POL-A", math.inf, "Document row 2: the version of POL-A must be a whole number."),
    ],
)
def test_a_document_row_without_a_usable_version_is_named(
    doc_id: str, version: object, message: str
) -> None:
    frame = pd.DataFrame(
        [
            {"doc_id": "POL-OK", "version": 1, "visibility": "visible", "role": "context"},
            {"doc_id": doc_id, "version": version, "visibility": "visible", "role": "context"},
        ]
    )
    with pytest.raises(InputError) as err:
        form.document_rows(frame)
    assert str(err.value) == message


def test_the_form_record_is_the_canonical_format() -> None:
    record = form.form_record(
        values(key="CASE-9", family="", evidence_state="", documents=[{"doc_id": "X"}])
    )
    assert record == {
        "key": "CASE-9",
        "question": "How long is the refund window?",
        "required_claims": ["Monthly plans have a 14-day window.", "It starts at the charge."],
        "identity": {"name": "customer", "scopes": ["public"]},
        "documents": [{"doc_id": "X"}],
        "expected_decision": "abstain",
        "expected_message": None,
        "reason_codes": ["no_answer_bearing_evidence"],
        "category": "out_of_scope",
        "slices": [],
        "split": "train",
        "family": None,
        "evidence_state": None,
        "language": None,
        "status": "draft",
        "notes": "",
    }
    assert form.form_record(values(language=" pt-BR "))["language"] == "pt-BR"


def test_a_valid_form_gives_a_case(tax: Taxonomy) -> None:
    case = form.validate_form(values(family="FAM-1", evidence_state="removed"), tax)
    assert case.family == "FAM-1" and case.evidence_state == "removed"
    assert case.required_claims == [
        "Monthly plans have a 14-day window.",
        "It starts at the charge.",
    ]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"reason_codes": []}, "field reason_codes: a case expecting 'abstain' needs at least"),
        ({"evidence_state": "removed"}, "field evidence_state: an evidence state needs a family"),
        ({"question": "Q"}, "question"),
    ],
)
def test_an_invalid_form_says_why_without_naming_a_file(
    tax: Taxonomy, over: dict[str, object], message: str
) -> None:
    with pytest.raises(InputError) as err:
        form.validate_form(values(**over), tax)
    assert message in str(err.value)
    assert not str(err.value).startswith("form: line 1")
