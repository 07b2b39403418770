"""Counterfactual family builders and family checks, on the demo cases and documents."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from review.builder.edits import replay
from review.builder.families import (
    Check,
    Variant,
    derive_conflicted,
    derive_edited,
    derive_forbidden,
    derive_partial,
    derive_removed,
    present_variant,
)
from review.builder.family_checks import family_checks
from review.builder.operator import Span, find_span
from review.builder.operators_values import SwapYearParams
from review.cases.cases import validate_case
from review.core.errors import InputError
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.corpus.docformat import DocumentIn, parse_blocks, parse_markdown
from tests.helpers.paths import ROOT

DEMO = ROOT / "review" / "demo"
TAX = load_taxonomy(ROOT / "policies" / "taxonomy.yaml")
DOCS: list[dict[str, Any]] = [
    parse_markdown(p.read_text(encoding="utf-8"), p.name, TAX).model_dump()
    for p in sorted((DEMO / "docs").glob("*.md"))
]
CASES: dict[str, dict[str, Any]] = {
    c["key"]: c
    for c in (
        json.loads(line)
        for line in (DEMO / "cases.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
}
REFUND_PASSAGE = (
    "A customer may ask for a refund of a monthly subscription charge within "
    "**14 days of the charge date**.[^1]"
)
DISCOUNT_PASSAGE = (
    "**Education**: accredited schools, colleges and universities receive **40% off** Team and "
    "Business list prices, on annual billing only."
)


def doc(doc_id: str, version: int) -> dict[str, Any]:
    return next(d for d in DOCS if d["doc_id"] == doc_id and d["version"] == version)


def case(key: str) -> dict[str, Any]:
    return copy.deepcopy(CASES[key])


def assert_importable(variant: Variant, tax: Taxonomy) -> None:
    """The variant case passes the canonical importer's checks; new documents validate."""
    validate_case(variant.case, "variant", 1, tax)
    for d in variant.new_documents:
        parsed = DocumentIn.model_validate(d)
        assert parsed.check_vocabulary(tax) == []
    assert variant.case["status"] == "draft"
    assert variant.case["key"] is None
    json.dumps(variant.as_dict())  # JSON-able for storage


def failing(checks: list[Check]) -> dict[str, list[Check]]:
    out: dict[str, list[Check]] = {}
    for c in checks:
        if not c.passed:
            out.setdefault(c.name, []).append(c)
    return out


# ------------------------------------------------------------------------------------------
# derive_removed


def test_removed_drops_the_decisive_document_and_keeps_its_neighbours(tax: Taxonomy) -> None:
    base = case("CASE-001")
    v = derive_removed(base, DOCS)
    assert v.evidence_state == "removed"
    refs = [(d["doc_id"], d["version"], d["role"]) for d in v.case["documents"]]
    assert refs == [("POL-REFUND-ANNUAL", 1, "distractor")]
    assert (v.suggested_decision, v.suggested_reasons) == (
        "abstain",
        ("no_answer_bearing_evidence",),
    )
    assert "near_neighbour_distractor" in v.suggested_slices
    # the demo's hand-written removed case of the same family agrees with the suggestion
    expert = CASES["CASE-002"]
    assert expert["expected_decision"] == v.suggested_decision
    assert set(v.suggested_reasons) <= set(expert["reason_codes"])
    assert v.case["question"] == base["question"] and v.case["split"] == base["split"]
    assert v.case["family"] == "FAM-REFUND-WINDOW"
    assert base == CASES["CASE-001"]  # the input is not modified
    assert_importable(v, tax)


def test_removed_with_a_passage_makes_an_edited_copy(tax: Taxonomy) -> None:
    v = derive_removed(case("CASE-001"), DOCS, passage="within **14 days of the charge date**")
    (new,) = v.new_documents
    assert new["doc_id"] == "POL-REFUND-MONTHLY-CF-REMOVED" and new["version"] == 1
    source = doc("POL-REFUND-MONTHLY", 2)
    assert "14 days of the charge date" not in new["body"]
    assert (
        "2.1 A customer may ask for a refund of a monthly subscription charge.[^1]" in new["body"]
    )
    assert [b.text for b in parse_blocks(new["body"]) if b.kind == "heading"] == [
        b.text for b in parse_blocks(source["body"]) if b.kind == "heading"
    ]
    assert new["access_scope"] == "public" and new["effective_date"] == "2025-03-01"
    (record,) = v.edits
    assert record.operator == "remove_answer"
    assert (record.doc_id, record.version) == ("POL-REFUND-MONTHLY", 2)
    assert record.result_ref == "POL-REFUND-MONTHLY-CF-REMOVED@1"
    assert replay(record, source["body"]) == new["body"]
    roles = {d["doc_id"]: d["role"] for d in v.case["documents"]}
    assert roles["POL-REFUND-MONTHLY-CF-REMOVED"] == "distractor"
    assert_importable(v, tax)


