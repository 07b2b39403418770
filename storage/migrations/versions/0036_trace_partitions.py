"""Traces and their chunks partitioned by month on PostgreSQL (trace_chunks.trace_at), issue 33

At ten million traces a purge of a month deleted a million traces and five million chunks row by
row, and every read of a time range walked indexes over all months. On PostgreSQL ``traces`` is
now partitioned by range of ``at`` and ``trace_chunks`` by range of a new column ``trace_at``
(the chunk's trace's ``at``), one partition per calendar month in UTC plus a default partition
each (storage.partitions). The purge detaches and drops whole months.

What the partitioning needs, on PostgreSQL:

- keys hold the partition key: ``traces (id, at)``, ``trace_chunks (id, trace_at)``; the chunks
  refer to ``traces (id, at)`` by ``(trace_pk, trace_at)``; the audit items get a column
  ``trace_at`` (filled from the trace by a trigger, not in the models) and refer to it the same
  way;
- a trace id is unique across months through a statement trigger on insert (a unique index
  would have to hold ``at``); ``uq_traces_trace_id`` is now a plain index;
- the signal groups' triggers (migration 0022) are statement triggers on the partitioned table
  and keep firing for every insert; a dropped partition fires nothing, so the function
  ``trace_signal_groups_subtract(regclass)`` removes the groups' counts of a detached partition;
- migration 0025's autovacuum settings go on every traces partition (a partitioned table
  holds none).

The tables are rebuilt: every index, trigger and foreign key is read from the catalog and made
again on the new table, and the rows are copied. SQLite gets the column only (filled from the
traces); it has no partitions.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-05 13:40:00
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TRACES_OPTIONS = (
    "autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0"
)

# the signal group key of migration 0022, as of this revision
_SCALE = 256
_LIMIT = "1e15"


def _group_key(p: str) -> str:
    s = f"{p}.top_score"
    kind = f"CASE WHEN {s} IS NULL THEN 0 WHEN abs({s}) < {_LIMIT} THEN 1 ELSE 2 END"
    bin_ = f"CASE WHEN abs({s}) < {_LIMIT} THEN floor({s} * {_SCALE})::bigint END"
    return (
        "encode(sha256(convert_to(json_build_array("
        f"{p}.ranking_mode, {p}.hits_after_filter, {kind}, {bin_}, {p}.answerable, "
        f"{p}.ambiguous, {p}.ungrounded, {p}.topics::text, {p}.customer_tier)::text, 'UTF8')), "
        "'hex')"
    )


_PG_FUNCTIONS = (
    # a trace id stored twice, whichever month each is in: refused like a unique index would
    """CREATE FUNCTION traces_unique_trace_id() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE dup text;
    BEGIN
      SELECT n.trace_id INTO dup FROM new_rows n
      WHERE (SELECT count(*) FROM (SELECT 1 FROM traces t WHERE t.trace_id = n.trace_id
                                   LIMIT 2) x) > 1
      LIMIT 1;
      IF dup IS NOT NULL THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "uq_traces_trace_id"'
          USING ERRCODE = 'unique_violation',
                DETAIL = format('Key (trace_id)=(%s) already exists.', dup),
                CONSTRAINT = 'uq_traces_trace_id', TABLE = 'traces';
      END IF;
      RETURN NULL;
    END $$""",
    # an audit item's copy of its trace's month key
    """CREATE FUNCTION audit_items_trace_at() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.trace_at := (SELECT t.at FROM traces t WHERE t.id = NEW.trace_pk);
      RETURN NEW;
    END $$""",
    # the signal groups' counts of the rows of a detached partition, removed (the purge)
    f"""CREATE FUNCTION trace_signal_groups_subtract(src regclass) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
      EXECUTE format('UPDATE trace_signal_groups g SET n = g.n - d.c FROM ('
        'SELECT {_group_key("r").replace("'", "''")} AS k, count(*) AS c FROM %s r GROUP BY 1'
        ') d WHERE g.k = d.k', src);
      DELETE FROM trace_signal_groups WHERE n <= 0;
    END $$""",
)
_PG_DROP_FUNCTIONS = (
    "DROP FUNCTION IF EXISTS traces_unique_trace_id()",
    "DROP FUNCTION IF EXISTS audit_items_trace_at()",
    "DROP FUNCTION IF EXISTS trace_signal_groups_subtract(regclass)",
)


def _rows(sql: str, **params: object) -> list[tuple[object, ...]]:
    return [tuple(r) for r in op.get_bind().execute(sa.text(sql), params)]


def _indexes(table: str) -> list[tuple[str, str]]:
    """(name, definition) of the indexes of ``table`` that are not a constraint's."""
    return [
        (str(n), str(d))
        for n, d in _rows(
            "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
            "JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = CAST(:t AS regclass) AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid) ORDER BY i.relname",
            t=table,
        )
    ]


