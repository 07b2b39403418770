"""The traces counted by UTC day and the audit columns (table ``trace_population_groups``),
and the number of traces (the counter ``traces_rows``), issue 33.

An audit plan counts its population per stratum: for each stratum the traces, the smallest
and largest id, the sum of the ids and the sum of ``sample_key mod 2**31`` (the population's
fingerprint, review.audits.plans). Counted from ``traces`` that is a read of every trace of
the population (0.4-0.7 s at a million traces on PostgreSQL, ten times that at ten million).
So the same figures are kept here per group of traces alike in UTC day, decision, reason
code, feedback, customer tier, language and restricted flag (not the document type: with it
the groups of a day were four times as many, about 3,000 a day at ten million traces, which
is what a count sums; a population by document type is counted from the traces): ``n``,
``id_sum``, ``key_sum``, ``unkeyed`` (traces without a sampling key), ``min_id`` and
``max_id``. Counts and sums add and subtract exactly; the smallest and largest id only grow
exactly: a deleted trace that was its group's smallest or largest id marks the group
``stale`` (its min/max may no longer be exact), and the readers count a day with a stale
group from the traces instead (``refresh_stale`` recomputes them; ``rebuild`` everything).

The counter row ``counters.traces_rows`` holds the number of traces, so nothing needs a
``count(*)`` of the table to know whether it changed.

Triggers keep both in step with ``traces``, whoever writes them (the importer, ORM inserts,
the purge, restricted-flag updates): row triggers on SQLite, statement triggers with
transition tables on PostgreSQL (one grouped upsert per INSERT, COPY or DELETE). The group
key ``k`` is, on SQLite, the values quoted with their types, on PostgreSQL the MD5 of them as
a JSON array. On PostgreSQL the triggers of one statement lock the groups in key order, then
the counter, so two concurrent writers wait for each other instead of deadlocking.

Dropping a detached partition of ``traces`` fires no trigger: call :func:`subtract_rows` with
its name first (in the same transaction as the drop), and its rows are uncounted.

Migration 0035 creates the table, the counter and the triggers from the SQL built here (the
triggers are the ones of that revision: a change to this SQL needs a migration that drops
and re-creates them).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

from sqlalchemy import Connection, bindparam, func, select, text
from sqlalchemy.orm import Session

from storage.models import Counter, Trace

__all__ = [
    "COLUMNS",
    "COUNTER",
    "DIMENSIONS",
    "KEY_SUM_MOD",
    "TABLE",
    "drop_statements",
    "grouped_insert",
    "install_statements",
    "rebuild",
    "refresh_stale",
    "subtract_rows",
    "trace_count",
]

TABLE: Final = "trace_population_groups"

#: the counter (``counters.name``) holding the number of traces
COUNTER: Final = "traces_rows"

#: the trace columns a group is alike in, besides the UTC day (review.audits reads these names)
DIMENSIONS: Final = (
    "decision",
    "reason_code",
    "feedback",
    "customer_tier",
    "language",
    "restricted",
)

#: ``key_sum`` sums ``sample_key % KEY_SUM_MOD`` (review.audits.plans' fingerprint term)
KEY_SUM_MOD: Final = 2**31

#: the columns of the table, in order
COLUMNS: Final = (
    "k",
    "day",
    *DIMENSIONS,
    "n",
    "id_sum",
    "key_sum",
    "unkeyed",
    "min_id",
    "max_id",
    "stale",
)

_TRIGGERS: Final = ("trace_population_groups_ai", "trace_population_groups_ad")
_UPDATE_TRIGGER: Final = "trace_population_groups_au"
_PG_FUNCTIONS: Final = ("add", "remove", "change")
#: an update of these columns moves a trace to another group
_MOVING: Final = ("id", "at", "sample_key", *DIMENSIONS)


def _sqlite_day(p: str) -> str:
    # SQLAlchemy stores naive UTC datetimes as 'YYYY-MM-DD HH:MM:SS[.ffffff]': the first ten
    # characters are the day, and compare as the filters' string ranges on ``at`` do
    return f"substr({p}.at, 1, 10)"


def _sqlite_key(p: str) -> str:
    def quoted(expr: str) -> str:
        return f"typeof({expr}) || ':' || quote({expr})"

    return " || '|' || ".join([quoted(_sqlite_day(p)), *(quoted(f"{p}.{c}") for c in DIMENSIONS)])


def _pg_day(p: str) -> str:
    return f"({p}.at)::date"


def _pg_key_of(x: str) -> str:
    """The key of the group row ``x`` (columns ``day`` and DIMENSIONS): computed once per
    group, not per trace (an MD5 of JSON costs about 20 us a row)."""
    values = ", ".join([f"{x}.day", *(f"{x}.{c}" for c in DIMENSIONS)])
    return f"md5(json_build_array({values})::text)"


def _pg_values(p: str) -> str:
    """The values that place the row ``p`` in a group."""
    return ", ".join([_pg_day(p), *(f"{p}.{c}" for c in DIMENSIONS)])


def _pg_terms(source: str) -> str:
    """SELECT of the groups' values and terms of the trace rows of ``source`` (grouped by the
    plain columns, which a hash aggregate does cheaply)."""
    dims = ", ".join(f"r.{c}" for c in DIMENSIONS)
    return (
        f"SELECT {_pg_day('r')} AS day, {dims}, count(*) AS n, sum(r.id) AS ids, "
        f"sum({_key_term('postgresql', 'r')}) AS keys, count(*) - count(r.sample_key) AS unkeyed, "
        f"min(r.id) AS mn, max(r.id) AS mx FROM {source} r GROUP BY 1, {dims}"
    )


def _key_term(dialect: str, p: str) -> str:
    """``sample_key mod KEY_SUM_MOD`` of the row ``p`` (0 without a key); ``mod()`` on
    PostgreSQL, where the driver reads ``%`` as a placeholder, ``%`` on SQLite."""
    if dialect == "postgresql":
        return f"coalesce(mod({p}.sample_key, {KEY_SUM_MOD})::integer, 0)"
    return f"coalesce({p}.sample_key % {KEY_SUM_MOD}, 0)"


def _check_relation(relation: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?", relation):
        raise ValueError(f"not a plain table name: {relation!r}")
    return relation


def _grouped(dialect: str, source: str) -> str:
    """SELECT of the groups of the trace rows of ``source``, in the table's columns."""
    if dialect == "postgresql":
        cols = ", ".join(f"x.{c}" for c in DIMENSIONS)
        return (
            f"SELECT {_pg_key_of('x')}, x.day, {cols}, x.n::bigint, x.ids::bigint, "
            f"x.keys::bigint, x.unkeyed::bigint, x.mn, x.mx, false FROM ({_pg_terms(source)}) x"
        )
    dims = ", ".join(f"r.{c}" for c in DIMENSIONS)
    cols = ", ".join(DIMENSIONS)
    return (
        f"SELECT k, day, {cols}, count(*), sum(id), sum({_key_term(dialect, 'x')}), "
        "count(*) - count(sample_key), min(id), max(id), false FROM ("
        f"SELECT {_sqlite_key('r')} AS k, {_sqlite_day('r')} AS day, {dims}, r.id, "
        f"r.sample_key FROM {source} r) x GROUP BY k, day, {cols}"
    )


