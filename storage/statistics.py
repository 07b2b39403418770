"""The planner's statistics of the partitioned traces tables (storage.partitions), kept
up to date by the writers.

Autovacuum analyzes each partition as its rows change, but never a partitioned table itself:
PostgreSQL's documentation says to ``ANALYZE`` it by hand. The planner reads the parent's
statistics to estimate a join or a grouping over the whole table (the audit items' traces, a
trace's chunks), so left alone they describe the table as it was when migration 0036 made it
(empty). The trace import and the purge call :func:`refresh_statistics` once they have
committed, which analyzes both tables when the traces have changed by a tenth since.
Nothing on SQLite, whose planner keeps no such statistics per table.
"""

from __future__ import annotations

import logging
from typing import Final

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from storage import population_groups
from storage.partitions import PARTITIONED

__all__ = ["ANALYZE_LOCK", "analyze_if_due", "refresh_statistics", "stale_parents"]

log = logging.getLogger(__name__)


#: the partitioned tables are analyzed again once the traces differ from the count their
#: statistics were gathered at by this many, plus this share of that count (autovacuum's own
#: rule for a plain table: 50 rows and a tenth)
ANALYZE_BASE: Final = 50
ANALYZE_SHARE: Final = 0.1
ANALYZE_LOCK: Final = 0x77625F616E6C  # "wb_anl": one ANALYZE of the parents at a time


def stale_parents(conn: Connection) -> dict[str, tuple[float, int]]:
    """The partitioned tables whose statistics are due, with (the traces when they were last
    analyzed, or -1 when never; the traces now). Autovacuum analyzes the partitions but never
    a partitioned table itself (PostgreSQL's documentation says to do it by hand), and the
    planner reads the parent's statistics to estimate a join or a grouping over the whole
    table, such as the audit items' traces or a trace's chunks. The traces now are the count
    the triggers keep (storage.population_groups), exact at the writer's commit (the activity
    statistics reach other sessions up to a second later); the chunks are written and
    purged with their traces, so both tables are due together."""
    if conn.dialect.name != "postgresql":
        return {}
    then = conn.exec_driver_sql("SELECT reltuples FROM pg_class WHERE oid = 'traces'::regclass")
    then_f = float(then.scalar() or 0)
    now = population_groups.trace_count(conn)
    if then_f >= 0 and abs(now - then_f) <= ANALYZE_BASE + ANALYZE_SHARE * then_f:
        return {}
    return dict.fromkeys(PARTITIONED, (then_f, now))


def analyze_if_due(conn: Connection) -> list[str]:
    """``ANALYZE`` the partitioned tables once the traces have changed by a tenth since their
    statistics were gathered (:func:`stale_parents`), in ``conn``'s transaction; returns the
    tables analyzed. Skipped while another process analyzes them (it will have the new rows
    too). Run after a trace import and a purge; nothing on SQLite."""
    if conn.dialect.name != "postgresql":
        return []
    due = stale_parents(conn)
    if not due:
        return []
    if not conn.exec_driver_sql(
        "SELECT pg_try_advisory_xact_lock(%(k)s)", {"k": ANALYZE_LOCK}
    ).scalar():
        return []
    # the purge's month drop holds the tables for its moment: wait that long at most
    conn.exec_driver_sql("SET LOCAL lock_timeout = '5s'")
    for table in due:
        conn.exec_driver_sql(f"ANALYZE {table}")
    return list(due)


def refresh_statistics(engine: Engine) -> None:
    """:func:`analyze_if_due` in a transaction of its own, after a trace import or a purge
    has committed: the statistics help later queries, and failing to gather them (a lock not
    granted in time) costs the import nothing, so it is logged rather than raised."""
    if engine.dialect.name != "postgresql":
        return
    try:
        with engine.begin() as conn:
            analyze_if_due(conn)
    except DBAPIError as exc:
        log.warning("the traces' statistics were not gathered: %s", exc.orig or exc)