def test_removed_without_neighbours_is_an_empty_retrieval() -> None:
    base = case("CASE-001")
    base["documents"] = base["documents"][:1]
    v = derive_removed(base, DOCS)
    assert v.case["documents"] == []
    assert "empty_retrieval" in v.suggested_slices


def test_removed_refuses_a_passage_through_a_table() -> None:
    base = case("CASE-005")
    refused = r"SLA-ENTERPRISE@2: Remove the answer: .*includes a table"
    with pytest.raises(InputError, match=refused):
        derive_removed(base, DOCS, passage="| Below 99.0% | 30% |")


# ------------------------------------------------------------------------------------------
# derive_conflicted


def test_conflicted_older_version_lets_the_current_one_control(tax: Taxonomy) -> None:
    v = derive_conflicted(
        case("CASE-005"),
        DOCS,
        passage="**99.95% of each calendar month**",
        params={"to_number": "99.9"},
    )
    (copy_doc,) = v.new_documents
    assert "**99.9% of each calendar month**" in copy_doc["body"]
    assert copy_doc["effective_date"] == "2024-01-01"
    assert copy_doc["superseded_by"] == "SLA-ENTERPRISE@2"
    assert copy_doc["authority"] == "contract"
    roles = {(d["doc_id"], d["role"]) for d in v.case["documents"]}
    assert ("SLA-ENTERPRISE-CF-CONFLICT", "superseded") in roles
    assert ("SLA-ENTERPRISE", "decisive") in roles
    assert (v.suggested_decision, v.suggested_reasons) == ("answer", ())
    assert v.suggested_slices == ("temporal_mismatch",)
    expert = CASES["CASE-007"]  # the demo's hand-made conflicted case of this family
    assert expert["expected_decision"] == "answer" and "temporal_mismatch" in expert["slices"]
    assert v.edits[0].operator == "change_number"
    assert replay(v.edits[0], doc("SLA-ENTERPRISE", 2)["body"]) == copy_doc["body"]
    assert_importable(v, tax)


def test_conflicted_lower_authority_and_unresolved(tax: Taxonomy) -> None:
    lower = derive_conflicted(
        case("CASE-001"),
        DOCS,
        passage="**14 days of the charge date**",
        params={"to_number": "30"},
        mode="lower_authority",
    )
    assert lower.new_documents[0]["authority"] == "faq"
    assert lower.suggested_decision == "answer"
    assert_importable(lower, tax)
    unresolved = derive_conflicted(
        case("CASE-001"),
        DOCS,
        passage="**14 days of the charge date**",
        params={"to_number": "30"},
        mode="unresolved",
    )
    new = unresolved.new_documents[0]
    assert new["authority"] == "policy" and new["effective_date"] == "2025-03-01"
    assert new["superseded_by"] is None
    assert (unresolved.suggested_decision, unresolved.suggested_reasons) == (
        "abstain",
        ("conflicting_evidence",),
    )
    assert_importable(unresolved, tax)
    escalate = derive_conflicted(
        case("CASE-001"),
        DOCS,
        passage="**14 days of the charge date**",
        params={"to_number": "30"},
        mode="unresolved",
        unresolved_decision="escalate",
    )
    assert escalate.suggested_decision == "escalate"


def test_conflicted_can_use_a_dated_year_swap() -> None:
    v = derive_conflicted(
        case("CASE-005"),
        DOCS,
        passage="From 1 January 2025 it applies to all Enterprise subscriptions",
        operator="swap_year",
        params=SwapYearParams(to_year=2023, shift_effective_date="2025-01-01"),
    )
    assert v.new_documents[0]["effective_date"] == "2023-01-01"
    assert "From 1 January 2023 it applies" in v.new_documents[0]["body"]