def _triggers(table: str) -> list[tuple[str, str]]:
    return [
        (str(n), str(d))
        for n, d in _rows(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = CAST(:t AS regclass) AND NOT tgisinternal AND tgparentid = 0 "
            "ORDER BY tgname",
            t=table,
        )
    ]


def _outgoing_fks(table: str) -> list[tuple[str, str]]:
    """(name, definition) of the foreign keys ``table`` holds to other tables."""
    return [
        (str(n), str(d))
        for n, d in _rows(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = CAST(:t AS regclass) AND contype = 'f' AND conparentid = 0 "
            "AND confrelid NOT IN (CAST('traces' AS regclass)) ORDER BY conname",
            t=table,
        )
    ]


def _columns(table: str) -> list[str]:
    """The stored columns of ``table`` in order (not the generated ones, which are computed)."""
    return [
        str(c)
        for (c,) in _rows(
            "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
            "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
            t=table,
        )
    ]


def _months(table: str, column: str) -> list[dt.date]:
    return [
        d if isinstance(d, dt.date) else dt.date.fromisoformat(str(d))
        for (d,) in _rows(
            f"SELECT DISTINCT (date_trunc('month', {column} AT TIME ZONE 'UTC'))::date "
            f"FROM {table} ORDER BY 1"
        )
    ]


def _next(month: dt.date) -> dt.date:
    return dt.date(month.year + (month.month == 12), month.month % 12 + 1, 1)


def _partitions(table: str, months: list[dt.date], options: str) -> None:
    with_ = f" WITH ({options})" if options else ""
    op.execute(f"CREATE TABLE {table}_pdefault PARTITION OF {table} DEFAULT{with_}")
    for m in months:
        op.execute(
            f"CREATE TABLE {table}_p{m:%Y%m} PARTITION OF {table} FOR VALUES "
            f"FROM ('{m.isoformat()} 00:00:00+00') TO ('{_next(m).isoformat()} 00:00:00+00')"
            f"{with_}"
        )


