"""The Case builder's tables and labels (review.builder.tables): diff rows and colours,
suggestions, the landing lists, a family's variants, checks, claims and edits, and what needs
attention."""

from __future__ import annotations

import dataclasses
import datetime as dt

from review.builder import tables
from review.builder.diffs import DiffRow, diff_rows
from review.builder.documents import BaseCaseRow
from review.builder.families import Check
from review.builder.family_view import (
    ClaimMark,
    EditRow,
    FamilyRow,
    FamilyView,
    VariantDoc,
    VariantRow,
)
from review.builder.operator import Suggestion
from review.core.taxonomy import Taxonomy

BASE = VariantRow(
    case_id=1,
    key="CASE-001",
    version=1,
    evidence_state="present",
    status="ready",
    question="Within how many days?",
    expected_decision="answer",
    reason_codes=(),
    suggested_decision=None,
    suggested_reasons=(),
    suggestion_source=None,
    confirmed_by=None,
    confirmed_at=None,
    identity_name="customer",
    identity_scopes=("public", "internal"),
    documents=(VariantDoc("POL@2", 5, "Refunds", "visible", "decisive", "public"),),
    claims=(ClaimMark("Refunds within 14 days.", "supported"),),
    edits=(),
)
PENDING = dataclasses.replace(
    BASE,
    case_id=2,
    key="CASE-001-V1",
    evidence_state="removed",
    status="draft",
    expected_decision="abstain",
    reason_codes=("no_answer_bearing_evidence",),
    suggested_decision="abstain",
    suggested_reasons=("no_answer_bearing_evidence", "not_a_code"),
    suggestion_source="remove_answer",
    documents=(),
)
CONFIRMED = dataclasses.replace(PENDING, case_id=3, key="CASE-001-V2", confirmed_by="ravi")


def family(*checks: Check) -> FamilyView:
    return FamilyView(
        "FAM", "Within how many days?", (BASE, PENDING, CONFIRMED), checks, None, "given", False
    )


def test_decision_labels_and_reasons(tax: Taxonomy) -> None:
    assert tables.decision_label(tax, "abstain") == tax.decisions["abstain"].label
    assert tables.decision_label(tax, "no_such_decision") == "no_such_decision"
    assert tables.decision_label(tax, None) == "—"
    assert tables.with_reasons(tax, "abstain", ("source_not_allowed", "b")) == (
        f"{tax.decisions['abstain'].label} ({tax.reason_codes['source_not_allowed'].label}, b)"
    )
    assert tables.with_reasons(tax, None, ()) == "—"


def test_the_preview_table_has_text_line_numbers_and_coloured_changes() -> None:
    rows = diff_rows("one\ntwo\nthree", "one\n2\nthree\nfour")
    frame = tables.preview_table(rows)
    assert list(frame.columns) == ["line before", "line after", "change", "before", "after"]
    added = frame[frame["change"] == "added"].iloc[0]
    assert added["line before"] == "" and added["line after"] == "4"
    assert tables.preview_table([]).empty
    assert tables.change_styles("removed", 2) == ["background-color: #f8d7da"] * 2
    assert tables.change_styles("same", 1) == ["background-color: "]
    assert tables.change_styles("unknown", 1) == ["background-color: "]
    one = tables.preview_table([DiffRow(1, None, "removed", "[-x-]", "")])
    assert one.iloc[0].to_dict() == {
        "line before": "1",
        "line after": "",
        "change": "removed",
        "before": "[-x-]",
        "after": "",
    }


def test_the_suggestion_and_metadata_tables(tax: Taxonomy) -> None:
    keep = tables.suggestion_table(Suggestion(None, (), note="why"), tax)
    assert keep.values.tolist() == [
        ["decision", "keep the base's"],
        ["reasons", "—"],
        ["slices", "—"],
        ["evidence state", "no evidence state"],
        ["why", "why"],
    ]
    sug = Suggestion(
        "abstain", ("no_answer_bearing_evidence",), ("empty_retrieval",), evidence_state="removed"
    )
    shown = dict(tables.suggestion_table(sug, tax).values.tolist())
    assert shown["decision"] == tax.decisions["abstain"].label
    assert (shown["reasons"], shown["slices"], shown["evidence state"]) == (
        tax.reason_codes["no_answer_bearing_evidence"].label,
        tax.slices["empty_retrieval"].label,
        "Evidence removed",
    )
    meta = tables.metadata_table({"effective_date": "2026-01-01"})
    assert meta.to_dict("records") == [{"field": "effective_date", "new value": "2026-01-01"}]


def test_the_landing_tables(tax: Taxonomy) -> None:
    base = tables.base_case_table([BaseCaseRow(1, "CASE-001", None, "Q?")])
    assert base.to_dict("records") == [{"case": "CASE-001", "family": "—", "question": "Q?"}]
    fams = tables.family_list_table(
        [FamilyRow("FAM", "Q?", 3, 1, ("present", "removed", None))],
        lambda key: f"/builder?family={key}",
        tax,
    )
    assert fams.to_dict("records") == [
        {
            "open": "/builder?family=FAM",
            "family": "FAM",
            "variants": 3,
            "awaiting confirmation": 1,
            "evidence states": "Evidence present, Evidence removed, no evidence state",
            "question": "Q?",
        }
    ]