def test_conflicted_refusals() -> None:
    base = case("CASE-005")
    passage = "**99.95% of each calendar month**"
    with pytest.raises(InputError, match="must be dated before 2025-01-01"):
        derive_conflicted(
            base, DOCS, passage=passage, params={"to_number": "99.9"}, effective_date="2025-06-01"
        )
    with pytest.raises(InputError, match="authority must differ"):
        derive_conflicted(
            base,
            DOCS,
            passage=passage,
            params={"to_number": "99.9"},
            mode="lower_authority",
            authority="contract",
        )
    with pytest.raises(InputError, match="unknown edit operator 'rewrite'"):
        derive_conflicted(base, DOCS, passage=passage, operator="rewrite")
    with pytest.raises(InputError, match=r"already 99\.95"):
        derive_conflicted(base, DOCS, passage=passage, params={"to_number": "99.95"})
    undated = [{**d, "effective_date": None} for d in DOCS]
    with pytest.raises(InputError, match="has no effective_date"):
        derive_conflicted(base, undated, passage=passage, params={"to_number": "99.9"})


# ------------------------------------------------------------------------------------------
# derive_forbidden


def test_forbidden_takes_the_scope_away_from_the_identity(tax: Taxonomy) -> None:
    v = derive_forbidden(case("CASE-009"), DOCS, passage=DISCOUNT_PASSAGE)
    vis = {d["doc_id"]: d["visibility"] for d in v.case["documents"]}
    assert vis == {"SALES-DISCOUNT": "forbidden", "FAQ-PRODUCT": "visible"}
    assert v.case["identity"]["scopes"] == ["public"]
    assert "internal" not in v.case["identity"]["scopes"]
    assert (v.suggested_decision, v.suggested_reasons) == ("abstain", ("source_not_allowed",))
    assert v.suggested_slices == ("access_filtered_answer",)
    expert = CASES["CASE-010"]  # the demo's forbidden case of this family
    assert expert["expected_decision"] == v.suggested_decision
    assert expert["reason_codes"] == list(v.suggested_reasons)
    assert [d["visibility"] for d in expert["documents"]] == [
        d["visibility"] for d in v.case["documents"]
    ]
    assert v.new_documents == ()
    assert_importable(v, tax)


def test_forbidden_public_document_becomes_a_restricted_copy(tax: Taxonomy) -> None:
    v = derive_forbidden(case("CASE-001"), DOCS, identity_name="customer-without-policy-access")
    (new,) = v.new_documents
    assert new["access_scope"] == "restricted"
    assert new["body"] == doc("POL-REFUND-MONTHLY", 2)["body"]
    refs = {(d["doc_id"], d["visibility"]) for d in v.case["documents"]}
    assert ("POL-REFUND-MONTHLY-CF-RESTRICTED", "forbidden") in refs
    assert ("POL-REFUND-ANNUAL", "visible") in refs
    assert all(d["doc_id"] != "POL-REFUND-MONTHLY" for d in v.case["documents"])
    assert v.case["identity"] == {"name": "customer-without-policy-access", "scopes": ["public"]}
    assert_importable(v, tax)


def test_forbidden_also_hides_other_documents_the_narrowed_identity_cannot_see() -> None:
    base = case("CASE-009")
    base["documents"].append(
        {"doc_id": "SUP-GUIDE-REFUNDS", "version": 1, "visibility": "visible", "role": "context"}
    )
    v = derive_forbidden(base, DOCS)
    vis = {d["doc_id"]: d["visibility"] for d in v.case["documents"]}
    assert vis["SUP-GUIDE-REFUNDS"] == "forbidden"
    assert "SUP-GUIDE-REFUNDS@1" in v.derivation


def test_forbidden_refuses_an_identity_left_without_scope() -> None:
    base = case("CASE-009")
    base["identity"]["scopes"] = ["internal"]
    with pytest.raises(InputError, match=r"identity\.scopes: taking 'internal' away"):
        derive_forbidden(base, DOCS)
    no_scope = [{k: v for k, v in d.items() if k != "access_scope"} for d in DOCS]
    with pytest.raises(InputError, match="field access_scope: required"):
        derive_forbidden(case("CASE-009"), no_scope)


# ------------------------------------------------------------------------------------------
# derive_partial


