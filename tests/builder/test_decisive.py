"""Every decisive passage is accounted for (issue 17, item 18), candidate spans on plain
passages, and replacement values that read like the span (item 14).

The case is a support agent's question answered by two decisive documents of the demo: the
public monthly refund policy (clause 2.1, "within 14 days of the charge date") and the internal
agent guide (a plain paragraph under "2. Monthly plans": "no more than 14 days old"). Taking
the answer out of one leaves it in the other, so the evidence is not gone."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from sqlalchemy import Engine

from review.builder import family_view, forms, variants
from review.builder.edits import OPERATORS
from review.builder.families import (
    derive_edited,
    derive_forbidden,
    derive_removed,
    present_variant,
)
from review.builder.family_checks import family_checks
from review.builder.operator import find_span
from review.builder.operators_values import propose_number
from review.cases import cases
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from tests.helpers.paths import ROOT
from tests.helpers.transact import write

DEMO_DOCS = ROOT / "review" / "demo" / "docs"
TAX = load_taxonomy(ROOT / "policies" / "taxonomy.yaml")
FILES = ("POL-REFUND-MONTHLY@2", "POL-REFUND-ANNUAL@1", "SUP-GUIDE-REFUNDS@1")
PARSED = [
    parse_markdown((DEMO_DOCS / f"{name}.md").read_text(encoding="utf-8"), f"{name}.md", TAX)
    for name in FILES
]
DOCS: list[dict[str, Any]] = [d.model_dump() for d in PARSED]
GUIDE_SENTENCE = "Approve in the billing console when the charge is no more than 14 days old."
POLICY_PASSAGE = "within **14 days of the charge date**"
AGENT_CASE: dict[str, Any] = {
    "key": "AGENT-001",
    "question": "How old can a monthly charge be for an agent to approve its refund?",
    "required_claims": ["A monthly plan charge can be refunded up to 14 days after it."],
    "identity": {"name": "support-agent", "scopes": ["public", "internal"]},
    "documents": [
        {"doc_id": "POL-REFUND-MONTHLY", "version": 2, "visibility": "visible", "role": "decisive"},
        {"doc_id": "SUP-GUIDE-REFUNDS", "version": 1, "visibility": "visible", "role": "decisive"},
        {
            "doc_id": "POL-REFUND-ANNUAL",
            "version": 1,
            "visibility": "visible",
            "role": "distractor",
        },
    ],
    "expected_decision": "answer",
    "reason_codes": [],
    "category": "in_scope",
    "slices": ["near_neighbour_distractor"],
    "split": "train",
    "family": "FAM-AGENT-REFUND",
    "evidence_state": "present",
    "language": "en",
    "status": "ready",
}


def body(doc_id: str) -> str:
    return str(next(d["body"] for d in DOCS if d["doc_id"] == doc_id))


def guide_span() -> Any:
    text = body("SUP-GUIDE-REFUNDS")
    return next(s for s in OPERATORS["remove_answer"].candidates(text) if GUIDE_SENTENCE in s.text)


def failing(checks: list[Any]) -> list[Any]:
    return [c for c in checks if not c.passed]


# ------------------------------------------------------------------------------------------
# Two decisive documents: edit one, the other still carries the answer


def test_removing_the_answer_from_one_decisive_document_keeps_the_answer() -> None:
    v = derive_edited(
        copy.deepcopy(AGENT_CASE),
        DOCS,
        operator="remove_answer",
        span=guide_span(),
        doc_id="SUP-GUIDE-REFUNDS",
    )
    # the suggestion does not claim the evidence is gone
    assert (v.suggested_decision, v.suggested_reasons) == ("answer", ())
    assert v.evidence_state is None
    assert "POL-REFUND-MONTHLY@2 still carries the answer" in v.case["notes"]
    # ... only if it states the whole answer: a multi-step question's parts are no backups
    # (found on the public MuSiQue sample, where each decisive document holds one hop)
    assert "one step of a multi-step question" in v.case["notes"]
    assert "choose Abstain or Partial answer yourself" in v.case["notes"]
    roles = {d["doc_id"]: d["role"] for d in v.case["documents"]}
    assert roles["POL-REFUND-MONTHLY"] == "decisive"
    assert roles["SUP-GUIDE-REFUNDS-CF-REMOVE-ANSWER"] == "distractor"  # its answer is gone
    (copy_doc,) = v.new_documents
    assert "no more than 14 days old" not in copy_doc["body"]
    assert "## 2. Monthly plans" in copy_doc["body"]
    # the family check flags the variant: the other decisive document still shows the answer
    present = present_variant(AGENT_CASE, passage=POLICY_PASSAGE)
    checks = family_checks([present, v], DOCS)
    (flag,) = failing(checks)
    assert flag.name == "decisive_documents_accounted"
    assert flag.detail.startswith("SUP-GUIDE-REFUNDS@1 is edited or hidden here but ")
    assert "POL-REFUND-MONTHLY@2 still carries the answer" in flag.detail


def test_editing_every_decisive_document_passes_and_suggests_abstain() -> None:
    """Control: with one decisive document, the same edit takes the evidence away."""
    single = copy.deepcopy(AGENT_CASE)
    single["documents"] = [d for d in single["documents"] if d["doc_id"] != "POL-REFUND-MONTHLY"]
    v = derive_edited(
        single, DOCS, operator="remove_answer", span=guide_span(), doc_id="SUP-GUIDE-REFUNDS"
    )
    assert (v.suggested_decision, v.evidence_state) == ("abstain", "removed")
    present = present_variant(single, passage=GUIDE_SENTENCE)
    checks = family_checks([present, v], DOCS)
    assert not failing(checks)
    assert all(c.name != "decisive_documents_accounted" for c in checks)


@pytest.mark.parametrize("kind", ["removed", "forbidden"])
def test_removed_or_forbidden_on_one_decisive_document_is_flagged(kind: str) -> None:
    base = copy.deepcopy(AGENT_CASE)
    if kind == "removed":
        v = derive_removed(base, DOCS, passage=POLICY_PASSAGE, doc_id="POL-REFUND-MONTHLY")
    else:
        v = derive_forbidden(base, DOCS, passage=POLICY_PASSAGE, doc_id="POL-REFUND-MONTHLY")
    assert v.suggested_decision == "answer"  # the guide still answers
    assert "SUP-GUIDE-REFUNDS@1 still carries the answer" in v.case["notes"]
    checks = family_checks([present_variant(AGENT_CASE, passage=POLICY_PASSAGE), v], DOCS)
    names = {c.name for c in failing(checks)}
    assert "decisive_documents_accounted" in names


def test_the_family_view_flags_a_saved_variant_and_keeps_the_answer(
    engine: Engine, tax: Taxonomy
) -> None:
    """The same through the database: saved with the builder, read back in the family view."""
    corpus.import_documents(engine, SYSTEM, PARSED)
    item = cases.validate_case(copy.deepcopy(AGENT_CASE), "agent", 1, tax)
    base_id = write(engine, cases.create_case, SYSTEM, item, tax)
    docs = forms_docs(engine, base_id)
    guide = next(d for d in docs if d.ref == "SUP-GUIDE-REFUNDS@1")
    assert forms.other_decisive(docs, guide.ref) == ["POL-REFUND-MONTHLY@2"]
    span = guide_span()
    saved = write(
        engine,
        variants.build_variant,
        SYSTEM,
        tax,
        base_id,
        variants.VariantSpec(
            "edited",
            doc_ref=guide.ref,
            operator="remove_answer",
            start=span.start,
            end=span.end,
            params={},
        ),
    )
    assert (saved.suggested_decision, saved.evidence_state) == ("answer", None)
    fam = family_view.family_view(engine, SYSTEM, "FAM-AGENT-REFUND")
    assert fam is not None
    flagged = [c for c in fam.failed if c.name == "decisive_documents_accounted"]
    assert [c.variant for c in flagged] == [saved.key]
    row = next(r for r in fam.variants if r.key == saved.key)
    assert row.suggested_decision == "answer"


def forms_docs(engine: Engine, case_id: int) -> list[Any]:
    from review.builder import documents

    return documents.case_documents(engine, SYSTEM, case_id)


# ------------------------------------------------------------------------------------------
# Candidate spans on plain passages


def test_remove_answer_proposes_the_sentences_of_plain_paragraphs() -> None:
    text = body("SUP-GUIDE-REFUNDS")  # headings that are not questions, no FAQ layout
    spans = OPERATORS["remove_answer"].candidates(text)
    assert any(GUIDE_SENTENCE in s.text for s in spans)
    timing = next(s for s in spans if s.text.startswith("Approved refunds reach a card"))
    result = OPERATORS["remove_answer"].apply_dict(text, timing, {})
    assert "5 to 10 business days" not in result.text
    assert "Refunds of bank transfers can take up to 15 business days." in result.text
    assert "## 4. Refund timing\n\nRefunds of bank transfers" in result.text  # no gap left


def test_every_plain_document_of_the_demo_gets_answer_spans_that_apply() -> None:
    op = OPERATORS["remove_answer"]
    for path in sorted(DEMO_DOCS.glob("*.md")):
        text = parse_markdown(path.read_text(encoding="utf-8"), path.name, TAX).body
        spans = op.candidates(text)
        assert spans, path.name
        for s in spans:
            result = op.apply_dict(text, s, {})
            assert "\n\n\n" not in result.text, (path.name, s.text)


def test_a_list_item_or_a_paragraph_goes_without_leaving_a_gap() -> None:
    text = (
        "Refunds for monthly plans are available within 14 days of the charge.\n\n"
        "- Team plans get a 30-day trial.\n"
        "- Business plans get 60 days.\n"
        "- What about Starter?\n\n"
        "Annual plans are prorated.\n"
    )
    op = OPERATORS["remove_answer"]
    spans = {s.text.strip(): s for s in op.candidates(text)}
    assert "- What about Starter?" not in spans  # a question is not an answer
    out = op.apply_dict(text, spans["- Business plans get 60 days."], {}).text
    assert "- Team plans get a 30-day trial.\n- What about Starter?\n\n" in out
    out = op.apply_dict(text, spans["Annual plans are prorated."], {}).text
    assert out.endswith("- What about Starter?\n")


# ------------------------------------------------------------------------------------------
# Replacement values that read like the span


@pytest.mark.parametrize(
    ("num", "unit", "proposed"),
    [
        ("15", "%", "30"),
        ("60", "%", "20"),  # a percentage stays within 100%
        ("99.95", "%", "99.90"),  # an uptime commitment keeps its decimals
        ("100", "%", "99"),
        ("0", "%", "1"),
        ("1,500", "EUR", "3,000"),  # thousands separators kept
        ("2,5", "%", "5,0"),  # a decimal comma kept
        ("14", "days", "28"),
        ("0.5", "percentage points", "1.0"),
    ],
)
def test_proposed_numbers_keep_the_format_and_the_unit_sense(
    num: str, unit: str, proposed: str
) -> None:
    assert propose_number(num, unit) == proposed


def test_the_form_proposes_a_percentage_for_a_percentage_span() -> None:
    text = "Monthly uptime of at least 99.95% is committed; a 60% share of credits applies."
    for passage, after in (("99.95%", "99.90%"), ("60%", "20%")):
        span = find_span(text, passage)
        defaults = forms.form_defaults("change_number", text, span.start, span.end)
        result = OPERATORS["change_number"].apply_dict(text, span, defaults)
        assert result.after == after
    assert forms.form_defaults("change_number", text, 0, 7) == {}  # no quantity: no default
