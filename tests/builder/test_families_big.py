"""A page of 70,000 question families (PostgreSQL takes at most 65,535 parameters a
statement) with their variant counts, unconfirmed suggestions and evidence states, as the
builder and a labeler (to whom the ready cases are blind) see them, on PostgreSQL."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import text

from review.builder import blinding, family_view
from review.cases.sight import HIDDEN, Sight
from storage.models import CaseFamily, CaseSuggestion
from tests.helpers.bulk import BIG, add_cases, add_rows, migrated

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_a_page_of_more_families_than_a_statement_takes_parameters(pg_url: str) -> None:
    engine = migrated(pg_url)
    try:
        add_rows(
            engine,
            CaseFamily,
            (
                {"id": i, "key": f"F{i:06d}", "title": "t", "created_at": AT}
                for i in range(1, BIG + 1)
            ),
        )
        ids = add_cases(engine, BIG)
        with engine.begin() as c:  # case i in family i; every 3rd case with its evidence
            c.execute(text("UPDATE cases SET family_id = id"))
            c.execute(text("UPDATE cases SET evidence_state = 'present' WHERE id % 3 = 0"))
        assert ids == list(range(1, BIG + 1))
        add_rows(
            engine,
            CaseSuggestion,
            (
                {"case_id": i, "decision": "abstain", "reason_codes": [], "source": "op",
                 "created_at": AT}
                for i in ids[1::2]
            ),
        )  # fmt: skip
        rows = family_view.list_families(engine, page=1, page_size=BIG + 10)
        assert [r.key for r in rows] == [f"F{i:06d}" for i in ids]
        assert [(r.variants, r.unconfirmed) for r in rows] == [(1, int(i % 2 == 0)) for i in ids]
        assert [r.states for r in rows] == [("present",) if i % 3 == 0 else (None,) for i in ids]
        seen = blinding.families(engine, Sight("l@example.org", True, 2), page_size=BIG + 10)
        assert [r.states for r in seen] == [(HIDDEN,)] * BIG
    finally:
        engine.dispose()