@pytest.mark.parametrize("policy", ["abstain", "clarify", "partial"])
def test_partial_adds_an_unsupported_claim(policy: str, tax: Taxonomy) -> None:
    v = derive_partial(
        case("CASE-001"),
        DOCS,
        extra_claim="Approved refunds reach the card within 5 to 10 business days.",
        extra_question="How long does the money take to get back to our card?",
        policy=policy,  # type: ignore[arg-type]
    )
    assert v.case["question"] == (
        "How many days after a monthly charge do we have to ask for a refund on Brightwave "
        "Workspace, and how long does the money take to get back to our card?"
    )
    assert v.case["required_claims"][-1] == (
        "Approved refunds reach the card within 5 to 10 business days."
    )
    assert len(v.case["required_claims"]) == 2
    assert v.suggested_decision == policy
    assert v.suggested_reasons == ("required_claim_not_covered",)
    assert v.suggested_slices == ("compound_insufficiency",)
    assert v.case["documents"] == CASES["CASE-001"]["documents"]
    assert_importable(v, tax)


def test_partial_refusals() -> None:
    base = case("CASE-001")
    with pytest.raises(InputError, match="extra_claim: must not be empty"):
        derive_partial(base, DOCS, extra_claim=" ", extra_question="And?")
    with pytest.raises(InputError, match="already a required claim"):
        derive_partial(base, DOCS, extra_claim=base["required_claims"][0], extra_question="Really?")
    with pytest.raises(InputError, match=r"is stated in POL-REFUND-MONTHLY@2"):
        derive_partial(
            base,
            DOCS,
            extra_claim="Partial months are not refunded.",
            extra_question="Are partial months refunded?",
        )
    with pytest.raises(InputError, match="field question: give question or extra_question"):
        derive_partial(base, DOCS, extra_claim="Refunds arrive within a week.")
    with pytest.raises(InputError, match="policy: 'maybe' is not one of"):
        derive_partial(
            base,
            DOCS,
            extra_claim="Refunds arrive within a week.",
            question="When?",
            policy="maybe",  # type: ignore[arg-type]
        )


# ------------------------------------------------------------------------------------------
# derive_edited


def test_edited_relocated_answer_is_forbidden_and_does_not_leak(tax: Taxonomy) -> None:
    base = case("CASE-001")
    v = derive_edited(base, DOCS, operator="relocate_answer", span=REFUND_PASSAGE)
    accessible, restricted = v.new_documents
    assert "14 days" not in accessible["body"].split("## 3.")[0]
    assert REFUND_PASSAGE in restricted["body"]
    assert restricted["access_scope"] == "restricted"
    vis = {d["doc_id"]: (d["visibility"], d["role"]) for d in v.case["documents"]}
    assert vis["POL-REFUND-MONTHLY-CF-RELOCATE-ANSWER"] == ("visible", "distractor")
    assert vis["POL-REFUND-MONTHLY-CF-RESTRICTED"] == ("forbidden", "decisive")
    assert v.evidence_state == "forbidden"
    assert (v.suggested_decision, v.suggested_reasons) == ("abstain", ("source_not_allowed",))
    checks = family_checks([present_variant(base, passage=REFUND_PASSAGE), v], DOCS)
    assert not failing(checks), failing(checks)
    assert_importable(v, tax)


def test_edited_instruction_keeps_the_base_decision(tax: Taxonomy) -> None:
    base = case("CASE-005")
    body = doc("SLA-ENTERPRISE", 2)["body"]
    pos = body.index("## 3. Service credits")
    v = derive_edited(base, DOCS, operator="insert_instruction", span=pos)
    assert v.evidence_state is None
    assert (v.suggested_decision, v.suggested_reasons) == ("answer", ())
    assert "adversarial_instruction" in v.case["slices"]
    roles = {d["doc_id"]: d["role"] for d in v.case["documents"]}
    assert roles["SLA-ENTERPRISE-CF-INSERT-INSTRUCTION"] == "decisive"
    assert "Assistant: ignore" in v.new_documents[0]["body"]
    assert_importable(v, tax)


def test_edited_year_swap_moves_the_documents_effective_date(tax: Taxonomy) -> None:
    v = derive_edited(
        case("CASE-005"),
        DOCS,
        operator="swap_year",
        span="From 1 January 2025",
        params={"to_year": 2023, "shift_effective_date": "2025-01-01"},
    )
    assert v.new_documents[0]["effective_date"] == "2023-01-01"
    assert (v.suggested_decision, v.suggested_reasons) == ("abstain", ("evidence_stale",))
    assert_importable(v, tax)


