"""Calibration on 70,000 audited traces (PostgreSQL takes at most 65,535 parameters a
statement): each trace's score joined to its verdict, on PostgreSQL."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, text

from review.policy.policy import load_policy
from review.thresholds import thresholds
from storage import partitions
from storage.db import read_session
from storage.models import SamplingPlan, Trace
from tests.helpers.bulk import BIG, add_rows, migrated

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_outcomes_of_more_audited_traces_than_a_statement_takes_parameters(pg_url: str) -> None:
    engine = migrated(pg_url)
    try:
        with engine.begin() as c:  # one INSERT ... SELECT (an executemany took minutes)
            partitions.ensure_months(c, [AT])
            c.execute(
                text(
                    "INSERT INTO traces (trace_id, at, query, context_sent, answer_text, decision, "
                    "restricted, identity_scopes, citations, versions, attributes, redactions, "
                    "imported_at, top_score, ranking_mode) "
                    "SELECT 't-' || lpad(g::text, 7, '0'), :at, 'q', '', '', 'answer', false, "
                    "'[]', '[]', '{}', '{}', '{}', :at, 10.0, 'bm25' "
                    "FROM generate_series(1, :n) g"
                ),
                {"at": AT, "n": BIG},
            )
        with read_session(engine) as s:
            traces = list(s.execute(select(Trace.id, Trace.trace_id).order_by(Trace.id)).all())
        # two plans, each auditing half of the traces; the 1st, 3rd, ... judged a supported
        # answer
        add_rows(
            engine,
            SamplingPlan,
            [
                {"id": p, "name": f"plan {p}", "population_filter": {}, "strata": [],
                 "allocation": "proportional", "explicit_sizes": {}, "total": BIG, "seed": 1,
                 "population": {}, "fingerprint": "f", "overlap": 1, "status": "open",
                 "created_by": "a@example.org", "created_at": AT}
                for p in (1, 2)
            ],
        )  # fmt: skip
        with engine.begin() as c:
            c.execute(
                text(
                    "INSERT INTO audit_items (plan_id, trace_pk, stratum, position) "
                    "SELECT 1 + id % 2, id, 'all', id FROM traces"
                )
            )
            c.execute(
                text(
                    "INSERT INTO audit_verdicts (item_id, reviewer, verdict, stages, notes, "
                    "claims, created_at) SELECT i.id, 'r1', CASE WHEN i.trace_pk % 2 = 1 "
                    "THEN 'supported_answer' ELSE 'correct_refusal' END, '[]', '', '[]', :at "
                    "FROM audit_items i"
                ),
                {"at": AT},
            )
        policy = load_policy()
        frame = thresholds.audited_trace_outcomes(engine, policy, "bm25")
        assert len(frame) == BIG
        frame = frame.sort_values("case_id", ascending=False)  # case_id is -trace pk
        assert list(frame["key"]) == [t for _, t in traces]
        assert list(frame["answerable"]) == [n % 2 == 0 for n in range(BIG)]
    finally:
        engine.dispose()