def _rebuild(partition: bool) -> None:
    """Make ``traces`` and ``trace_chunks`` again, partitioned by month (``partition``) or as
    plain tables, with their rows, indexes, triggers and keys."""
    keep = {t: (_indexes(t), _triggers(t), _outgoing_fks(t)) for t in ("traces", "trace_chunks")}
    # what refers to the traces goes first
    op.execute("ALTER TABLE trace_chunks DROP CONSTRAINT IF EXISTS fk_trace_chunks_trace_pk_traces")
    op.execute("ALTER TABLE audit_items DROP CONSTRAINT IF EXISTS fk_audit_items_trace_pk_traces")
    for t, (indexes, triggers, fks) in keep.items():
        for name, _ in triggers:
            op.execute(f"DROP TRIGGER {name} ON {t}")
        for name, _ in indexes:
            op.execute(f"DROP INDEX {name}")
        for name, _ in fks:
            op.execute(f"ALTER TABLE {t} DROP CONSTRAINT {name}")
        op.execute(f"ALTER TABLE {t} DROP CONSTRAINT IF EXISTS uq_traces_trace_id")
        op.execute("DROP INDEX IF EXISTS uq_traces_trace_id")
        op.execute(f"ALTER TABLE {t} DROP CONSTRAINT pk_{t}")
        op.execute(f"ALTER TABLE {t} RENAME TO {t}_old")

    if partition:
        op.execute(
            "CREATE TABLE traces (LIKE traces_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
            "INCLUDING GENERATED) PARTITION BY RANGE (at)"
        )
        op.execute("ALTER TABLE traces ADD CONSTRAINT pk_traces PRIMARY KEY (id, at)")
        _partitions("traces", _months("traces_old", "at"), _TRACES_OPTIONS)
        op.execute(
            "CREATE TABLE trace_chunks (LIKE trace_chunks_old INCLUDING DEFAULTS "
            "INCLUDING CONSTRAINTS, trace_at TIMESTAMP WITH TIME ZONE NOT NULL) "
            "PARTITION BY RANGE (trace_at)"
        )
        op.execute(
            "ALTER TABLE trace_chunks ADD CONSTRAINT pk_trace_chunks PRIMARY KEY (id, trace_at)"
        )
        _partitions("trace_chunks", _months("traces_old", "at"), "")
        cols = ", ".join(_columns("traces_old"))
        op.execute(f"INSERT INTO traces ({cols}) SELECT {cols} FROM traces_old")
        chunk_cols = _columns("trace_chunks_old")
        op.execute(
            f"INSERT INTO trace_chunks ({', '.join(chunk_cols)}, trace_at) "
            f"SELECT {', '.join(f'c.{c}' for c in chunk_cols)}, t.at FROM trace_chunks_old c "
            "JOIN traces t ON t.id = c.trace_pk"
        )
    else:
        op.execute(
            "CREATE TABLE traces (LIKE traces_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
            f"INCLUDING GENERATED) WITH ({_TRACES_OPTIONS})"
        )
        op.execute("ALTER TABLE traces ADD CONSTRAINT pk_traces PRIMARY KEY (id)")
        cols = ", ".join(_columns("traces_old"))
        op.execute(f"INSERT INTO traces ({cols}) SELECT {cols} FROM traces_old")
        op.execute(
            "CREATE TABLE trace_chunks (LIKE trace_chunks_old INCLUDING DEFAULTS "
            "INCLUDING CONSTRAINTS)"
        )
        op.execute("ALTER TABLE trace_chunks DROP COLUMN trace_at")
        op.execute("ALTER TABLE trace_chunks ADD CONSTRAINT pk_trace_chunks PRIMARY KEY (id)")
        cols = ", ".join(_columns("trace_chunks"))
        op.execute(f"INSERT INTO trace_chunks ({cols}) SELECT {cols} FROM trace_chunks_old")

    for t in ("traces", "trace_chunks"):
        op.execute(f"ALTER SEQUENCE {t}_id_seq OWNED BY {t}.id")
        op.execute(f"DROP TABLE {t}_old")
        indexes, triggers, fks = keep[t]
        for name, definition in indexes:
            if name != "uq_traces_trace_id":  # made below, as this engine needs it
                # a partitioned table's reads "ON ONLY": the plain table's index as a whole
                op.execute(definition.replace(" ON ONLY ", " ON ", 1))
        for name, definition in fks:
            op.execute(f"ALTER TABLE {t} ADD CONSTRAINT {name} {definition}")
        for _, definition in triggers:
            op.execute(definition)

    if partition:
        op.execute("CREATE INDEX uq_traces_trace_id ON traces (trace_id)")
        op.execute(
            "CREATE TRIGGER traces_unique_trace_id AFTER INSERT ON traces "
            "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
            "EXECUTE FUNCTION traces_unique_trace_id()"
        )
        op.execute(
            "ALTER TABLE trace_chunks ADD CONSTRAINT fk_trace_chunks_trace_pk_traces "
            "FOREIGN KEY (trace_pk, trace_at) REFERENCES traces (id, at) ON DELETE CASCADE"
        )
        op.execute("ALTER TABLE audit_items ADD COLUMN trace_at TIMESTAMP WITH TIME ZONE")
        op.execute("UPDATE audit_items a SET trace_at = t.at FROM traces t WHERE t.id = a.trace_pk")
        op.execute("ALTER TABLE audit_items ALTER COLUMN trace_at SET NOT NULL")
        op.execute(
            "CREATE TRIGGER audit_items_trace_at BEFORE INSERT OR UPDATE OF trace_pk "
            "ON audit_items FOR EACH ROW EXECUTE FUNCTION audit_items_trace_at()"
        )
        op.execute(
            "ALTER TABLE audit_items ADD CONSTRAINT fk_audit_items_trace_pk_traces "
            "FOREIGN KEY (trace_pk, trace_at) REFERENCES traces (id, at) ON DELETE CASCADE"
        )
    else:
        op.execute("ALTER TABLE traces ADD CONSTRAINT uq_traces_trace_id UNIQUE (trace_id)")
        op.execute(
            "ALTER TABLE trace_chunks ADD CONSTRAINT fk_trace_chunks_trace_pk_traces "
            "FOREIGN KEY (trace_pk) REFERENCES traces (id) ON DELETE CASCADE"
        )
        op.execute("DROP TRIGGER IF EXISTS audit_items_trace_at ON audit_items")
        op.execute("ALTER TABLE audit_items DROP COLUMN IF EXISTS trace_at")
        op.execute(
            "ALTER TABLE audit_items ADD CONSTRAINT fk_audit_items_trace_pk_traces "
            "FOREIGN KEY (trace_pk) REFERENCES traces (id) ON DELETE CASCADE"
        )
    op.execute("ANALYZE traces")
    op.execute("ANALYZE trace_chunks")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for sql in _PG_FUNCTIONS:
            op.execute(sql)
        _rebuild(partition=True)
        return
    # SQLite: the column, filled from the traces (no partitions)
    op.add_column(
        "trace_chunks",
        sa.Column(
            "trace_at",
            storage.models.UTCDateTime(),
            nullable=False,
            server_default="1970-01-01 00:00:00.000000",
        ),
    )
    op.execute(
        "UPDATE trace_chunks SET trace_at = "
        "(SELECT t.at FROM traces t WHERE t.id = trace_chunks.trace_pk)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS traces_unique_trace_id ON traces")
        _rebuild(partition=False)
        for sql in _PG_DROP_FUNCTIONS:
            op.execute(sql)
        return
    with op.batch_alter_table("trace_chunks") as batch:
        batch.drop_column("trace_at")
