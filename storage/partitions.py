"""Monthly partitions of the traces and their chunks on PostgreSQL (migration 0036).

On PostgreSQL ``traces`` is partitioned by range of ``at`` and ``trace_chunks`` by range of
``trace_at`` (a chunk's copy of its trace's ``at``), one partition per calendar month in UTC
(``traces_p202612`` holds December 2026) and a default partition each (``traces_pdefault``)
for the months that have none. A query with a range on ``at`` reads only the months in it,
and the purge drops a whole month's partitions instead of deleting its rows one by one
(review.traces.retention).

:func:`ensure_months` makes the partitions of the months about to be written; every bulk
writer calls it in its write transaction (the trace import's batches through
review.traces.tracerows), and an ORM flush of new traces calls it through a session hook
(:func:`install_flush_hook`), so rows land in their month. A month whose rows are already in
the default partition (written before its partition existed) keeps them there: making its
partition would have to move them, which the purge's month drop does not need (it reads the
default partition by range like any other).

SQLite has no partitions: every function here does nothing there.

Keys. A primary key or unique index of a partitioned table must hold the partition key, so on
PostgreSQL the keys are ``traces (id, at)`` and ``trace_chunks (id, trace_at)``; the chunks
refer to their trace by ``(trace_pk, trace_at)``, and the audit items by ``(trace_pk,
trace_at)`` through a column ``audit_items.trace_at`` that a trigger fills from the trace
(PostgreSQL only, not in the models). A trace id is unique across all months through a
statement trigger that refuses an insert whose trace id is stored already (the import checks
first under its lock, so the trigger only fires for a writer that did not). The Alembic model
check skips these engine-specific names (:data:`UNMODELLED`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Final

from sqlalchemy.engine import Connection

__all__ = [
    "COLUMN_OPTIONS",
    "PARTITIONED",
    "UNMODELLED",
    "bounds",
    "ensure_months",
    "is_partition",
    "month_of",
    "months",
    "partition_name",
]

#: the partitioned tables and the column each is partitioned by
PARTITIONED: Final[dict[str, str]] = {"traces": "at", "trace_chunks": "trace_at"}

#: storage settings of every traces partition (migration 0025 set them on the whole table,
#: which a partitioned table cannot hold): autovacuum after 10,000 new rows, so index-only
#: counts stay index-only
PARTITION_OPTIONS: Final[dict[str, dict[str, str]]] = {
    "traces": {
        "autovacuum_vacuum_insert_threshold": "10000",
        "autovacuum_vacuum_insert_scale_factor": "0",
    },
    "trace_chunks": {},
}

#: column settings of every partition. ``traces.at``: the planner counts two traces to an
#: instant, where its sample finds about one. A foreign-key check of a trace looks it up by
#: ``id = $1 AND at = $2`` (the audit items' and the chunks'); each of the many indexes that
#: begin with ``at`` then ties in cost with the primary key ``(id, at)``, and the planner took
#: the newest of them: at ten million traces the 400 key checks of a draw read 400 leaves of
#: ``ix_traces_signals`` from disk, one after the other (0.15 s), where the draw's lock had
#: just read the primary key's (review.audits.plans._lock_drawn). Counted two to an instant,
#: ``at`` alone finds more rows than the primary key, which the checks then take. It changes
#: only estimates of ``at = value`` (and of distinct instants); ranges on ``at``, which every
#: page's query uses, are estimated from the histogram as before. Migration 0043.
COLUMN_OPTIONS: Final[dict[str, dict[str, dict[str, str]]]] = {
    "traces": {"at": {"n_distinct": "-0.5"}},
    "trace_chunks": {},
}

_NAME = re.compile(r"^(traces|trace_chunks)_p(\d{6}|default)$")

#: names the Alembic model check skips (storage/migrations/env.py): the trace id's index on
#: PostgreSQL (unique in the models, a plain index plus a trigger there); the composite
#: foreign keys to the traces are skipped by what they are, as PostgreSQL names their copies
UNMODELLED: Final = frozenset({"uq_traces_trace_id"})


def is_partition(name: str | None) -> bool:
    """Whether ``name`` is one of the partitions' tables."""
    return name is not None and _NAME.match(name) is not None


def month_of(at: dt.datetime) -> dt.date:
    """The first day of ``at``'s month in UTC (a naive ``at`` is UTC)."""
    if at.tzinfo is not None:
        at = at.astimezone(dt.UTC)
    return dt.date(at.year, at.month, 1)


def _next(month: dt.date) -> dt.date:
    return dt.date(month.year + (month.month == 12), month.month % 12 + 1, 1)


def bounds(month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """The UTC instants ``[start, end)`` of ``month``."""
    start = dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)
    end = dt.datetime.combine(_next(month), dt.time(), tzinfo=dt.UTC)
    return start, end


def partition_name(table: str, month: dt.date | None) -> str:
    """``traces_p202612``, or ``traces_pdefault`` for None."""
    return f"{table}_p{'default' if month is None else f'{month:%Y%m}'}"


def months(conn: Connection, table: str = "traces") -> list[dt.date]:
    """The months that have a partition of ``table``, oldest first ([] on SQLite)."""
    if conn.dialect.name != "postgresql":
        return []
    names = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %(t)s::regclass",
        {"t": table},
    ).scalars()
    found = []
    for name in names:
        m = _NAME.match(str(name))
        if m and m.group(2) != "default":
            found.append(dt.date(int(m.group(2)[:4]), int(m.group(2)[4:]), 1))
    return sorted(found)


def _in_default(conn: Connection, table: str, month: dt.date) -> bool:
    lo, hi = bounds(month)
    return bool(
        conn.exec_driver_sql(
            f"SELECT EXISTS (SELECT 1 FROM {partition_name(table, None)} "
            f"WHERE {PARTITIONED[table]} >= %(lo)s AND {PARTITIONED[table]} < %(hi)s)",
            {"lo": lo, "hi": hi},
        ).scalar()
    )


def create_month(conn: Connection, table: str, month: dt.date) -> bool:
    """Make ``table``'s partition of ``month`` unless its rows are in the default partition
    already; returns whether it was made. Both tables are made together by
    :func:`ensure_months`."""
    if _in_default(conn, table, month):
        return False
    lo, hi = bounds(month)
    name = partition_name(table, month)
    options = PARTITION_OPTIONS[table]
    with_ = f" WITH ({', '.join(f'{k} = {v}' for k, v in options.items())})" if options else ""
    conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {table} "
        f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}'){with_}"
    )
    for column, settings in COLUMN_OPTIONS[table].items():
        conn.exec_driver_sql(
            f"ALTER TABLE {name} ALTER COLUMN {column} "
            f"SET ({', '.join(f'{k} = {v}' for k, v in settings.items())})"
        )
    return True


def ensure_months(conn: Connection, ats: Iterable[dt.datetime | None]) -> list[dt.date]:
    """Make the monthly partitions of the instants ``ats`` that have none yet, in ``conn``'s
    transaction; returns the months made. Nothing on SQLite."""
    if conn.dialect.name != "postgresql":
        return []
    wanted = {month_of(a) for a in ats if a is not None}
    if not wanted:
        return []
    have = set(months(conn))
    made = []
    for month in sorted(wanted - have):
        # the traces' month first: a chunk's month is its trace's
        if create_month(conn, "traces", month):
            create_month(conn, "trace_chunks", month)
            made.append(month)
    return made
