"""Monthly partitions of the traces and chunks on PostgreSQL (migration 0036, storage.partitions):
rows land in their month, a trace id stays unique across months, the purge drops whole months
and leaves every count kept in step with the traces equal to a recount, on real PostgreSQL;
on SQLite the chunks carry their trace's time and the purge is the same to the user."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from typing import Any

import pytest
from sqlalchemy import Engine, delete, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from review.traces import retention, tracerows
from review.traces import rollup as trace_rollup
from storage import partitions, statistics
from storage.db import read_session, run_write
from storage.models import (
    SCORE_BIN_SCALE,
    AuditItem,
    SamplingPlan,
    TraceChunk,
    TraceRollup,
    TraceSignalGroup,
)
from storage.models import Trace as TraceRow
from tests.helpers.actors import make_actor
from tests.helpers.traces import chunk, import_traces, make_trace

UTC = dt.UTC
ADMIN = make_actor("admin", clearance=True, uid=15)
NOW = dt.datetime(2026, 6, 10, 12, tzinfo=UTC)


def _days_before(days: float) -> dt.datetime:
    return NOW - dt.timedelta(days=days)


def _spread(engine: Engine) -> list[str]:
    """Traces over February to June 2026 (one at a month's first instant, one just before
    a month ends), 2 chunks each, imported; returns their ids."""
    times = [
        dt.datetime(2026, 2, 1, tzinfo=UTC),
        dt.datetime(2026, 2, 14, 8, tzinfo=UTC),
        dt.datetime(2026, 2, 28, 23, 59, 59, 999999, tzinfo=UTC),
        dt.datetime(2026, 3, 3, tzinfo=UTC),
        dt.datetime(2026, 3, 31, 23, 0, tzinfo=UTC),
        dt.datetime(2026, 4, 15, tzinfo=UTC),
        dt.datetime(2026, 5, 2, tzinfo=UTC),
        dt.datetime(2026, 5, 20, tzinfo=UTC),
        dt.datetime(2026, 6, 9, tzinfo=UTC),
    ]
    items = [
        make_trace(
            f"t{i}",
            at,
            decision=("answer", "abstain", None)[i % 3],
            ranking_mode="hybrid",
            top_score=0.3 + i / 20,
            attributes={"customer_tier": ("gold", "free")[i % 2]},
            chunks=[chunk(f"c{i}a"), chunk(f"c{i}b", rank=2)],
        )
        for i, at in enumerate(times)
    ]
    import_traces(engine, items)
    return [t.trace_id for t in items]


def _audit(engine: Engine, trace_ids: list[str]) -> None:
    def work(s: Any) -> None:
        p = SamplingPlan(
            name="p", allocation="equal", total=1, seed=1, fingerprint="f", created_by="x"
        )
        s.add(p)
        s.flush()
        pks = s.scalars(select(TraceRow.id).where(TraceRow.trace_id.in_(trace_ids))).all()
        for n, pk in enumerate(pks):
            s.add(AuditItem(plan_id=p.id, trace_pk=pk, stratum="all", position=n))

    run_write(engine, work)


def _rollup_rows(engine: Engine) -> set[tuple[Any, ...]]:
    with read_session(engine) as s:
        return {
            tuple(r)
            for r in s.execute(
                select(
                    TraceRollup.dim,
                    TraceRollup.value,
                    TraceRollup.day,
                    TraceRollup.decision,
                    TraceRollup.traces,
                    TraceRollup.ungrounded,
                )
            )
        }


def _groups(engine: Engine) -> dict[tuple[Any, ...], int]:
    g = TraceSignalGroup
    with read_session(engine) as s:
        return {
            (r.ranking_mode, r.hits_after_filter, r.score_kind, r.score_bin, r.customer_tier): r.n
            for r in s.scalars(select(g))
        }


def _groups_recount(engine: Engine) -> dict[tuple[Any, ...], int]:
    out: dict[tuple[Any, ...], int] = {}
    with read_session(engine) as s:
        rows = s.execute(
            select(
                TraceRow.ranking_mode,
                TraceRow.hits_after_filter,
                TraceRow.top_score,
                TraceRow.customer_tier,
            )
        ).all()
    for mode, hits, score, tier in rows:
        kind, bin_ = (0, None) if score is None else (1, math.floor(score * SCORE_BIN_SCALE))
        key = (mode, hits, kind, bin_, tier)
        out[key] = out.get(key, 0) + 1
    return out


def _stored(engine: Engine) -> dict[str, tuple[dt.datetime, int]]:
    """trace id -> (time, chunks whose trace_at is the trace's time)."""
    with read_session(engine) as s:
        rows = s.execute(
            select(TraceRow.trace_id, TraceRow.at, func.count(TraceChunk.id))
            .outerjoin(
                TraceChunk,
                (TraceChunk.trace_pk == TraceRow.id) & (TraceChunk.trace_at == TraceRow.at),
            )
            .group_by(TraceRow.trace_id, TraceRow.at)
        ).all()
        orphans = s.scalar(
            select(func.count())
            .select_from(TraceChunk)
            .where(~select(TraceRow.id).where(TraceRow.id == TraceChunk.trace_pk).exists())
        )
    assert orphans == 0
    return {tid: (at, int(n)) for tid, at, n in rows}


def test_chunks_carry_their_traces_time(any_engine: Engine) -> None:
    ids = _spread(any_engine)
    stored = _stored(any_engine)
    assert sorted(stored) == sorted(ids)
    assert {n for _, n in stored.values()} == {2}


def test_purge_leaves_what_a_row_by_row_purge_leaves(any_engine: Engine) -> None:
    """Cutoff 2026-04-11 12:00 (60 days before NOW): February and March go whole (with their
    partitions on PostgreSQL), April's early trace row by row; the audited February and March
    traces stay with their chunks; the rollup and the signal groups equal a recount."""
    _spread(any_engine)
    _audit(any_engine, ["t1", "t4"])
    report = retention.purge_older_than(any_engine, ADMIN, 60, now=NOW, batch=2)
    # t0, t2 (February), t3 (March), t5 (2026-04-15 is after the cutoff: kept)
    assert (report.deleted, report.kept_in_audits) == (3, 2)
    stored = _stored(any_engine)
    assert sorted(stored) == ["t1", "t4", "t5", "t6", "t7", "t8"]
    assert {n for _, n in stored.values()} == {2}
    with read_session(any_engine) as s:
        assert s.scalar(select(func.count()).select_from(AuditItem)) == 2
    after_purge = _rollup_rows(any_engine)
    trace_rollup.rebuild(any_engine)
    assert after_purge == _rollup_rows(any_engine)
    assert _groups(any_engine) == _groups_recount(any_engine)
    if any_engine.dialect.name == "postgresql":
        with any_engine.connect() as c:
            months = partitions.months(c)
            # the audit items' key is back and checked
            valid = c.execute(
                text(
                    "SELECT convalidated FROM pg_constraint "
                    "WHERE conname = 'fk_audit_items_trace_pk_traces' AND conparentid = 0"
                )
            ).scalar_one()
        assert dt.date(2026, 2, 1) not in months and dt.date(2026, 3, 1) not in months
        assert dt.date(2026, 4, 1) in months and valid


def test_a_second_purge_and_new_imports_after_a_month_drop(any_engine: Engine) -> None:
    """The kept traces of a dropped month are purged row by row once they leave the audit,
    and a trace of a dropped month imported later is stored and purged again."""
    _spread(any_engine)
    _audit(any_engine, ["t1"])
    retention.purge_older_than(any_engine, ADMIN, 60, now=NOW)
    run_write(any_engine, lambda s: s.execute(delete(AuditItem)))
    import_traces(
        any_engine,
        [make_trace("late", dt.datetime(2026, 2, 20, tzinfo=UTC), chunks=[chunk("cl")])],
    )
    assert "late" in _stored(any_engine)
    report = retention.purge_older_than(any_engine, ADMIN, 60, now=NOW)
    assert (report.deleted, report.kept_in_audits) == (2, 0)  # t1 and late
    assert sorted(_stored(any_engine)) == ["t5", "t6", "t7", "t8"]
    assert _groups(any_engine) == _groups_recount(any_engine)


def test_two_purges_at_once_drop_each_month_once(pg_engine: Engine) -> None:
    """A purge that listed February before another purge dropped it finds the month gone
    once it holds the lock, and goes on with March: nothing fails, nothing is counted twice."""
    _spread(pg_engine)
    feb = dt.date(2026, 2, 1)
    done: dict[str, Any] = {}
    with pg_engine.connect() as holder:
        holder.exec_driver_sql("BEGIN")
        tracerows.lock_trace_inserts(holder)

        def second() -> None:
            try:
                done["report"] = retention.purge_older_than(pg_engine, ADMIN, 60, now=NOW)
            except BaseException as exc:  # reported by the assertion below
                done["error"] = exc

        worker = threading.Thread(target=second)
        worker.start()
        # wait until the second purge is queued behind the lock, February still listed
        for _ in range(600):
            waiting = holder.exec_driver_sql(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).scalar()
            if waiting:
                break
            time.sleep(0.05)
        assert waiting, "the second purge never waited for the lock"
        with Session(bind=holder) as s:
            first = retention.drop_month(s, feb)
            s.flush()
        holder.exec_driver_sql("COMMIT")
    worker.join(60)
    assert "error" not in done, done.get("error")
    # February's three went with the first drop, March's two with the second purge
    assert first == 3 and done["report"].deleted == 2
    assert sorted(_stored(pg_engine)) == ["t5", "t6", "t7", "t8"]
    assert _groups(pg_engine) == _groups_recount(pg_engine)
    after_purge = _rollup_rows(pg_engine)
    trace_rollup.rebuild(pg_engine)
    assert after_purge == _rollup_rows(pg_engine)


def test_a_trace_id_stays_unique_across_months(pg_engine: Engine) -> None:
    import_traces(pg_engine, [make_trace("same", dt.datetime(2026, 1, 5, tzinfo=UTC))])
    with pytest.raises(IntegrityError, match="uq_traces_trace_id"), pg_engine.begin() as c:
        c.execute(
            insert(TraceRow),
            {"trace_id": "same", "at": dt.datetime(2026, 5, 5, tzinfo=UTC), "query": "q"},
        )
    # the import skips it whatever month it comes with
    report = import_traces(pg_engine, [make_trace("same", dt.datetime(2026, 5, 5, tzinfo=UTC))])
    assert report.added == 0


def test_rows_land_in_their_months_partition(pg_engine: Engine) -> None:
    _spread(pg_engine)
    with pg_engine.connect() as c:
        placed: dict[str, int] = {
            str(k): int(n)
            for k, n in c.execute(
                text("SELECT tableoid::regclass::text, count(*) FROM traces GROUP BY 1")
            )
        }
        chunks: dict[str, int] = {
            str(k): int(n)
            for k, n in c.execute(
                text("SELECT tableoid::regclass::text, count(*) FROM trace_chunks GROUP BY 1")
            )
        }
    assert placed == {
        "traces_p202602": 3,
        "traces_p202603": 2,
        "traces_p202604": 1,
        "traces_p202605": 2,
        "traces_p202606": 1,
    }
    assert chunks == {k.replace("traces", "trace_chunks"): 2 * n for k, n in placed.items()}


def test_an_orm_write_makes_its_month_and_fills_the_chunks_time(pg_engine: Engine) -> None:
    at = dt.datetime(2031, 1, 31, 23, 30, tzinfo=UTC)

    def work(s: Any) -> None:
        t = TraceRow(trace_id="orm", at=at, query="q")
        s.add(t)
        s.flush()
        s.add(TraceChunk(trace_pk=t.id, chunk_id="x", text="x"))

    run_write(pg_engine, work)
    with pg_engine.connect() as c:
        assert dt.date(2031, 1, 1) in partitions.months(c)
        assert dt.date(2031, 1, 1) in partitions.months(c, "trace_chunks")
        where = c.execute(text("SELECT tableoid::regclass::text, trace_at FROM trace_chunks")).one()
    assert where[0] == "trace_chunks_p203101" and where[1] == at


def test_rows_already_in_the_default_partition_keep_their_month_there(
    pg_engine: Engine,
) -> None:
    """A month written before it had a partition (here straight into the default one) gets
    none later (its rows would have to move), the import still writes to it, and the purge
    removes its old rows row by row."""
    with pg_engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO traces_pdefault (trace_id, at, query, context_sent, answer_text, "
                "identity_scopes, citations, versions, attributes, redactions, restricted, "
                "imported_at) VALUES ('raw', '2026-01-10T00:00:00Z', 'q', '', '', '[]', '[]', "
                "'{}', '{}', '{}', false, now())"
            )
        )
    import_traces(pg_engine, [make_trace("jan", dt.datetime(2026, 1, 20, tzinfo=UTC))])
    with pg_engine.connect() as c:
        assert dt.date(2026, 1, 1) not in partitions.months(c)
        assert c.execute(text("SELECT count(*) FROM traces_pdefault")).scalar_one() == 2
    report = retention.purge_older_than(pg_engine, ADMIN, 60, now=NOW)
    assert report.deleted == 2
    assert _stored(pg_engine) == {}