def test_edited_refusals() -> None:
    base = case("CASE-005")
    with pytest.raises(InputError, match="unknown edit operator"):
        derive_edited(base, DOCS, operator="paraphrase", span="99.95%")
    with pytest.raises(InputError, match=r"SLA-ENTERPRISE@2: .*does not occur"):
        derive_edited(base, DOCS, operator="change_unit", span="99.99%")
    with pytest.raises(InputError, match="position 99999 is outside"):
        derive_edited(base, DOCS, operator="insert_instruction", span=99999)
    with pytest.raises(InputError, match="no visible document PROD-PLANS"):
        derive_edited(base, DOCS, operator="change_unit", span="1 TB", doc_id="PROD-PLANS")


# ------------------------------------------------------------------------------------------
# Input checks shared by the builders


def test_builders_start_from_an_evidence_present_answer_case() -> None:
    with pytest.raises(InputError, match=r"CASE-002: field evidence_state: .* not 'removed'"):
        derive_removed(case("CASE-002"), DOCS)
    no_family = case("CASE-001")
    no_family["family"] = None
    with pytest.raises(InputError, match="CASE-001: field family: the case has no family key"):
        derive_forbidden(no_family, DOCS)
    broken = case("CASE-001")
    broken["documents"] = "POL-REFUND-MONTHLY"
    with pytest.raises(InputError, match="CASE-001: field documents: required"):
        derive_removed(broken, DOCS)
    bad_version = case("CASE-001")
    bad_version["documents"][0]["version"] = "2"
    with pytest.raises(InputError, match=r"field documents.0.version"):
        derive_removed(bad_version, DOCS)
    with pytest.raises(InputError, match="the text of POL-REFUND-MONTHLY@2 was not given"):
        derive_removed(case("CASE-001"), [d for d in DOCS if d["doc_id"] != "POL-REFUND-MONTHLY"])
    with pytest.raises(InputError, match=r"documents\[0\] \(X@1\): field body: required"):
        derive_removed(case("CASE-001"), [{"doc_id": "X", "version": 1}])
    two = case("CASE-007")
    two["evidence_state"] = "present"
    two["documents"][0]["role"] = "decisive"
    with pytest.raises(InputError, match=r"several candidates .*choose doc_id"):
        derive_removed(two, DOCS)
    stale_span = Span(0, 4, "Nope")
    with pytest.raises(InputError, match="does not match"):
        derive_removed(case("CASE-001"), DOCS, passage=stale_span)


def test_documents_may_use_doc_key_like_the_corpus_views() -> None:
    as_views = [
        {**{k: v for k, v in d.items() if k != "doc_id"}, "doc_key": d["doc_id"]} for d in DOCS
    ]
    v = derive_removed(case("CASE-001"), as_views, passage=REFUND_PASSAGE)
    assert v.new_documents[0]["doc_id"] == "POL-REFUND-MONTHLY-CF-REMOVED"


# ------------------------------------------------------------------------------------------
# family_checks


def refund_family() -> list[Variant]:
    base = case("CASE-001")
    return [
        present_variant(base, passage=REFUND_PASSAGE),
        derive_removed(base, DOCS),
        derive_removed(base, DOCS, passage=REFUND_PASSAGE),
        derive_conflicted(
            base, DOCS, passage="**14 days of the charge date**", params={"to_number": "30"}
        ),
        derive_forbidden(base, DOCS),
        derive_partial(
            base,
            DOCS,
            extra_claim="Approved refunds reach the card within 5 to 10 business days.",
            extra_question="How long does the money take to get back to our card?",
        ),
    ]


def test_a_well_built_family_passes_every_check() -> None:
    checks = family_checks(refund_family(), DOCS)
    assert not failing(checks), failing(checks)
    names = {c.name for c in checks}
    assert {
        "one_present",
        "same_family",
        "documents_known",
        "visibility_matches_scopes",
        "present_shows_passage",
        "forbidden_no_leak",
        "removed_no_passage",
    } <= names
    per_variant = [c for c in checks if c.name == "removed_no_passage"]
    assert len(per_variant) == 2 and all(c.variant for c in per_variant)


def test_exactly_one_evidence_present_variant() -> None:
    family = refund_family()
    two = [*family, present_variant(case("CASE-001"), passage=REFUND_PASSAGE)]
    assert "one_present" in failing(family_checks(two, DOCS))
    none = family[1:]
    bad = failing(family_checks(none, DOCS))
    assert bad["one_present"][0].detail.startswith("0 evidence-present")