def grouped_insert(dialect: str, source: str = "traces") -> str:
    """INSERT of the groups of every row of ``source`` (into an empty table: the backfill)."""
    return f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) " + _grouped(dialect, source)


def _pg_add(source: str, count: bool) -> str:
    sql = (
        f"INSERT INTO {TABLE} AS g ({', '.join(COLUMNS)}) "
        + _grouped("postgresql", source)
        + " ORDER BY 1 ON CONFLICT (k) DO UPDATE SET n = g.n + EXCLUDED.n, "
        "id_sum = g.id_sum + EXCLUDED.id_sum, key_sum = g.key_sum + EXCLUDED.key_sum, "
        "unkeyed = g.unkeyed + EXCLUDED.unkeyed, "
        "min_id = least(g.min_id, EXCLUDED.min_id), max_id = greatest(g.max_id, EXCLUDED.max_id);"
    )
    if count:
        sql += (
            f" UPDATE counters SET value = value + (SELECT count(*) FROM {source}) "
            f"WHERE name = '{COUNTER}';"
        )
    return sql


def _pg_remove(source: str, count: bool, select: str = "PERFORM") -> str:
    """Uncount the rows of ``source``: the groups locked in key order (as the insert's upsert
    takes them), updated, then the counter. ``select`` is ``PERFORM`` in a trigger function,
    ``SELECT`` outside one."""
    terms = _pg_terms(source)
    sql = (
        f"{select} 1 FROM {TABLE} WHERE k IN (SELECT {_pg_key_of('x')} FROM ({terms}) x) "
        "ORDER BY k FOR UPDATE; "
        f"UPDATE {TABLE} g SET n = g.n - d.n, id_sum = g.id_sum - d.ids, "
        "key_sum = g.key_sum - d.keys, unkeyed = g.unkeyed - d.unkeyed, "
        "stale = g.stale OR d.mn <= g.min_id OR d.mx >= g.max_id FROM ("
        f"SELECT {_pg_key_of('x')} AS k, x.* FROM ({terms}) x"
        f") d WHERE g.k = d.k; DELETE FROM {TABLE} WHERE n <= 0;"
    )
    if count:
        sql += (
            f" UPDATE counters SET value = value - (SELECT count(*) FROM {source}) "
            f"WHERE name = '{COUNTER}';"
        )
    return sql