@pytest.fixture
def pg_engine(pg_url: str) -> Any:
    from storage.db import make_engine, migrate

    eng = make_engine(pg_url)
    migrate(eng)
    yield eng
    eng.dispose()


def test_the_readme_states_the_purges_wait_as_the_code_has_it() -> None:
    from tests.helpers import docs

    seconds = int(retention.DROP_LOCK_TIMEOUT.removesuffix("s"))
    readme = docs.flat("import")
    assert f"the purge waits up to {seconds} seconds for open reads to end" in readme


def _parent_rows(engine: Engine) -> dict[str, float]:
    with engine.connect() as c:
        return {
            t: float(
                c.exec_driver_sql(
                    "SELECT reltuples FROM pg_class WHERE oid = %(t)s::regclass", {"t": t}
                ).scalar_one()
            )
            for t in partitions.PARTITIONED
        }


def test_the_partitioned_tables_statistics_follow_imports_and_purges(pg_engine: Engine) -> None:
    """Autovacuum never analyzes a partitioned table itself: the import and the purge do it
    once its partitions' rows have changed by a tenth, so the planner's whole-table figures
    follow the data (parent reltuples = the rows), and a small change leaves them be."""
    with pg_engine.begin() as c:
        c.exec_driver_sql("ANALYZE traces")
        c.exec_driver_sql("ANALYZE trace_chunks")
    assert _parent_rows(pg_engine) == {"traces": 0.0, "trace_chunks": 0.0}
    items = [
        make_trace(
            f"s{i}", dt.datetime(2026, 3 + i % 3, 1 + i % 27, tzinfo=UTC), chunks=[chunk(f"k{i}")]
        )
        for i in range(120)
    ]
    import_traces(pg_engine, items[:60])
    assert _parent_rows(pg_engine) == {"traces": 60.0, "trace_chunks": 60.0}
    # 4 more rows: within 50 + a tenth, left be
    import_traces(pg_engine, items[60:64])
    assert _parent_rows(pg_engine)["traces"] == 60.0
    import_traces(pg_engine, items[64:])
    assert _parent_rows(pg_engine) == {"traces": 120.0, "trace_chunks": 120.0}
    # a purge of March and April (80 of 120) drops the months; the statistics follow
    retention.purge_older_than(pg_engine, ADMIN, 0, now=dt.datetime(2026, 5, 1, tzinfo=UTC))
    assert _parent_rows(pg_engine) == {"traces": 40.0, "trace_chunks": 40.0}
    # while another process analyzes them, an import skips it and does not fail
    more = [
        make_trace(f"j{i}", dt.datetime(2026, 6, 1 + i % 27, tzinfo=UTC), chunks=[chunk(f"m{i}")])
        for i in range(60)
    ]
    with pg_engine.connect() as holder:
        holder.exec_driver_sql("BEGIN")
        holder.exec_driver_sql(
            "SELECT pg_advisory_xact_lock(%(k)s)", {"k": statistics.ANALYZE_LOCK}
        )
        assert import_traces(pg_engine, more).added == 60
        with pg_engine.begin() as c:
            assert set(statistics.stale_parents(c)) == {"traces", "trace_chunks"}
            assert statistics.analyze_if_due(c) == []
        holder.exec_driver_sql("ROLLBACK")
    assert _parent_rows(pg_engine)["traces"] == 40.0
    statistics.refresh_statistics(pg_engine)
    assert _parent_rows(pg_engine) == {"traces": 100.0, "trace_chunks": 100.0}