def test_the_variants_table_says_what_awaits_confirmation(tax: Taxonomy) -> None:
    rows = tables.variants_table(family(), lambda cid: f"/cases?case={cid}", tax)
    base, pending, confirmed = rows
    assert base["open"] == "/cases?case=1"
    assert (base["expected"], base["suggested"], base["confirmed"]) == ("Answer", "—", "—")
    assert (base["evidence state"], pending["evidence state"]) == (
        "Evidence present",
        "Evidence removed",
    )
    assert (base["status"], pending["status"]) == (
        tax.case_statuses["ready"].label,
        tax.case_statuses["draft"].label,
    )
    assert base["documents"] == "POL@2 (visible, decisive, public)"
    assert base["identity may see"] == "public, internal"
    assert pending["expected"] == "awaiting confirmation"
    no_evidence = tax.reason_codes["no_answer_bearing_evidence"].label
    assert pending["suggested"] == f"Abstain ({no_evidence}, Not a code)"
    assert pending["confirmed"] == "no"
    assert pending["documents"] == "(none: empty retrieval)"
    assert confirmed["expected"] == f"Abstain ({no_evidence})"
    assert confirmed["confirmed"] == "by ravi"
    assert [v.key for v in tables.pending_variants(family())] == ["CASE-001-V1"]


def test_check_notes_and_table() -> None:
    ok = Check("passage gone", True, "fine", "CASE-001-V1")
    bad = Check("no leak", False, "'x' is visible in POL@2")
    unknown = Check("removed", False, "no decisive passage recorded", "CASE-001-V1")
    assert tables.check_notes(family(ok)) == [tables.CheckNote("success", "All 1 checks pass.")]
    notes = tables.check_notes(family(ok, bad, unknown))
    assert [n.level for n in notes] == ["error", "warning"]
    assert notes[0].text == "1 of 3 checks fail."
    assert notes[1].text.startswith("1 check cannot be verified")
    table = tables.checks_table([ok, bad])
    assert table.to_dict("records") == [  # failing first
        {"result": "FAIL", "check": "No leak", "variant": "(family)", "detail": bad.detail},
        {"result": "pass", "check": "Passage gone", "variant": "CASE-001-V1", "detail": "fine"},
    ]
    named = tables.checks_table([Check("decisive_documents_accounted", True, "fine", "V")])
    assert named.iloc[0]["check"] == "Every decisive document accounted for"


def test_variant_labels_and_where_confirmation_starts(tax: Taxonomy) -> None:
    assert tables.variant_label(PENDING, tax) == "CASE-001-V1 · Evidence removed"
    assert tables.variant_label(dataclasses.replace(PENDING, evidence_state=None), tax) == (
        "CASE-001-V1 · no evidence state"
    )
    assert tables.variant_label(PENDING, tax, with_status=True) == (
        f"CASE-001-V1 · Evidence removed · {tax.case_statuses['draft'].label}"
    )
    index, reasons = tables.confirm_start(PENDING, tax)
    assert list(tax.decisions)[index] == "abstain"
    assert reasons == ["no_answer_bearing_evidence"]  # an unknown code is left out
    index, _ = tables.confirm_start(dataclasses.replace(PENDING, suggested_decision=None), tax)
    assert list(tax.decisions)[index] == "abstain"
    index, _ = tables.confirm_start(dataclasses.replace(PENDING, suggested_decision="answer"), tax)
    assert list(tax.decisions)[index] == "answer"


def test_claims_table_and_edit_line() -> None:
    assert tables.claims_table(BASE.claims).to_dict("records") == [
        {"claim": "Refunds within 14 days.", "support": "supported"}
    ]
    empty = tables.claims_table(())
    assert empty.empty and list(empty.columns) == ["claim", "support"]
    edit = EditRow(
        7,
        "change_unit",
        {"to_unit": "weeks"},
        "POL@2",
        39,
        46,
        "14 days",
        "14 weeks",
        None,
        "ines@x",
        dt.datetime(2026, 3, 1, 9, 5),
    )
    assert tables.edit_line(edit) == (
        "#7 Change the unit on POL@2 at 39-46 → — by ines@x, 2026-03-01 09:05 UTC; "
        "params {'to_unit': 'weeks'}"
    )
    named = family().__class__("FAM", "Q?", (), (), None, "given", False, {"ines@x": "Inés Duarte"})
    assert "→ — by Inés Duarte, 2026-03-01 09:05 UTC" in tables.edit_line(edit, named.person)
    assert named.person("nobody@x") == "nobody@x" and named.person(None) == "—"
    assert "→ POL-CF-1@1 by" in tables.edit_line(dataclasses.replace(edit, result="POL-CF-1@1"))


def test_suggestion_sources_read_as_operators_and_evidence_states(tax: Taxonomy) -> None:
    assert tables.suggestion_source_label(tax, "operator:drop_exception") == (
        "the operator Drop the exception"
    )
    assert tables.suggestion_source_label(tax, "family:conflicted (change_number)") == (
        "the Evidence conflicted variant (Change the number)"
    )
    assert tables.suggestion_source_label(tax, "family:partial") == ("the Evidence partial variant")
    assert tables.suggestion_source_label(tax, None) == "—"