def _sqlite_add(p: str) -> str:
    values = ", ".join(
        [
            _sqlite_key(p),
            _sqlite_day(p),
            *(f"{p}.{c}" for c in DIMENSIONS),
            "1",
            f"{p}.id",
            _key_term("sqlite", p),
            f"{p}.sample_key IS NULL",
            f"{p}.id",
            f"{p}.id",
            "0",
        ]
    )
    return (
        f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({values}) "
        "ON CONFLICT (k) DO UPDATE SET n = n + 1, id_sum = id_sum + excluded.id_sum, "
        "key_sum = key_sum + excluded.key_sum, unkeyed = unkeyed + excluded.unkeyed, "
        "min_id = min(min_id, excluded.min_id), max_id = max(max_id, excluded.max_id);"
    )


def _sqlite_remove(p: str) -> str:
    key = _sqlite_key(p)
    return (
        f"UPDATE {TABLE} SET n = n - 1, id_sum = id_sum - {p}.id, "
        f"key_sum = key_sum - {_key_term('sqlite', p)}, "
        f"unkeyed = unkeyed - ({p}.sample_key IS NULL), "
        f"stale = (stale OR {p}.id <= min_id OR {p}.id >= max_id) WHERE k = {key}; "
        f"DELETE FROM {TABLE} WHERE k = {key} AND n <= 0;"
    )


def _sqlite_counter(delta: str) -> str:
    return f"UPDATE counters SET value = value {delta} 1 WHERE name = '{COUNTER}';"


def install_statements(dialect: str) -> list[str]:
    """The triggers (and on PostgreSQL their functions) keeping the table and the counter in
    step with ``traces``."""
    if dialect == "sqlite":
        moving = ", ".join(_MOVING)
        return [
            f"CREATE TRIGGER {_TRIGGERS[0]} AFTER INSERT ON traces BEGIN "
            f"{_sqlite_add('NEW')} {_sqlite_counter('+')} END",
            f"CREATE TRIGGER {_TRIGGERS[1]} AFTER DELETE ON traces BEGIN "
            f"{_sqlite_remove('OLD')} {_sqlite_counter('-')} END",
            f"CREATE TRIGGER {_UPDATE_TRIGGER} AFTER UPDATE OF {moving} ON traces "
            f"WHEN {_sqlite_key('OLD')} IS NOT {_sqlite_key('NEW')} OR OLD.id IS NOT NEW.id "
            "OR OLD.sample_key IS NOT NEW.sample_key BEGIN "
            f"{_sqlite_remove('OLD')} {_sqlite_add('NEW')} END",
        ]
    if dialect != "postgresql":
        raise ValueError(f"no population-group triggers for {dialect!r}")
    moved = (
        "FROM old_rows o JOIN new_rows nw ON nw.id = o.id "
        f"WHERE ({_pg_values('o')}) IS DISTINCT FROM ({_pg_values('nw')}) "
        "OR o.sample_key IS DISTINCT FROM nw.sample_key"
    )
    # an UPDATE that changes ids: old and new rows do not pair up, so all are moved
    old_moved = (
        f"(SELECT o.* {moved} UNION ALL SELECT o.* FROM old_rows o "
        "WHERE NOT EXISTS (SELECT 1 FROM new_rows nw WHERE nw.id = o.id))"
    )
    new_moved = (
        f"(SELECT nw.* {moved} UNION ALL SELECT nw.* FROM new_rows nw "
        "WHERE NOT EXISTS (SELECT 1 FROM old_rows o WHERE o.id = nw.id))"
    )

    def fn(name: str, body: str) -> str:
        return (
            f"CREATE FUNCTION trace_population_groups_{name}() RETURNS trigger "
            f"LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NULL; END $$"
        )

    return [
        fn("add", _pg_add("new_rows", True)),
        fn("remove", _pg_remove("old_rows", True)),
        fn("change", _pg_remove(old_moved, False) + " " + _pg_add(new_moved, False)),
        f"CREATE TRIGGER {_TRIGGERS[0]} AFTER INSERT ON traces "
        "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION trace_population_groups_add()",
        f"CREATE TRIGGER {_TRIGGERS[1]} AFTER DELETE ON traces "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION trace_population_groups_remove()",
        f"CREATE TRIGGER {_UPDATE_TRIGGER} AFTER UPDATE ON traces "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION trace_population_groups_change()",
    ]


