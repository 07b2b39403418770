"""The tallies, progress and push-back facts of 70,000 sampling plans (PostgreSQL takes at
most 65,535 parameters a statement), on PostgreSQL."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from review.audits import estimates, pushback
from review.audits.plans import list_plans
from storage.db import read_session
from storage.models import AuditItem, AuditVerdict, SamplingPlan, Trace
from tests.helpers.audits import bulk_traces
from tests.helpers.bulk import BIG, add_rows, migrated

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_more_plans_than_a_statement_takes_parameters(pg_url: str) -> None:
    engine = migrated(pg_url)
    try:
        bulk_traces(engine, 1)
        with read_session(engine) as s:
            trace = s.scalars(select(Trace.id)).one()
        add_rows(
            engine,
            SamplingPlan,
            (
                {"id": i, "name": f"plan {i}", "population_filter": {}, "strata": [],
                 "allocation": "proportional", "explicit_sizes": {}, "total": 1, "seed": 1,
                 "population": {}, "fingerprint": "f", "overlap": 1, "status": "open",
                 "created_by": "a@example.org", "created_at": AT}
                for i in range(1, BIG + 1)
            ),
        )  # fmt: skip
        # one item per plan; the item of every even plan judged correct by r1, and that of
        # every 4th also judged a false refusal by r2 (a disagreement, the severer wins)
        add_rows(
            engine,
            AuditItem,
            (
                {"id": i, "plan_id": i, "trace_pk": trace, "stratum": "all", "position": 0}
                for i in range(1, BIG + 1)
            ),
        )
        verdicts = [(i, "r1", "correct_refusal") for i in range(2, BIG + 1, 2)]
        verdicts += [(i, "r2", "false_refusal") for i in range(4, BIG + 1, 4)]
        add_rows(
            engine,
            AuditVerdict,
            (
                {"item_id": i, "reviewer": r, "verdict": v, "stages": [], "notes": "",
                 "claims": [], "created_at": AT}
                for i, r, v in verdicts
            ),
        )  # fmt: skip
        ids = list(range(1, BIG + 1))
        tallies = estimates.tallies(engine, [*ids, BIG + 5])
        assert sorted(tallies) == ids
        for i, t in tallies.items():
            assert t.sampled == 1
            want = (
                {} if i % 2 else {"all": {"false_refusal" if i % 4 == 0 else "correct_refusal": 1}}
            )
            assert (t.verdicts, t.disagreements) == (want, int(i % 4 == 0)), i
        progress = {p.id: p for p in list_plans(engine)}
        assert sorted(progress) == ids
        for i, p in progress.items():
            judged = (i % 2 == 0) + (i % 4 == 0)
            assert (p.items, p.complete, p.verdicts) == (1, int(judged > 0), judged), i
        facts = pushback.verdict_facts(engine, ids)
        assert sorted((f.item_id, f.reviewer) for f in facts) == sorted(
            (i, r) for i, r, _ in verdicts
        )
        assert {f.plan_name for f in facts} == {f"plan {i}" for i, _, _ in verdicts}
    finally:
        engine.dispose()
