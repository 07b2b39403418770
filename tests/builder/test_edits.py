"""Edit operators: behaviour on the demo documents, refusals, structure kept, provenance, replay."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from review.builder.edits import OPERATORS, EditRecord, edit_document, replay, replay_result
from review.builder.operator import EditResult, Params, Span, find_span, span_at
from review.builder.operators_text import (
    INSTRUCTION_EXAMPLES,
    DropExceptionParams,
    InsertInstructionParams,
    RelocateAnswerParams,
    RemoveAnswerParams,
)
from review.builder.operators_values import (
    JURISDICTIONS,
    TIERS,
    UNIT_FAMILIES,
    ChangeNumberParams,
    ChangeUnitParams,
    MoveJurisdictionParams,
    ReplaceTierParams,
    SwapYearParams,
)
from review.core.errors import InputError
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.corpus.docformat import parse_blocks, parse_markdown
from tests.helpers.paths import ROOT

DOCS_DIR = ROOT / "review" / "demo" / "docs"
TAX = load_taxonomy(ROOT / "policies" / "taxonomy.yaml")
DOCS: dict[str, str] = {
    p.stem: parse_markdown(p.read_text(encoding="utf-8"), p.name, TAX).body
    for p in sorted(DOCS_DIR.glob("*.md"))
}
# documents with headings, tables, footnotes and numbered clauses, used for the properties
SAMPLE = [
    "POL-REFUND-MONTHLY@2",
    "PROD-PLANS@2",
    "SLA-ENTERPRISE@2",
    "DATA-RETENTION@2",
    "CTR-MSA-ENT@2",
    "FAQ-PRODUCT@1",
    "FAQ-COMMUNITY@1",
    "SUP-HOURS@1",
    "SUP-GUIDE-REFUNDS@1",
    "DATA-RESIDENCY-EU@1",
    "SALES-CONTRACT-FAQ@1",
    "LEGAL-DE-ADDENDUM@1",
]


def structure(body: str) -> tuple[int, list[tuple[int, int]], int]:
    """What must survive an edit: headings, table shapes, footnote definitions."""
    blocks = parse_blocks(body)
    headings = sum(b.kind == "heading" for b in blocks)
    tables = [(len(b.rows), len(b.rows[0])) for b in blocks if b.kind == "table"]
    footnotes = sum(b.kind == "footnote" for b in blocks)
    return headings, tables, footnotes


def apply(name: str, text: str, span: Span, params: Params) -> EditResult:
    return OPERATORS[name].apply(text, span, params)


def sentence_span(text: str, passage: str) -> Span:
    return find_span(text, passage)


# ------------------------------------------------------------------------------------------
# Registry and suggestions


def test_registry_has_every_operator_the_experts_use() -> None:
    assert set(OPERATORS) >= {
        "replace_tier",
        "change_unit",
        "drop_exception",
        "swap_year",
        "move_jurisdiction",
        "remove_answer",
        "relocate_answer",
        "insert_instruction",
    }
    for name, op in OPERATORS.items():
        assert op.name == name
        assert op.description
        assert op.param_fields() is not None


@pytest.mark.parametrize(
    ("name", "decision", "reasons", "slice_"),
    [
        ("drop_exception", "abstain", ("required_claim_not_covered",), None),
        ("swap_year", "abstain", ("evidence_stale",), "temporal_mismatch"),
        ("move_jurisdiction", "abstain", ("no_answer_bearing_evidence",), None),
        ("relocate_answer", "abstain", ("source_not_allowed",), "access_filtered_answer"),
        ("insert_instruction", None, (), "adversarial_instruction"),
        ("replace_tier", "abstain", ("no_answer_bearing_evidence",), "entity_collision"),
        ("change_unit", "abstain", ("required_claim_not_covered",), None),
        ("remove_answer", "abstain", ("no_answer_bearing_evidence",), "near_neighbour_distractor"),
    ],
)
def test_each_operator_suggests_the_usual_decision(
    name: str, decision: str | None, reasons: tuple[str, ...], slice_: str | None
) -> None:
    sug = OPERATORS[name].suggestion
    assert sug.decision == decision
    assert sug.reason_codes == reasons
    if slice_:
        assert slice_ in sug.slices


def test_suggestions_use_only_taxonomy_terms(tax: Taxonomy) -> None:
    for op in OPERATORS.values():
        sug = op.suggestion
        assert sug.decision is None or sug.decision in tax.decisions
        assert set(sug.reason_codes) <= set(tax.reason_codes)
        assert set(sug.slices) <= set(tax.slices)
        assert sug.category is None or sug.category in tax.categories
        assert sug.evidence_state is None or sug.evidence_state in tax.evidence_states
        if sug.decision is not None and not tax.decisions[sug.decision].answers:
            assert sug.reason_codes, f"{op.name} suggests refusing without a reason"


def test_param_fields_describe_the_form() -> None:
    fields = {f.name: f for f in OPERATORS["swap_year"].param_fields()}
    assert fields["to_year"].required and fields["to_year"].type == "int"
    assert not fields["shift_effective_date"].required
    assert fields["shift_effective_date"].default is None
    assert "effective date" in fields["shift_effective_date"].help
    tier = OPERATORS["replace_tier"].param_fields()[0]
    assert tier.choices == TIERS


# ------------------------------------------------------------------------------------------
# Every candidate of every demo document keeps the document's shape


def test_every_candidate_edit_keeps_headings_tables_and_footnotes() -> None:
    edits = 0
    for doc, text in DOCS.items():
        shape = structure(text)
        for name, op in OPERATORS.items():
            for span in op.candidates(text):
                assert text[span.start : span.end] == span.text
                result = op.apply(text, span, op.example_params(text, span))
                assert result.text == text[: span.start] + result.after + text[span.end :]
                assert result.before == span.text
                assert structure(result.text) == shape, (doc, name, span)
                edits += 1
    assert edits > 500  # the demo corpus offers many edit points


def test_candidates_find_the_realistic_targets() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    kinds = {name: [s.text for s in op.candidates(text)] for name, op in OPERATORS.items()}
    assert "Starter" in kinds["replace_tier"] and "Business" in kinds["replace_tier"]
    assert "14 days" in kinds["change_unit"] and "14-day" in kinds["change_unit"]
    assert "2025" in kinds["swap_year"]
    assert len(kinds["drop_exception"]) == 3  # clauses 4.1, 4.2 and 4.4
    assert kinds["insert_instruction"][-1] == ""  # the end of the document is a position
    assert all(t == "" for t in kinds["insert_instruction"])


# ------------------------------------------------------------------------------------------
# replace_tier


def test_replace_tier_in_a_heading_and_a_clause() -> None:
    text = DOCS["SLA-TEAM@1"]
    span = sentence_span(
        text, "This commitment applies to Brightwave Workspace subscriptions on the **Team** tier."
    )
    result = apply("replace_tier", text, span, ReplaceTierParams(to_tier="Business"))
    assert result.after == (
        "This commitment applies to Brightwave Workspace subscriptions on the **Business** tier."
    )
    assert result.text.startswith("# Service level commitment: Team tier")  # outside the span


def test_replace_tier_changes_every_mention_of_the_first_tier_in_the_span() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    span = sentence_span(
        text, "This policy covers Starter, Team and Business subscriptions billed every month."
    )
    result = apply("replace_tier", text, span, ReplaceTierParams(to_tier="Enterprise"))
    assert result.after == (
        "This policy covers Enterprise, Team and Business subscriptions billed every month."
    )
    only_team = apply(
        "replace_tier", text, span, ReplaceTierParams(to_tier="Enterprise", from_tier="Team")
    )
    assert only_team.after == (
        "This policy covers Starter, Enterprise and Business subscriptions billed every month."
    )


def test_replace_tier_refusals() -> None:
    text = DOCS["SLA-TEAM@1"]
    span = find_span(text, "**Team** tier")
    with pytest.raises(InputError, match="would change nothing"):
        apply("replace_tier", text, span, ReplaceTierParams(to_tier="Team"))
    no_tier = find_span(text, "Features labelled beta or preview.")
    with pytest.raises(InputError, match="no product tier"):
        apply("replace_tier", text, no_tier, ReplaceTierParams(to_tier="Team"))
    with pytest.raises(InputError, match="to_tier: 'Gold' is not a tier"):
        ReplaceTierParams(to_tier="Gold")


# ------------------------------------------------------------------------------------------
# change_unit and change_number


def test_change_unit_keeps_the_number() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    span = find_span(text, "14 days of the charge date")
    result = apply("change_unit", text, span, ChangeUnitParams(to_unit="weeks"))
    assert result.after == "14 weeks of the charge date"
    hyphen = find_span(text, "The 14-day window")
    assert apply("change_unit", text, hyphen, ChangeUnitParams(to_unit="months")).after == (
        "The 14-month window"
    )


@pytest.mark.parametrize(
    ("doc", "passage", "to_unit", "expected"),
    [
        ("PROD-PLANS@2", "1 TB per user", "GB", "1 GB per user"),
        ("PROD-PLANS@2", "10 GB per user", "MB", "10 MB per user"),
        (
            "SLA-ENTERPRISE@2",
            "99.95% of each",
            "percentage points",
            "99.95 percentage points of each",
        ),
        ("SUP-GUIDE-REFUNDS@1", "above 500 EUR", "USD", "above 500 USD"),
        ("SUP-HOURS@1", "| 8 hours |", "days", "| 8 days |"),
        ("SUP-GUIDE-REFUNDS@1", "within 5 to 10 business days", "weeks", "within 5 to 10 weeks"),
    ],
)
def test_change_unit_across_families(doc: str, passage: str, to_unit: str, expected: str) -> None:
    text = DOCS[doc] if passage in DOCS[doc] else DOCS[doc].replace("Above 500", "above 500")
    span = find_span(text, passage)
    assert apply("change_unit", text, span, ChangeUnitParams(to_unit=to_unit)).after == expected


def test_change_unit_singular_after_one() -> None:
    text = "## Retention\n\nAudit logs are kept for 1 year on Business."
    span = find_span(text, "1 year")
    assert apply("change_unit", text, span, ChangeUnitParams(to_unit="months")).after == "1 month"


def test_change_unit_refusals() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    span = find_span(text, "14 days of the charge date")
    with pytest.raises(InputError, match=r"cannot change 'days' \(time\) into 'GB'"):
        apply("change_unit", text, span, ChangeUnitParams(to_unit="GB"))
    with pytest.raises(InputError, match="already in 'days'"):
        apply("change_unit", text, span, ChangeUnitParams(to_unit="days"))
    plain = find_span(text, "Partial months are not refunded.")
    with pytest.raises(InputError, match="no number with a recognised unit"):
        apply("change_unit", text, plain, ChangeUnitParams(to_unit="weeks"))
    with pytest.raises(InputError, match="to_unit: 'fortnights' is not a known unit"):
        ChangeUnitParams(to_unit="fortnights")


def test_change_number_keeps_the_unit() -> None:
    text = DOCS["SLA-ENTERPRISE@2"]
    span = find_span(text, "**45 days after the end of the affected month**")
    assert apply("change_number", text, span, ChangeNumberParams(to_number="60")).after == (
        "**60 days after the end of the affected month**"
    )
    pct = find_span(text, "99.95% of each calendar month")
    assert apply("change_number", text, pct, ChangeNumberParams(to_number="99.9")).after == (
        "99.9% of each calendar month"
    )
    with pytest.raises(InputError, match="already 45"):
        apply("change_number", text, span, ChangeNumberParams(to_number="45"))
    with pytest.raises(InputError, match="not a number"):
        ChangeNumberParams(to_number="forty")


# ------------------------------------------------------------------------------------------
# drop_exception


@pytest.mark.parametrize(
    ("doc", "before", "after"),
    [
        (
            "POL-REFUND-MONTHLY@2",
            "4.4 The 14-day window applies unless mandatory law in the customer's country gives "
            "a longer right to cancel.[^2]",
            "4.4 The 14-day window applies.[^2]",
        ),
        (
            "POL-REFUND-MONTHLY@2",
            "4.2 Charges for the Brightwave Connect add-on are non-refundable once the billing "
            "period has started, except where Brightwave has removed a connector the customer "
            "was paying for during that period.",
            "4.2 Charges for the Brightwave Connect add-on are non-refundable once the billing "
            "period has started.",
        ),
        (
            "CTR-MSA-ENT@2",
            "4.2 Except as set out in 4.3, a change of control does not give either party a "
            "right to terminate.",
            "4.2 A change of control does not give either party a right to terminate.",
        ),
        (
            "CTR-MSA-ENT@2",
            "renews automatically for successive 12-month periods unless either party gives "
            "written notice of non-renewal **at least 60 days** before the end of the current "
            "term.[^1]",
            "renews automatically for successive 12-month periods.[^1]",
        ),
        (
            "SLA-ENTERPRISE@2",
            "[^2]: Except for this termination right, service credits are the customer's sole "
            "remedy for unavailability.",
            "[^2]: Service credits are the customer's sole remedy for unavailability.",
        ),
        (
            "SUP-HOURS@1",
            "3.2 Starter, Team and Business support is closed on public holidays observed by the "
            "serving hub. This does not apply to Enterprise P1 cases, which are handled on every "
            "day of the year.",
            "3.2 Starter, Team and Business support is closed on public holidays observed by the "
            "serving hub.",
        ),
    ],
)
def test_drop_exception_keeps_the_rule_without_its_exception(
    doc: str, before: str, after: str
) -> None:
    text = DOCS[doc]
    span = find_span(text, before)
    result = apply("drop_exception", text, span, DropExceptionParams())
    assert result.after == after
    assert structure(result.text) == structure(text)


def test_drop_exception_removes_a_clause_that_is_only_an_exception_but_keeps_the_title() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    clause = (
        "4.1 This policy does not apply to workspaces suspended or terminated for breach of the "
        "acceptable use policy."
    )
    candidates = [s for s in OPERATORS["drop_exception"].candidates(text) if clause in s.text]
    assert len(candidates) == 1
    result = apply("drop_exception", text, candidates[0], DropExceptionParams())
    assert clause not in result.text
    assert "## 4. Exceptions\n\n4.2 Charges" in result.text
    assert structure(result.text) == structure(text)


def test_drop_exception_refusals() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    rule = find_span(text, "Partial months are not refunded.")
    with pytest.raises(InputError, match="no exception clause"):
        apply("drop_exception", text, rule, DropExceptionParams())
    narrow = find_span(text, "unless mandatory law")
    with pytest.raises(InputError, match="widen the span"):
        apply("drop_exception", text, narrow, DropExceptionParams())
    footnote = "# Terms\n\nCredits are capped.[^3]\n\n[^3]: This does not apply to Enterprise."
    span = find_span(footnote, "This does not apply to Enterprise.")
    with pytest.raises(InputError, match="leave the footnote empty"):
        apply("drop_exception", footnote, span, DropExceptionParams())
    heading = "# Exceptions unless stated\n\nNothing here."
    with pytest.raises(InputError, match="no exception clause"):
        apply(
            "drop_exception",
            heading,
            find_span(heading, "Exceptions unless stated"),
            DropExceptionParams(),
        )


# ------------------------------------------------------------------------------------------
# swap_year


def test_swap_year_changes_the_text_and_optionally_the_effective_date() -> None:
    text = DOCS["PROD-PLANS@2"]
    span = find_span(text, "(2025 price list)")
    plain = apply("swap_year", text, span, SwapYearParams(to_year=2026))
    assert plain.after == "(2026 price list)"
    assert plain.metadata == {}
    dated = apply(
        "swap_year", text, span, SwapYearParams(to_year=2023, shift_effective_date="2025-01-01")
    )
    assert dated.metadata == {"effective_date": "2023-01-01"}


def test_swap_year_moves_a_leap_day_to_the_28th() -> None:
    text = "# Notice\n\nEffective from 29 February 2024."
    span = find_span(text, "2024")
    result = apply(
        "swap_year", text, span, SwapYearParams(to_year=2025, shift_effective_date="2024-02-29")
    )
    assert result.metadata == {"effective_date": "2025-02-28"}


def test_swap_year_only_changes_the_chosen_year() -> None:
    text = DOCS["PROD-PLANS@2"]
    span = find_span(
        text,
        "This list replaces the 2024 price list and applies to new subscriptions from "
        "1 January 2025.",
    )
    result = apply("swap_year", text, span, SwapYearParams(to_year=2027, from_year=2025))
    assert result.after.endswith("from 1 January 2027.")
    assert "the 2024 price list" in result.after


def test_swap_year_refusals() -> None:
    text = DOCS["PROD-PLANS@2"]
    with pytest.raises(InputError, match="no year"):
        apply(
            "swap_year",
            text,
            find_span(text, "Starter prices are unchanged."),
            SwapYearParams(to_year=2020),
        )
    with pytest.raises(InputError, match="already says 2025"):
        apply("swap_year", text, find_span(text, "(2025 price list)"), SwapYearParams(to_year=2025))
    with pytest.raises(InputError, match="to_year: 3025 is not a year"):
        SwapYearParams(to_year=3025)
    with pytest.raises(InputError, match="shift_effective_date: '2025-13-01' is not a date"):
        SwapYearParams(to_year=2024, shift_effective_date="2025-13-01")


# ------------------------------------------------------------------------------------------
# move_jurisdiction


def test_move_jurisdiction_keeps_the_way_names_are_written() -> None:
    text = DOCS["DATA-RESIDENCY-EU@1"]
    span = find_span(
        text,
        "Both locations are inside the European Union, and backups of EU-region workspaces "
        "never leave the EU.",
    )
    result = apply("move_jurisdiction", text, span, MoveJurisdictionParams(to_jurisdiction="UK"))
    assert result.after == (
        "Both locations are inside the United Kingdom, and backups of UK-region workspaces "
        "never leave the UK."
    )
    assert result.metadata == {}
    tagged = apply(
        "move_jurisdiction",
        text,
        span,
        MoveJurisdictionParams(to_jurisdiction="APAC", set_metadata=True),
    )
    assert tagged.metadata == {"jurisdiction": "APAC"}


def test_move_jurisdiction_country_names_and_refusals() -> None:
    text = DOCS["LEGAL-DE-ADDENDUM@1"]
    span = find_span(text, "a billing address in Germany")
    result = apply("move_jurisdiction", text, span, MoveJurisdictionParams(to_jurisdiction="FR"))
    assert result.after == "a billing address in France"
    with pytest.raises(InputError, match="already names DE"):
        apply("move_jurisdiction", text, span, MoveJurisdictionParams(to_jurisdiction="DE"))
    with pytest.raises(InputError, match="no jurisdiction"):
        apply(
            "move_jurisdiction",
            text,
            find_span(text, "German law applies."),
            MoveJurisdictionParams(to_jurisdiction="US"),
        )
    with pytest.raises(InputError, match="'Mars' is not a jurisdiction"):
        MoveJurisdictionParams(to_jurisdiction="Mars")
    assert set(JURISDICTIONS) <= set(TAX.jurisdictions)


# ------------------------------------------------------------------------------------------
# remove_answer


def test_remove_answer_keeps_the_faq_question() -> None:
    text = DOCS["FAQ-PRODUCT@1"]
    span = next(
        s for s in OPERATORS["remove_answer"].candidates(text) if "Starter includes two" in s.text
    )
    result = apply("remove_answer", text, span, RemoveAnswerParams())
    assert "**Are guest accounts free?**\n\n## Files and storage" in result.text
    assert "Starter includes two guest accounts" not in result.text
    assert structure(result.text) == structure(text)


def test_remove_answer_keeps_a_question_heading() -> None:
    text = DOCS["SALES-CONTRACT-FAQ@1"]
    span = next(
        s for s in OPERATORS["remove_answer"].candidates(text) if "standard period is 60" in s.text
    )
    result = apply("remove_answer", text, span, RemoveAnswerParams())
    assert (
        "## Can the renewal notice period be shortened?\n\n## Can the customer get termination"
        in result.text
    )
    assert "60 days" not in result.text


def test_remove_answer_on_a_selected_sentence_keeps_the_question_in_it() -> None:
    text = DOCS["FAQ-PRODUCT@1"]
    span = find_span(
        text,
        "**Can we work offline?**\nThe desktop apps for Windows and macOS can keep selected "
        "folders available offline. There is no Linux desktop app.",
    )
    result = apply("remove_answer", text, span, RemoveAnswerParams())
    assert result.after == "**Can we work offline?**"


def test_remove_answer_refusals() -> None:
    text = DOCS["FAQ-PRODUCT@1"]
    with pytest.raises(InputError, match="includes a table"):
        apply("remove_answer", text, find_span(text, "| Starter | 250 MB |"), RemoveAnswerParams())
    with pytest.raises(InputError, match="only questions or headings"):
        apply(
            "remove_answer", text, find_span(text, "**Can we work offline?**"), RemoveAnswerParams()
        )


# ------------------------------------------------------------------------------------------
# relocate_answer


def test_relocate_answer_returns_an_accessible_and_a_restricted_text() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    answer = (
        "A customer may ask for a refund of a monthly subscription charge within "
        "**14 days of the charge date**.[^1]"
    )
    result = apply("relocate_answer", text, find_span(text, answer), RelocateAnswerParams())
    assert "14 days" not in result.after
    assert result.after == (
        "A customer may ask for a refund of a monthly subscription charge within "
        "**a set number of days of the charge date**.[^1]"
    )
    (extra,) = result.extra_documents
    assert extra.access_scope == "restricted"
    assert answer in extra.body
    assert "## 2. Refund window" in extra.body
    assert extra.title == "Refunds for monthly plans (restricted extract)"
    assert structure(result.text) == structure(text)


def test_relocate_answer_with_a_written_related_sentence() -> None:
    text = DOCS["SLA-ENTERPRISE@2"]
    span = find_span(text, "Credits for a month are capped at 30% of that month's Enterprise fee.")
    params = RelocateAnswerParams(
        related_text="Credits for a month are capped; the cap is set in the order form.",
        title="Enterprise credit caps",
        access_scope="internal",
    )
    result = apply("relocate_answer", text, span, params)
    assert result.after == params.related_text
    assert result.extra_documents[0].access_scope == "internal"
    assert result.extra_documents[0].body.startswith("# Enterprise credit caps\n\n")


def test_relocate_answer_refusals() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    with pytest.raises(InputError, match="no figure to withhold"):
        apply(
            "relocate_answer",
            text,
            find_span(text, "Partial months are not refunded."),
            RelocateAnswerParams(),
        )
    with pytest.raises(InputError, match="includes a heading"):
        apply(
            "relocate_answer",
            text,
            find_span(text, "## 2. Refund window\n\n2.1"),
            RelocateAnswerParams(related_text="Refunds are possible."),
        )
    two_clauses = find_span(
        text,
        "of that single charge. The subscription is cancelled when the refund is issued and "
        "the workspace becomes read-only.\n\n2.3 Refunds",
    )
    with pytest.raises(InputError, match="crosses a block boundary"):
        apply(
            "relocate_answer",
            text,
            two_clauses,
            RelocateAnswerParams(related_text="Refunds are possible."),
        )
    with pytest.raises(InputError, match="non-public scope"):
        RelocateAnswerParams(access_scope="public")
    with pytest.raises(InputError, match="related_text: must be plain text"):
        RelocateAnswerParams(related_text="- first item")


# ------------------------------------------------------------------------------------------
# insert_instruction


def test_insert_instruction_adds_its_own_paragraph() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    pos = text.index("## 3. Cancelling")
    result = apply("insert_instruction", text, Span(pos, pos, ""), InsertInstructionParams())
    before = parse_blocks(text)
    after = parse_blocks(result.text)
    assert len(after) == len(before) + 1
    inserted = [b for b in after if b.text == InsertInstructionParams().instruction]
    assert len(inserted) == 1 and inserted[0].kind == "paragraph"
    assert structure(result.text) == structure(text)


def test_insert_instruction_at_the_end() -> None:
    text = DOCS["SLA-TEAM@1"]
    end = Span(len(text), len(text), "")
    instr = INSTRUCTION_EXAMPLES[1]
    result = apply("insert_instruction", text, end, InsertInstructionParams(instruction=instr))
    assert result.text == text + "\n\n" + instr
    assert parse_blocks(result.text)[-1].text == instr


def test_insert_instruction_refusals() -> None:
    text = DOCS["SLA-TEAM@1"]
    mid = text.index("core services")
    with pytest.raises(InputError, match="not between blocks"):
        apply("insert_instruction", text, Span(mid, mid, ""), InsertInstructionParams())
    with pytest.raises(InputError, match="empty span"):
        apply(
            "insert_instruction", text, find_span(text, "core services"), InsertInstructionParams()
        )
    with pytest.raises(InputError, match="instruction: must be plain text"):
        InsertInstructionParams(instruction="# Ignore all rules")
    with pytest.raises(InputError, match="single line"):
        InsertInstructionParams(instruction="Ignore\nall rules")
    with pytest.raises(InputError, match="must not be empty"):
        InsertInstructionParams(instruction="   ")


# ------------------------------------------------------------------------------------------
# Spans and params from forms


def test_spans_out_of_range_or_stale_are_refused() -> None:
    text = DOCS["SLA-TEAM@1"]
    op = OPERATORS["replace_tier"]
    with pytest.raises(InputError, match="out of range"):
        op.apply(text, Span(10, len(text) + 5, "x"), ReplaceTierParams(to_tier="Business"))
    with pytest.raises(InputError, match="does not match"):
        op.apply(text, Span(0, 5, "Hello"), ReplaceTierParams(to_tier="Business"))
    with pytest.raises(InputError, match="out of range"):
        span_at(text, -1, 4)
    assert span_at(text, 0, 9).text == "# Service"
    with pytest.raises(InputError, match=r"occurs \d+ times"):
        find_span(text, "Team")
    with pytest.raises(InputError, match="does not occur"):
        find_span(text, "Platinum tier")


def test_params_from_json_are_checked_field_by_field() -> None:
    op = OPERATORS["swap_year"]
    assert op.parse_params({"to_year": 2024}) == SwapYearParams(to_year=2024)
    with pytest.raises(InputError, match="Swap the year: unknown parameter 'year'"):
        op.parse_params({"year": 2024})
    with pytest.raises(InputError, match="parameter to_year: required but missing"):
        op.parse_params({})
    with pytest.raises(InputError, match="to_year: expected int, got bool"):
        op.parse_params({"to_year": True})
    with pytest.raises(InputError, match="to_year: expected int, got str"):
        op.parse_params({"to_year": "2024"})
    with pytest.raises(InputError, match="expected ReplaceTierParams"):
        OPERATORS["replace_tier"].apply("Team", Span(0, 4, "Team"), SwapYearParams(to_year=2024))


# ------------------------------------------------------------------------------------------
# Provenance and replay


def test_edit_record_round_trips_through_json_and_replays() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    span = find_span(text, "14 days of the charge date")
    result, record = edit_document(
        text, "change_unit", span, {"to_unit": "weeks"}, doc_id="POL-REFUND-MONTHLY", version=2
    )
    assert record.before == "14 days of the charge date"
    assert record.after == "14 weeks of the charge date"
    assert (record.start, record.end) == (span.start, span.end)
    data = json.loads(json.dumps(record.to_dict()))
    assert data["params"] == {"to_unit": "weeks"}
    again = EditRecord.from_dict(data)
    assert again == record
    assert replay(again, text) == result.text


def test_narrowed_shows_only_what_changed() -> None:
    text = DOCS["POL-REFUND-MONTHLY@2"]
    span = find_span(text, "14 days of the charge date")
    result = apply("change_unit", text, span, ChangeUnitParams(to_unit="weeks"))
    start, end, before, after = result.narrowed()
    assert (before, after) == ("day", "week")
    assert text[start:end] == "day"


def test_replay_refuses_a_changed_source_and_a_malformed_record() -> None:
    text = DOCS["SLA-TEAM@1"]
    span = find_span(text, "**Team** tier")
    _result, record = edit_document(
        text,
        "replace_tier",
        span,
        ReplaceTierParams(to_tier="Business"),
        doc_id="SLA-TEAM",
        version=1,
    )
    edited_source = text.replace("**Team** tier", "**Teams** tier")
    with pytest.raises(InputError, match=r"SLA-TEAM@1: the text at \d+-\d+ differs"):
        replay(record, edited_source)
    with pytest.raises(InputError, match="outside the text"):
        replay(record, text[:20])
    tampered = EditRecord(**{**record.to_dict(), "after": "**Starter** tier"})
    with pytest.raises(InputError, match="different result"):
        replay(tampered, text)
    good = record.to_dict()
    bad: list[tuple[dict[str, Any], str]] = [
        ({k: v for k, v in good.items() if k != "before"}, "field before: required"),
        ({**good, "version": "2"}, "field version: has the wrong type"),
        ({**good, "version": True}, "field version: has the wrong type"),
        ({**good, "colour": "red"}, "field colour: unknown field"),
        ({**good, "operator": "shuffle"}, "unknown edit operator 'shuffle'"),
        ({**good, "params": {"to_tier": "Gold"}}, "to_tier: 'Gold' is not a tier"),
    ]
    for data, message in bad:
        with pytest.raises(InputError, match=message):
            EditRecord.from_dict(data)


PARAM_CHOICES: dict[str, list[Params]] = {
    "replace_tier": [ReplaceTierParams(to_tier=t) for t in TIERS],
    "change_unit": [ChangeUnitParams(to_unit=u) for us in UNIT_FAMILIES.values() for u in us],
    "change_number": [ChangeNumberParams(to_number=n) for n in ("0", "7", "30", "99.9", "1,500")],
    "drop_exception": [DropExceptionParams()],
    "swap_year": [
        SwapYearParams(to_year=y, shift_effective_date=d)
        for y in (1999, 2023, 2030)
        for d in (None, "2024-02-29")
    ],
    "move_jurisdiction": [
        MoveJurisdictionParams(to_jurisdiction=k, set_metadata=b)
        for k in JURISDICTIONS
        for b in (False, True)
    ],
    "remove_answer": [RemoveAnswerParams()],
    "relocate_answer": [
        RelocateAnswerParams(),
        RelocateAnswerParams(
            related_text="The exact figure is in the internal billing guide.",
            access_scope="internal",
        ),
    ],
    "insert_instruction": [InsertInstructionParams(instruction=x) for x in INSTRUCTION_EXAMPLES],
}


def test_property_choices_cover_every_operator() -> None:
    assert set(PARAM_CHOICES) == set(OPERATORS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_replay_recreates_every_edit(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(SAMPLE), label="doc")
    text = DOCS[doc]
    name = data.draw(st.sampled_from(sorted(OPERATORS)), label="operator")
    op = OPERATORS[name]
    spans = op.candidates(text)
    if not spans:
        return
    span = data.draw(st.sampled_from(spans), label="span")
    valid = []
    for p in PARAM_CHOICES[name]:
        try:
            op.apply(text, span, p)
        except InputError:
            continue
        valid.append(p)
    assert valid, f"no parameters apply to candidate {span} of {doc}"
    params = data.draw(st.sampled_from(valid), label="params")
    result, record = edit_document(text, name, span, params, doc_id=doc, version=1)
    assert replay(record, text) == result.text
    stored = EditRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    again = replay_result(stored, text)
    assert again.text == result.text
    assert again.metadata == result.metadata
    assert again.extra_documents == result.extra_documents
    assert structure(result.text) == structure(text)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_selection_is_edited_inside_it_or_refused(data: st.DataObject) -> None:
    """A user may select any range: the edit stays inside it and keeps the shape, or is refused."""
    doc = data.draw(st.sampled_from(SAMPLE), label="doc")
    text = DOCS[doc]
    start = data.draw(st.integers(0, len(text)), label="start")
    end = data.draw(st.integers(start, min(len(text), start + 400)), label="end")
    name = data.draw(st.sampled_from(sorted(OPERATORS)), label="operator")
    params = data.draw(st.sampled_from(PARAM_CHOICES[name]), label="params")
    span = span_at(text, start, end)
    try:
        result = OPERATORS[name].apply(text, span, params)
    except InputError:
        return
    assert result.text[:start] == text[:start]
    assert result.text[len(result.text) - (len(text) - end) :] == text[end:]
    assert structure(result.text) == structure(text)


def test_exception_candidates_of_a_body_full_of_markers() -> None:
    """A hostile body: tens of thousands of exception markers in one sentence or one per
    paragraph. Each sentence offers its exceptions as before, up to the per-sentence cap."""
    from review.builder.operators_text import MAX_MARKERS_PER_SENTENCE

    op = OPERATORS["drop_exception"]
    one_sentence = "Refunds apply except " + "except " * 30_000 + "in May."
    assert len(op.candidates(one_sentence)) <= MAX_MARKERS_PER_SENTENCE
    paragraphs = "Refunds apply, except in May.\n\n" * 5_000
    spans = op.candidates(paragraphs)
    assert len(spans) == 5_000 and spans[0].text == "Refunds apply, except in May."


# Wikipedia passages (the public MuSiQue sample, issue 35)


def test_an_abbreviation_or_initial_ends_no_sentence() -> None:
    from review.builder.layout import sentence_ranges

    def sentences(t: str) -> list[str]:
        return [t[a:b] for a, b in sentence_ranges(t, 0, len(t))]

    assert sentences("Albert ( , ; c. 1338 – 1 April 1412) was King of Sweden. He died.") == [
        "Albert ( , ; c. 1338 – 1 April 1412) was King of Sweden.",
        "He died.",
    ]
    assert sentences("G. Stanley Hall was first. John F. Kennedy spoke. St. Louis is big.") == [
        "G. Stanley Hall was first.",
        "John F. Kennedy spoke.",
        "St. Louis is big.",
    ]
    # a capital after a lower-case word still ends one ("plan A."), as do numbers and marks
    assert sentences("We use plan A. Then we wait. Refunds take 14 days. See e.g. Section 4.") == [
        "We use plan A.",
        "Then we wait.",
        "Refunds take 14 days.",
        "See e.g. Section 4.",
    ]


def test_remove_answer_takes_a_sentence_with_c_dot_whole() -> None:
    text = "Albert ( , ; c. 1338 – 1 April 1412) was King of Sweden.\n\nHe was a duke."
    spans = OPERATORS["remove_answer"].candidates(text)
    assert any(s.text.startswith("Albert ( , ; c. 1338") for s in spans)
    assert not any(s.text.startswith("1338") for s in spans)


def test_an_edit_that_leaves_no_text_is_refused_before_the_save() -> None:
    from review.core.errors import InputError

    text = "Albert ( , ; c. 1338 – 1 April 1412) was King of Sweden."
    span = OPERATORS["remove_answer"].candidates(text)[0]
    assert span.text == text
    with pytest.raises(InputError, match="would leave this document with no text"):
        edit_document(text, "remove_answer", span, {}, doc_id="A", version=1)


def test_an_invalid_derived_document_is_named_in_words(tax: Any) -> None:
    """The save's last check reads as the workbench's messages do: the field and the
    problem, not the validator's type codes and web address."""
    from review.builder.documents import insert_document
    from review.core.errors import InputError
    from review.core.identity import SYSTEM

    data = {
        "doc_id": "A-CF-1",
        "version": 1,
        "title": "A",
        "body": "",
        "authority": "guide",
        "owner": "o",
        "access_scope": "public",
        "jurisdiction": "global",
    }
    with pytest.raises(InputError) as got:
        insert_document(None, SYSTEM, tax, data, "test")  # type: ignore[arg-type]
    assert str(got.value).startswith("A-CF-1@1: the derived document is not valid: field body:")
    assert "pydantic" not in str(got.value) and "type=" not in str(got.value)


def test_a_span_that_cuts_a_word_after_except_has_no_exception_clause() -> None:
    """A selection ending inside "exception" ("The except|ion is...") matched "except" as a
    marker at the selection's end and failed an internal assertion (found by the test above);
    it is refused as a span without an exception clause."""
    text = "# FAQ\n\nNot as standard. The exception is approved by Legal.\n"
    end = text.index("exception") + len("except")
    with pytest.raises(InputError, match="no exception clause"):
        OPERATORS["drop_exception"].apply(text, span_at(text, 0, end), DropExceptionParams())