def drop_statements(dialect: str) -> list[str]:
    out = []
    for trigger in (*_TRIGGERS, _UPDATE_TRIGGER):
        if dialect == "sqlite":
            out.append(f"DROP TRIGGER IF EXISTS {trigger}")
        else:
            out.append(f"DROP TRIGGER IF EXISTS {trigger} ON traces")
    if dialect == "postgresql":
        out += [f"DROP FUNCTION IF EXISTS trace_population_groups_{f}()" for f in _PG_FUNCTIONS]
    return out


def trace_count(s: Session | Connection) -> int:
    """The number of traces: the counter the triggers keep, a ``count(*)`` of the table when
    the counter row is missing."""
    n = s.execute(select(Counter.value).where(Counter.name == COUNTER)).scalar()
    if n is None:
        n = s.execute(select(func.count()).select_from(Trace)).scalar()
    return int(n or 0)


def subtract_rows(conn: Connection, relation: str) -> None:
    """Uncount every row of the table ``relation`` (with the columns of ``traces``: a
    detached partition about to be dropped, whose drop fires no trigger), in the caller's
    transaction: the groups and the traces counter lose exactly those rows. Call it once per
    relation, before the drop; the rows must not also be deleted from ``traces`` (their
    triggers would uncount them a second time)."""
    source = _check_relation(relation)
    dialect = conn.dialect.name
    if dialect == "postgresql":
        for statement in _pg_remove(source, True, "SELECT").split("; "):
            conn.exec_driver_sql(statement)
        return
    # SQLite has no partitions; the same arithmetic, grouped, for symmetry and the tests
    grouped = (
        f"SELECT {_sqlite_key('r')} AS k, count(*) AS n, sum(r.id) AS ids, "
        f"sum({_key_term('sqlite', 'r')}) AS keys, "
        "count(*) - count(r.sample_key) AS unkeyed, min(r.id) AS mn, max(r.id) AS mx "
        f"FROM {source} r GROUP BY 1"
    )
    conn.exec_driver_sql(
        f"UPDATE {TABLE} AS g SET n = g.n - d.n, id_sum = g.id_sum - d.ids, "
        "key_sum = g.key_sum - d.keys, unkeyed = g.unkeyed - d.unkeyed, "
        "stale = (g.stale OR d.mn <= g.min_id OR d.mx >= g.max_id) "
        f"FROM ({grouped}) AS d WHERE g.k = d.k"
    )
    conn.exec_driver_sql(f"DELETE FROM {TABLE} WHERE n <= 0")
    conn.exec_driver_sql(
        f"UPDATE counters SET value = value - (SELECT count(*) FROM {source}) "
        f"WHERE name = '{COUNTER}'"
    )


def rebuild(conn: Connection) -> int:
    """Recompute the groups and the counter from ``traces`` (in the caller's transaction);
    returns the number of traces."""
    dialect = conn.dialect.name
    conn.exec_driver_sql(f"DELETE FROM {TABLE}")
    conn.exec_driver_sql(grouped_insert(dialect))
    n = int(conn.exec_driver_sql("SELECT count(*) FROM traces").scalar() or 0)
    updated = conn.execute(
        text("UPDATE counters SET value = :n WHERE name = :name"), {"n": n, "name": COUNTER}
    )
    if not updated.rowcount:
        conn.execute(
            text("INSERT INTO counters (name, value, version) VALUES (:name, :n, 1)"),
            {"n": n, "name": COUNTER},
        )
    return n


def refresh_stale(conn: Connection) -> int:
    """Recompute the smallest and largest id of the stale groups, one day at a time from the
    traces of that day (a range of ``at``), in the caller's transaction; returns how many
    groups were refreshed."""
    dialect = conn.dialect.name
    days = sorted(
        {
            dt.date.fromisoformat(str(d)[:10])
            for d in conn.scalars(text(f"SELECT DISTINCT day FROM {TABLE} WHERE stale"))
        }
    )
    at_type = Trace.__table__.c.at.type
    refreshed = 0
    day_rows = "(SELECT * FROM traces WHERE at >= :a AND at < :b)"
    if dialect == "postgresql":
        grouped = f"SELECT {_pg_key_of('x')} AS k, x.mn, x.mx FROM ({_pg_terms(day_rows)}) x"
    else:
        grouped = (
            f"SELECT {_sqlite_key('r')} AS k, min(r.id) AS mn, max(r.id) AS mx "
            f"FROM {day_rows} r GROUP BY 1"
        )
    for day in days:
        start = dt.datetime(day.year, day.month, day.day)
        result = conn.execute(
            text(
                f"UPDATE {TABLE} AS g SET min_id = d.mn, max_id = d.mx, stale = false "
                f"FROM ({grouped}) AS d WHERE g.k = d.k AND g.stale"
            ).bindparams(bindparam("a", type_=at_type), bindparam("b", type_=at_type)),
            {"a": start, "b": start + dt.timedelta(days=1)},
        )
        refreshed += int(result.rowcount or 0)
    return refreshed
