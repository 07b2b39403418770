"""Retention of production traces: the retention setting and purging what is older, the
rollup and audit items kept consistent in the same transaction."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import (
    Engine,
    delete,
    exists,
    func,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.traces import rollup, tracerows
from review.traces.stamp import PURGE_COUNTER
from storage import changes, partitions, population_groups, runs, statistics
from storage.db import read_session, run_write
from storage.models import AuditItem, Counter, Setting, SourceSpan, TraceChunk, utcnow
from storage.models import Trace as TraceRow
from storage.settings import put_setting

if TYPE_CHECKING:
    pass


__all__ = [
    "PurgeReport",
    "Retention",
    "apply_retention",
    "drop_month",
    "get_retention",
    "purge_older_than",
    "set_retention",
]


RETENTION_KEY = "retention"


MAX_RETENTION_DAYS = 10 * 366


#: The audit-log entity of a purge; its ids are numbered by the ``trace_purge`` counter,
#: which the traces stamp reads (review.traces.stamp).
RUN_ENTITY = PURGE_COUNTER


# ---------------------------------------------------------------------------------------
# Retention


@dataclass(frozen=True)
class Retention:
    days: int | None  # None: keep traces until someone purges them
    version: int  # 0 when never set
    updated_by: str | None
    updated_at: dt.datetime | None


def get_retention(engine: Engine) -> Retention:
    with read_session(engine) as s:
        row = s.get(Setting, RETENTION_KEY)
        if row is None:
            return Retention(None, 0, None, None)
        days = (row.value or {}).get("days")
        return Retention(
            int(days) if isinstance(days, int) else None,
            row.version,
            row.updated_by,
            row.updated_at,
        )


def set_retention(
    engine: Engine, actor: Actor, days: int | None, expected_version: int
) -> Retention:
    """Set (or clear, with None) how many days traces are kept. Version-checked, audited."""
    require(actor, Permission.manage_users)
    if days is not None and not 1 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"retention must be between 1 and {MAX_RETENTION_DAYS} days")

    def work(s: Session) -> Retention:
        value = {"days": days}
        row, before = put_setting(
            s,
            RETENTION_KEY,
            value,
            actor.email,
            expected_version=expected_version,
            what="the retention setting",
        )
        changes.record(s, actor.email, "update", "setting", RETENTION_KEY, before, value)
        return Retention(days, row.version, actor.email, row.updated_at)

    return run_write(engine, work)


@dataclass(frozen=True)
class PurgeReport:
    cutoff: dt.datetime
    deleted: int
    kept_in_audits: int

    def summary(self) -> str:
        kept = (
            f"; {readable.count(self.kept_in_audits, 'older trace')} kept because they are in an "
            "audit sample"
            if self.kept_in_audits
            else ""
        )
        return (
            f"{readable.count(self.deleted, 'trace')} from before {self.cutoff:%Y-%m-%d %H:%M} UTC "
            "deleted "
            f"with their chunks{kept}."
        )


def purge_older_than(
    engine: Engine,
    actor: Actor,
    days: int,
    *,
    now: dt.datetime | None = None,
    batch: int = 2000,
    progress: Callable[[int], None] | None = None,
) -> PurgeReport:
    """Delete traces (and their chunks) recorded more than ``days`` days ago, in batches.

    Traces in an audit sample are kept (deleting them would delete the verdicts); the report
    counts them. The purge is written to the audit log as it goes (:mod:`storage.runs`): a
    ``start`` entry with the cutoff, a ``progress`` entry with the count deleted so far in the
    transaction of every batch, and the closing ``purge`` entry; a killed purge shows as
    interrupted, and the next purge whose cutoff covers it names it in ``resumes``.
    """
    require(actor, Permission.manage_users)
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"days must be between 0 and {MAX_RETENTION_DAYS}")
    cutoff = (now or utcnow()) - dt.timedelta(days=days)
    in_audit = exists().where(AuditItem.trace_pk == TraceRow.id)
    deleted = 0
    plan = {"older_than_days": days, "cutoff": cutoff.isoformat()}

    def begin(s: Session) -> str:
        counter = s.get(Counter, RUN_ENTITY, with_for_update=True)
        if counter is None:
            counter = Counter(name=RUN_ENTITY, value=0, version=1)
            s.add(counter)
        counter.value += 1
        counter.version += 1
        run_id = str(counter.value)
        resumes = [r.entity_id for r in runs.interrupted(s, RUN_ENTITY) if _covers(plan, r.plan)]
        runs.started(s, actor.email, RUN_ENTITY, run_id, plan, resumes)
        return run_id

    run_id = run_write(engine, begin)

    def work(s: Session) -> int:
        found = s.execute(
            select(TraceRow.id, TraceRow.trace_id)
            .where(TraceRow.at < cutoff, ~in_audit)
            .limit(batch)
        ).all()
        ids = [pk for pk, _ in found]
        if ids:
            rollup.subtract_ids(s, ids)
            s.execute(delete(TraceChunk).where(TraceChunk.trace_pk.in_(ids)))
            # the spans a live source delivered for them (their ids, kept for de-duplication
            # and to write verdicts back) go with them
            s.execute(delete(SourceSpan).where(SourceSpan.trace_id.in_([t for _, t in found])))
            s.execute(delete(TraceRow).where(TraceRow.id.in_(ids)))
            runs.progressed(s, actor.email, RUN_ENTITY, run_id, {"deleted": deleted + len(ids)})
        return len(ids)

    def drop(month: dt.date) -> Callable[[Session], int]:
        def work(s: Session) -> int:
            n = drop_month(s, month)
            runs.progressed(s, actor.email, RUN_ENTITY, run_id, {"deleted": deleted + n})
            return n

        return work

    try:
        # whole months before the cutoff go with their partitions (PostgreSQL), the rest row
        # by row: the cutoff's own month, and the default partition's old rows
        with read_session(engine) as s:
            whole = [
                m for m in partitions.months(s.connection()) if partitions.bounds(m)[1] <= cutoff
            ]
        for month in whole:
            n = run_write(engine, drop(month))
            deleted += n
            if progress is not None and n:
                progress(deleted)
        while True:
            n = run_write(engine, work)
            deleted += n
            if progress is not None and n:
                progress(deleted)
            if n < batch:
                break
    except BaseException as exc:
        message = (str(exc) or f"stopped by {type(exc).__name__}")[:2000]
        failed = {"deleted": deleted, "status": "failed", "message": message}
        with contextlib.suppress(Exception):  # the purge's own error is the one to report
            run_write(
                engine,
                lambda s: changes.record(s, actor.email, "purge", RUN_ENTITY, run_id, plan, failed),
            )
        raise

    def finish(s: Session) -> int:
        # the audit population groups whose smallest or largest trace went row by row: their
        # days are counted from the traces until their bounds are read again
        population_groups.refresh_stale(s.connection())
        # spans that never became a stored trace (late, or of a refused trace) older than
        # the cutoff: only their ids and reason are left, and nothing refers to them
        s.execute(
            delete(SourceSpan).where(
                SourceSpan.state.in_(("late", "rejected")), SourceSpan.received_at < cutoff
            )
        )
        kept = int(
            s.scalar(
                select(func.count()).select_from(TraceRow).where(TraceRow.at < cutoff, in_audit)
            )
            or 0
        )
        changes.record(
            s,
            actor.email,
            "purge",
            RUN_ENTITY,
            run_id,
            plan,
            {"deleted": deleted, "kept_in_audits": kept},
        )
        return kept

    kept = run_write(engine, finish)
    statistics.refresh_statistics(engine)
    return PurgeReport(cutoff, deleted, kept)


#: how long the purge of a month waits for the readers of the traces before it gives up
#: (detaching a partition needs the table to itself for a moment)
DROP_LOCK_TIMEOUT = "30s"


def drop_month(s: Session, month: dt.date) -> int:
    """Purge every trace of ``month`` but the audited ones by dropping the month's partitions
    (PostgreSQL, storage.partitions); returns the traces deleted. The audited traces and their
    chunks are copied aside and written back (into the default partitions), and every count
    kept in step with the traces is corrected as the triggers would have: the rollup's days
    of the month are removed and the kept traces counted again, and the signal groups lose
    the partition's rows (``trace_signal_groups_subtract``), as do the audit population groups
    and the traces counter (storage.population_groups), and gain the kept ones back (the
    insert's triggers). The audit items' foreign key is taken off for the moment the month has
    no partition and put back (checked) before the transaction ends."""
    conn = s.connection()
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
    tracerows.lock_trace_inserts(conn)
    # a purge running at the same moment may have dropped the month while this one waited
    # for the lock: the months are read again under it
    if month not in partitions.months(conn):
        return 0
    lo, hi = partitions.bounds(month)
    name = partitions.partition_name("traces", month)
    chunks_name = partitions.partition_name("trace_chunks", month)
    has_chunks = month in partitions.months(conn, "trace_chunks")
    kept = [
        int(pk)
        for pk in conn.exec_driver_sql(
            f"SELECT DISTINCT a.trace_pk FROM audit_items a JOIN {name} t ON t.id = a.trace_pk"
        ).scalars()
    ]
    total = int(conn.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar() or 0)
    trace_cols = ", ".join(_stored_columns(conn, "traces"))
    chunk_cols = ", ".join(_stored_columns(conn, "trace_chunks"))
    params = {"lo": lo, "hi": hi, "kept": kept}
    conn.exec_driver_sql(
        f"CREATE TEMP TABLE purge_kept_traces ON COMMIT DROP AS SELECT {trace_cols} "
        f"FROM {name} WHERE id = ANY(%(kept)s)",
        params,
    )
    conn.exec_driver_sql(
        f"CREATE TEMP TABLE purge_kept_chunks ON COMMIT DROP AS SELECT {chunk_cols} "
        "FROM trace_chunks WHERE trace_at >= %(lo)s AND trace_at < %(hi)s "
        "AND trace_pk = ANY(%(kept)s)",
        params,
    )
    # the spans a live source delivered for the deleted traces go with them
    conn.exec_driver_sql(
        f"DELETE FROM source_spans WHERE trace_id IN (SELECT trace_id FROM {name} "
        "WHERE NOT (id = ANY(%(kept)s)))",
        params,
    )
    rollup.forget_days(s, lo.date(), hi.date())
    conn.exec_driver_sql("SELECT trace_signal_groups_subtract(%(t)s::regclass)", {"t": name})
    population_groups.subtract_rows(conn, name)
    conn.exec_driver_sql("ALTER TABLE audit_items DROP CONSTRAINT fk_audit_items_trace_pk_traces")
    # the month's chunks: their partition, and any written to the default partition
    conn.exec_driver_sql(
        "DELETE FROM trace_chunks_pdefault WHERE trace_at >= %(lo)s AND trace_at < %(hi)s",
        params,
    )
    if has_chunks:
        conn.exec_driver_sql(f"ALTER TABLE trace_chunks DETACH PARTITION {chunks_name}")
        conn.exec_driver_sql(f"DROP TABLE {chunks_name}")
    conn.exec_driver_sql(f"ALTER TABLE traces DETACH PARTITION {name}")
    conn.exec_driver_sql(f"DROP TABLE {name}")
    if kept:
        conn.exec_driver_sql(
            f"INSERT INTO traces ({trace_cols}) SELECT {trace_cols} FROM purge_kept_traces"
        )
        conn.exec_driver_sql(
            f"INSERT INTO trace_chunks ({chunk_cols}) SELECT {chunk_cols} FROM purge_kept_chunks"
        )
        rollup.add_ids(s, kept)
    conn.exec_driver_sql(
        "ALTER TABLE audit_items ADD CONSTRAINT fk_audit_items_trace_pk_traces "
        "FOREIGN KEY (trace_pk, trace_at) REFERENCES traces (id, at) ON DELETE CASCADE"
    )
    return total - len(kept)


def _stored_columns(conn: Connection, table: str) -> list[str]:
    """The columns of ``table`` a row is written with (not the generated ones)."""
    return [
        str(c)
        for c in conn.exec_driver_sql(
            "SELECT attname FROM pg_attribute WHERE attrelid = %(t)s::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
            {"t": table},
        ).scalars()
    ]


def _covers(plan: dict[str, object], earlier: dict[str, object]) -> bool:
    """Whether a purge with ``plan`` deletes everything an earlier purge set out to delete
    (its cutoff is the same or later)."""
    try:
        mine = dt.datetime.fromisoformat(str(plan["cutoff"]))
        theirs = dt.datetime.fromisoformat(str(earlier.get("cutoff")))
    except (KeyError, ValueError):
        return False
    return mine >= theirs


def apply_retention(
    engine: Engine, actor: Actor, *, now: dt.datetime | None = None
) -> PurgeReport | None:
    """Purge by the retention setting; None when no retention is set."""
    require(actor, Permission.manage_users)
    r = get_retention(engine)
    if r.days is None:
        return None
    return purge_older_than(engine, actor, r.days, now=now)
