"""Export adapters: Ragas single-turn JSONL and DeepEval goldens JSON, against the field names
those libraries document, on the demo cases."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import Engine

from review.builder import suggestions, variants
from review.cases import cases, exchange
from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from storage.db import make_engine, migrate
from tests.helpers.actors import make_actor
from tests.helpers.databases import copy_db
from tests.helpers.transact import write


@pytest.fixture
def demo_url(tmp_path: Path, demo_base_template: Path) -> str:
    """These tests build their own variants: start from the demo without them."""
    return copy_db(demo_base_template, tmp_path)


# The documented schemas. Ragas: ragas.dataset_schema.SingleTurnSample (a pydantic model that
# ignores unknown keys, so extra keys travel alongside). DeepEval: deepeval.dataset.Golden,
# loaded from a JSON list by EvaluationDataset.add_goldens_from_json_file.
RAGAS_SINGLE_TURN = {
    "user_input",
    "retrieved_contexts",
    "reference_contexts",
    "retrieved_context_ids",
    "reference_context_ids",
    "response",
    "multi_responses",
    "reference",
    "rubrics",
}
DEEPEVAL_GOLDEN = {
    "input",
    "actual_output",
    "expected_output",
    "context",
    "retrieval_context",
    "additional_metadata",
    "comments",
    "tools_called",
    "expected_tools",
    "source_file",
    "name",
    "custom_column_key_values",
}


def export(
    engine: Engine, fmt: str, tax: Taxonomy, **kw: object
) -> tuple[str, exchange.ExportReport]:
    buf = io.StringIO()
    kw.setdefault("viewer", SYSTEM)
    report = exchange.export(engine, buf, fmt, tax, **kw)  # type: ignore[arg-type]
    return buf.getvalue(), report


def ragas_rows(engine: Engine, tax: Taxonomy, **kw: object) -> dict[str, dict[str, object]]:
    text, _ = export(engine, "ragas", tax, **kw)
    rows = [json.loads(line) for line in text.splitlines()]
    return {str(r["case_key"]): r for r in rows}


def body(engine: Engine, ref: str) -> str:
    doc = corpus.find_document(engine, SYSTEM, ref)
    assert doc is not None
    return doc.body


def test_field_names_follow_the_documented_schemas() -> None:
    assert set(exchange.RAGAS_FIELDS) <= RAGAS_SINGLE_TURN
    assert set(exchange.RAGAS_FIELDS) == {
        "user_input",
        "retrieved_contexts",
        "retrieved_context_ids",
        "reference",
    }
    # the labels travel alongside without shadowing any Ragas field
    assert not set(exchange.RAGAS_SIDE_FIELDS) & RAGAS_SINGLE_TURN
    assert {"expected_decision", "reason_codes"} <= set(exchange.RAGAS_SIDE_FIELDS)
    assert set(exchange.DEEPEVAL_FIELDS) == {
        "input",
        "expected_output",
        "context",
        "additional_metadata",
    }
    assert set(exchange.DEEPEVAL_FIELDS) <= DEEPEVAL_GOLDEN


def test_ragas_sample_of_an_answer_case(demo_engine: Engine, tax: Taxonomy) -> None:
    rows = ragas_rows(demo_engine, tax)
    assert len(rows) == 99
    one = rows["CASE-001"]
    assert set(one) == set(exchange.RAGAS_FIELDS) | set(exchange.RAGAS_SIDE_FIELDS)
    assert one["user_input"] == (
        "How many days after a monthly charge do we have to ask for a refund on Brightwave "
        "Workspace?"
    )
    assert one["retrieved_context_ids"] == ["POL-REFUND-MONTHLY@2", "POL-REFUND-ANNUAL@1"]
    assert one["retrieved_contexts"] == [
        body(demo_engine, "POL-REFUND-MONTHLY@2"),
        body(demo_engine, "POL-REFUND-ANNUAL@1"),
    ]
    assert one["reference"] == (
        "A refund of a monthly plan charge must be requested within 14 days of the charge date."
    )
    assert (one["expected_decision"], one["reason_codes"]) == ("answer", [])
    assert (one["family"], one["evidence_state"], one["split"]) == (
        "FAM-REFUND-WINDOW",
        "present",
        "train",
    )


def test_forbidden_documents_are_never_contexts(demo_engine: Engine, tax: Taxonomy) -> None:
    rows = ragas_rows(demo_engine, tax)
    ten = rows["CASE-010"]
    assert ten["retrieved_context_ids"] == ["FAQ-PRODUCT@1"]
    assert ten["forbidden_context_ids"] == ["SALES-DISCOUNT@1"]
    assert ten["expected_decision"] == "abstain"
    assert ten["reason_codes"] == ["source_not_allowed"]
    assert str(ten["reference"]).startswith("Abstain: ")
    assert "Source not allowed" in str(ten["reference"])


def test_restricted_texts_are_withheld_without_clearance(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    full = ragas_rows(demo_engine, tax)
    assert "MEMO-PRICING-2026@1" in full["CASE-044"]["retrieved_context_ids"]  # type: ignore[operator]
    assert full["CASE-045"]["forbidden_context_ids"] == ["MEMO-PRICING-2026@1"]
    text, report = export(demo_engine, "ragas", tax, viewer=make_actor("annotator"))
    assert "Memo: list price changes for 2026" not in text
    assert report.withheld_contexts >= 1
    cut = {json.loads(line)["case_key"]: json.loads(line) for line in text.splitlines()}
    assert "MEMO-PRICING-2026@1" not in cut["CASE-044"]["retrieved_context_ids"]
    assert cut["CASE-045"]["forbidden_context_ids"] == []  # not even the id of a secret


def test_deepeval_goldens_are_one_json_array_with_lists_kept_whole(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    text, report = export(demo_engine, "deepeval", tax)
    goldens = json.loads(text)
    assert isinstance(goldens, list) and len(goldens) == report.written == 99
    assert all(set(g) == set(exchange.DEEPEVAL_FIELDS) for g in goldens)
    first = goldens[0]
    assert first["input"].startswith("How many days after a monthly charge")
    assert first["context"][0] == body(demo_engine, "POL-REFUND-MONTHLY@2")
    meta = first["additional_metadata"]
    assert meta["case_key"] == "CASE-001"
    assert meta["context_ids"] == ["POL-REFUND-MONTHLY@2", "POL-REFUND-ANNUAL@1"]
    assert (meta["expected_decision"], meta["reason_codes"]) == ("answer", [])
    # table rows contain "|", the delimiter DeepEval's CSV loader would split on
    assert any("|" in c for g in goldens for c in g["context"])
    assert all(isinstance(c, str) for g in goldens for c in g["context"])


def test_unconfirmed_variants_are_left_out_until_an_expert_confirms(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    ines = make_actor("annotator", "ines@test.example")
    base = cases.get_case(demo_engine, key="CASE-001")
    assert base is not None
    text = body(demo_engine, "POL-REFUND-MONTHLY@2")
    a = text.index("14 days of the charge date")
    saved = write(
        demo_engine,
        variants.build_variant,
        ines,
        tax,
        base.id,
        variants.VariantSpec(
            "edited", operator="change_unit", start=a, end=a + 26, params={"to_unit": "weeks"}
        ),
    )
    _, report = export(demo_engine, "deepeval", tax)
    assert (report.written, report.skipped_unconfirmed) == (99, 1)
    assert "left out" in report.summary()
    canonical, creport = export(demo_engine, "canonical", tax)
    assert creport.written == 100 and saved.key in canonical  # the canonical file keeps drafts
    write(
        demo_engine,
        suggestions.confirm_suggestion,
        ines,
        saved.case_id,
        "abstain",
        ["required_claim_not_covered"],
        tax=tax,
    )
    rows = ragas_rows(demo_engine, tax)
    assert len(rows) == 100
    variant = rows[saved.key]
    assert variant["retrieved_context_ids"] == ["POL-REFUND-MONTHLY-CF-1@1", "POL-REFUND-ANNUAL@1"]
    assert "14 weeks of the charge date" in str(variant["retrieved_contexts"])


def test_canonical_is_the_round_trip_format(demo_engine: Engine, tax: Taxonomy) -> None:
    text, report = export(demo_engine, "canonical", tax, flt=cases.CaseFilter(status="ready"))
    buf = io.StringIO()
    n = cases.export_cases(demo_engine, buf, cases.CaseFilter(status="ready"), viewer=SYSTEM)
    assert text == buf.getvalue() and report.written == n
    assert report.summary() == f"{n} cases exported"
    with pytest.raises(InputError, match="unknown export format 'csv'"):
        export(demo_engine, "csv", tax)


def test_batches_stream_every_case_once_in_order(
    demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exchange, "BATCH", 7)
    text, report = export(demo_engine, "ragas", tax, flt=cases.CaseFilter(split="test"))
    keys = [json.loads(line)["case_key"] for line in text.splitlines()]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) == report.written
    assert report.written == cases.count_cases(demo_engine, cases.CaseFilter(split="test"))


def test_empty_database_exports_valid_empty_files(tmp_path: Path, tax: Taxonomy) -> None:
    eng = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    migrate(eng)
    text, report = export(eng, "deepeval", tax)
    assert json.loads(text) == [] and report.written == 0
    text, report = export(eng, "ragas", tax)
    assert text == "" and report.summary() == "0 cases exported"
    eng.dispose()


def test_reference_text_per_decision(tax: Taxonomy) -> None:
    rec = {
        "expected_decision": "partial",
        "required_claims": ["A is true.", "B is true."],
        "reason_codes": ["required_claim_not_covered"],
    }
    text = exchange.reference_text(rec, tax)
    assert text.startswith("Partial answer: ")
    assert "Why: Required claim not covered." in text
    assert text.endswith("Required claims: A is true. B is true.")
    answer = {"expected_decision": "answer", "required_claims": [], "reason_codes": []}
    assert exchange.reference_text(answer, tax) == "Answer from the allowed sources."