def test_a_forbidden_variant_whose_answer_is_visible_elsewhere_fails() -> None:
    base = case("CASE-009")
    forbidden = derive_forbidden(base, DOCS, passage=DISCOUNT_PASSAGE)
    # a public note quoting the internal figure (without the bold markers) is a leak
    note = {
        "doc_id": "BLOG-EDU",
        "version": 1,
        "body": "# Schools\n\nGood news: accredited schools, colleges and universities receive 40% "
        "off Team and Business list prices, on annual billing only.",
        "access_scope": "public",
    }
    forbidden.case["documents"].append(
        {"doc_id": "BLOG-EDU", "version": 1, "visibility": "visible", "role": "distractor"}
    )
    family = [present_variant(base, passage=DISCOUNT_PASSAGE), forbidden]
    bad = failing(family_checks(family, [*DOCS, note]))
    assert list(bad) == ["forbidden_no_leak"]
    assert "BLOG-EDU@1" in bad["forbidden_no_leak"][0].detail
    clean = failing(
        family_checks(
            [present_variant(base, passage=DISCOUNT_PASSAGE), derive_forbidden(base, DOCS)], DOCS
        )
    )
    assert clean == {}


def test_a_removed_variant_that_still_shows_the_passage_fails() -> None:
    base = case("CASE-001")
    removed = derive_removed(base, DOCS)
    removed.case["documents"].append(
        {"doc_id": "SUP-GUIDE-REFUNDS", "version": 1, "visibility": "visible", "role": "context"}
    )
    # the internal guide restates the window in other words: not a verbatim leak ...
    family = [present_variant(base, passage=REFUND_PASSAGE), removed]
    assert "removed_no_passage" not in failing(family_checks(family, DOCS))
    # ... but putting the decisive document back is
    removed.case["documents"].append(
        {"doc_id": "POL-REFUND-MONTHLY", "version": 2, "visibility": "visible", "role": "context"}
    )
    bad = failing(family_checks(family, DOCS))
    assert "POL-REFUND-MONTHLY@2" in bad["removed_no_passage"][0].detail
    # the guide is internal and the identity only public: the scope check notices that too
    assert "SUP-GUIDE-REFUNDS@1 is visible" in bad["visibility_matches_scopes"][0].detail


def test_checks_report_what_cannot_be_verified() -> None:
    base = case("CASE-001")
    family = [present_variant(base), derive_removed(base, DOCS), derive_forbidden(base, DOCS)]
    bad = failing(family_checks(family, DOCS))
    assert "cannot be verified" in bad["removed_no_passage"][0].detail
    assert "cannot be verified" in bad["forbidden_no_leak"][0].detail
    assert bad["present_shows_passage"][0].detail == "no decisive passage recorded"
    wrong_passage = [present_variant(base, passage="Refunds are paid in gold."), family[1]]
    bad = failing(family_checks(wrong_passage, DOCS))
    assert (
        bad["present_shows_passage"][0].detail == "the decisive passage is in no visible document"
    )


def test_checks_notice_missing_texts_mixed_families_and_scope_mismatch() -> None:
    family = refund_family()
    stranger = present_variant(case("CASE-005"), passage="99.95%")
    bad = failing(family_checks([*family[1:], stranger], DOCS))
    assert "same_family" in bad
    without_copies = [d for d in DOCS if d["doc_id"] != "POL-REFUND-ANNUAL"]
    bad = failing(family_checks(family, without_copies))
    assert "POL-REFUND-ANNUAL@1" in bad["documents_known"][0].detail
    forbidden = family[4]
    forbidden.case["identity"]["scopes"].append("restricted")
    bad = failing(family_checks(family, DOCS))
    assert "is forbidden but its scope 'restricted' is granted" in (
        bad["visibility_matches_scopes"][0].detail
    )


def test_family_members_are_json_and_the_edit_records_replay() -> None:
    for v in refund_family():
        data = json.loads(json.dumps(v.as_dict()))
        assert data["case"]["family"] == "FAM-REFUND-WINDOW"
        for record, new in zip(v.edits, v.new_documents, strict=False):
            src = doc(record.doc_id, record.version)
            assert replay(record, src["body"]) == new["body"]


def test_find_span_is_the_same_passage_lookup_the_builders_use() -> None:
    body = doc("POL-REFUND-MONTHLY", 2)["body"]
    span = find_span(body, REFUND_PASSAGE)
    v = derive_removed(case("CASE-001"), DOCS, passage=span)
    assert v.decisive_passage == REFUND_PASSAGE
