"""A page of 70,000 cases (PostgreSQL takes at most 65,535 parameters a statement, common
SQLite builds 32,766) with each case's slices, document count and agreed label, on both
engines."""

from __future__ import annotations

from review.cases import cases
from review.cases.agreed import Agreed, agreed_labels
from storage.db import read_session
from storage.models import CaseAgreed, CaseDocument, CaseSlice
from tests.helpers.bulk import BIG, add_cases, add_document, add_rows, migrated


def test_a_page_of_more_cases_than_a_statement_takes_parameters(any_url: str) -> None:
    engine = migrated(any_url)
    try:
        ids = add_cases(engine, BIG, slices=("every",))
        add_rows(engine, CaseSlice, ({"case_id": c, "slice": "third"} for c in ids[::3]))
        docs = [add_document(engine, f"D{i}") for i in range(2)]
        add_rows(
            engine,
            CaseDocument,
            (
                {"case_id": c, "document_id": d, "position": p, "visibility": "visible",
                 "role": "decisive"}
                for c in ids[::2]
                for p, d in enumerate(docs)
            ),
        )  # fmt: skip
        add_rows(
            engine,
            CaseAgreed,
            (
                {"case_id": c, "decision": "abstain", "reason_codes": ["x"],
                 "agreed_by": "adjudication", "source_id": 1}
                for c in ids[::4]
            ),
        )  # fmt: skip
        rows = cases.list_cases(engine, cases.CaseFilter(), page=1, page_size=BIG + 10)
        assert [r.id for r in rows] == ids
        n = range(BIG)
        assert [r.slices for r in rows] == [
            ("every", "third") if i % 3 == 0 else ("every",) for i in n
        ]
        assert [r.documents for r in rows] == [2 if i % 2 == 0 else 0 for i in n]
        assert [r.agreed_decision for r in rows] == ["abstain" if i % 4 == 0 else None for i in n]
        with read_session(engine) as s:
            assert agreed_labels(s, ids) == {
                c: Agreed("abstain", ("x",), "adjudication") for c in ids[::4]
            }
    finally:
        engine.dispose()
