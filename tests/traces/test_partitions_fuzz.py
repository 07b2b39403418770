"""The purge on monthly partitions against its definition, with generated traces (times at and
around month edges, some audited, some written straight into the default partition) and
cutoffs: what is left is exactly the traces at or after the cutoff plus the audited ones, each
with its chunks, and the rollup, the signal groups and the audit population groups equal a
recount (PostgreSQL, real server; on SQLite the same purge runs row by row and must leave the
same)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, func, insert, select, text

from review.traces import retention
from review.traces import rollup as trace_rollup
from storage import population_groups
from storage.db import read_session, run_write
from storage.models import (
    SCORE_BIN_SCALE,
    AuditItem,
    SamplingPlan,
    SourceSpan,
    TraceChunk,
    TracePopulationGroup,
    TraceRollup,
    TraceSignalGroup,
)
from storage.models import Trace as TraceRow
from tests.helpers.actors import make_actor
from tests.helpers.traces import chunk, import_traces, make_trace

UTC = dt.UTC
ADMIN = make_actor("admin", clearance=True, uid=15)
NOW = dt.datetime(2026, 9, 1, tzinfo=UTC)
EDGES = [dt.datetime(2026, m, 1, tzinfo=UTC) for m in range(3, 10)]

# an instant near a month's edge (just before, on, just after) or anywhere in March-August
instants = st.one_of(
    st.builds(
        lambda edge, us: edge + dt.timedelta(microseconds=us),
        st.sampled_from(EDGES),
        st.integers(-2, 2),
    ),
    st.integers(0, 183 * 86400).map(
        lambda s: dt.datetime(2026, 3, 1, tzinfo=UTC) + dt.timedelta(seconds=s)
    ),
)
traces_st = st.lists(
    st.tuples(instants, st.booleans(), st.sampled_from(["answer", "abstain", None])),
    min_size=1,
    max_size=14,
)


def _reset(engine: Engine) -> None:
    def work(s: Any) -> None:
        s.execute(delete(AuditItem))
        s.execute(delete(SamplingPlan))
        s.execute(delete(SourceSpan))
        s.execute(delete(TraceRow))
        s.execute(delete(TraceRollup))

    run_write(engine, work)


def _recount_groups(engine: Engine) -> dict[tuple[Any, ...], int]:
    out: dict[tuple[Any, ...], int] = {}
    with read_session(engine) as s:
        for mode, score, tier in s.execute(
            select(TraceRow.ranking_mode, TraceRow.top_score, TraceRow.customer_tier)
        ):
            kind, bin_ = (0, None) if score is None else (1, math.floor(score * SCORE_BIN_SCALE))
            out[(mode, kind, bin_, tier)] = out.get((mode, kind, bin_, tier), 0) + 1
    return out


def _groups(engine: Engine) -> dict[tuple[Any, ...], int]:
    out: dict[tuple[Any, ...], int] = {}
    with read_session(engine) as s:
        for g in s.scalars(select(TraceSignalGroup)):
            key = (g.ranking_mode, g.score_kind, g.score_bin, g.customer_tier)
            out[key] = out.get(key, 0) + g.n
    return out


def _population(engine: Engine) -> tuple[set[tuple[Any, ...]], int]:
    """The audit population groups (storage.population_groups) and the traces counter."""
    g = TracePopulationGroup
    with read_session(engine) as s:
        rows = {
            (r.k, r.n, r.id_sum, r.key_sum, r.unkeyed, r.min_id, r.max_id, bool(r.stale))
            for r in s.scalars(select(g))
        }
        return rows, population_groups.trace_count(s)


def _rollup(engine: Engine) -> set[tuple[Any, ...]]:
    with read_session(engine) as s:
        r = TraceRollup
        rows = s.execute(
            select(
                r.dim, r.value, r.day, r.decision, r.traces, r.ungrounded, r.missing_reason
            ).where(r.traces != 0)
        )
        return {tuple(row) for row in rows}


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    made=traces_st,
    days=st.integers(0, 200),
    raw=st.lists(instants, max_size=3),
)
def test_the_purge_leaves_the_recent_and_the_audited_traces(
    any_engine: Engine,
    made: list[tuple[dt.datetime, bool, str | None]],
    days: int,
    raw: list[dt.datetime],
) -> None:
    _reset(any_engine)
    items = [
        make_trace(
            f"t{i}",
            at,
            decision=decision,
            ranking_mode="hybrid",
            top_score=0.2 + (i % 7) / 10,
            attributes={"customer_tier": ("gold", "free")[i % 2]},
            chunks=[chunk(f"c{i}"), chunk(f"d{i}", rank=2)],
        )
        for i, (at, _, decision) in enumerate(made)
    ]
    import_traces(any_engine, items)
    # traces written past the import, straight into the table (into the default partition
    # when their month has none on PostgreSQL): the purge must remove them too
    with any_engine.begin() as c:
        for j, at in enumerate(raw):
            c.execute(
                insert(TraceRow),
                {"trace_id": f"raw{j}", "at": at, "query": "q", "ranking_mode": "hybrid"},
            )
    audited = [f"t{i}" for i, (_, flag, _) in enumerate(made) if flag]

    def plan(s: Any) -> None:
        p = SamplingPlan(
            name="p", allocation="equal", total=1, seed=1, fingerprint="f", created_by="x"
        )
        s.add(p)
        s.flush()
        pks = s.scalars(select(TraceRow.id).where(TraceRow.trace_id.in_(audited))).all()
        for n, pk in enumerate(pks):
            s.add(AuditItem(plan_id=p.id, trace_pk=pk, stratum="all", position=n))

    run_write(any_engine, plan)
    trace_rollup.rebuild(any_engine)  # the raw rows are counted as a rebuild would
    cutoff = NOW - dt.timedelta(days=days)
    everything = {f"t{i}": at for i, (at, _, _) in enumerate(made)} | {
        f"raw{j}": at for j, at in enumerate(raw)
    }
    want = {tid for tid, at in everything.items() if at >= cutoff or tid in audited}

    report = retention.purge_older_than(any_engine, ADMIN, days, now=NOW, batch=3)

    with read_session(any_engine) as s:
        left = set(s.scalars(select(TraceRow.trace_id)))
        chunks = dict(
            (str(tid), int(n))
            for tid, n in s.execute(
                select(TraceRow.trace_id, func.count(TraceChunk.id))
                .join(TraceChunk, TraceChunk.trace_pk == TraceRow.id)
                .group_by(TraceRow.trace_id)
            )
        )
        n_chunks = s.scalar(select(func.count()).select_from(TraceChunk))
        n_items = s.scalar(select(func.count()).select_from(AuditItem))
    assert left == want
    assert report.deleted == len(everything) - len(want)
    assert chunks == {tid: 2 for tid in want if tid.startswith("t")}
    assert n_chunks == 2 * len([t for t in want if t.startswith("t")])
    assert n_items == len(audited)
    assert _groups(any_engine) == _recount_groups(any_engine)
    population = _population(any_engine)
    with any_engine.begin() as c:
        population_groups.rebuild(c)
    assert population == _population(any_engine)
    purged = _rollup(any_engine)
    trace_rollup.rebuild(any_engine)
    assert purged == _rollup(any_engine)
    if any_engine.dialect.name == "postgresql":
        with any_engine.connect() as c:
            assert (
                c.execute(
                    text(
                        "SELECT count(*) FROM pg_constraint WHERE conparentid = 0 "
                        "AND conname = 'fk_audit_items_trace_pk_traces' AND convalidated"
                    )
                ).scalar_one()
                == 1
            )
