"""The rows a trace import writes, and writing them in bulk.

:func:`trace_values` is the one place where the column values of a trace row are computed from
a parsed (and redacted) trace: a column that the import fills is one key there (and the column
in :class:`storage.models.Trace`); every writer below takes its column list from those keys.
:func:`chunk_values` does the same for the chunk rows (in :data:`CHUNK_COLUMNS` order).

The writers insert one batch inside the caller's write transaction, after the caller has
removed the trace ids already stored (the caller holds the lock that makes that check exact:
``BEGIN IMMEDIATE`` on SQLite, :func:`lock_trace_inserts` on PostgreSQL):

- SQLite: the trace ids are given explicitly, after ``max(id)`` (what SQLite itself would
  choose), and both tables are written with the driver's ``executemany``;
- PostgreSQL: the ids are drawn from the table's sequence and both tables are written with
  ``COPY``;
- any other database: SQLAlchemy core ``INSERT ... RETURNING``.

Every value goes through its column type's own bind processor (the same conversion an ORM or
core insert makes: UTC timestamps, JSON text), so the stored values are the same whichever
writer runs (tests/traces/test_import_bulk.py compares them with a core insert)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from sqlalchemy import Boolean, Date, Float, Integer, String, Table, insert, text
from sqlalchemy.engine import Connection

from review.traces.formats import fields
from review.traces.model import Trace
from storage import partitions
from storage.models import Trace as TraceRow
from storage.models import TraceChunk, trace_sample_key

__all__ = [
    "CHUNK_COLUMNS",
    "chunk_values",
    "copy_rows",
    "custom_plans",
    "insert_chunk_rows",
    "insert_trace_rows",
    "lock_trace_inserts",
    "trace_values",
]

_TRACES: Final[Table] = TraceRow.__table__  # type: ignore[assignment]
_CHUNKS: Final[Table] = TraceChunk.__table__  # type: ignore[assignment]

#: The databases written by the driver (any other, or a test's reference, by core inserts).
FAST_DIALECTS: tuple[str, ...] = ("sqlite", "postgresql")

#: The advisory lock that trace inserts take on PostgreSQL ("WB_TRINS"), so that the check of
#: stored ids and the COPY that follows it see the same table.
_INSERT_LOCK: Final = 0x57425F5452494E53


def _attr_text(t: Trace, name: str) -> str | None:
    v = t.attributes.get(name)
    return None if v is None else str(v)


def trace_values(t: Trace, redactions: Mapping[str, int]) -> dict[str, Any]:
    """The column values of ``t``'s trace row (column name -> Python value), besides the
    ones the write sets: ``id``, ``import_id``, ``imported_at``, and ``restricted`` (decided
    in the write transaction, against the corpus as it then is)."""
    return {
        "trace_id": t.trace_id,
        "at": t.time,
        "query": t.query,
        "rewritten_query": t.rewritten_query,
        "user_role": t.user_role,
        "identity_scopes": list(t.identity_scopes),
        "context_sent": t.context_sent,
        "ranking_mode": t.ranking_mode,
        "hits_after_filter": t.hits_after_filter,
        "top_score": t.top_score,
        "answerable": t.answerable,
        "ambiguous": t.ambiguous,
        "ungrounded": t.ungrounded,
        "topics": None if t.topics is None else list(t.topics),
        "decision": t.decision,
        "reason_code": t.reason_code,
        "answer_text": t.answer_text,
        "citations": [{"claim": c.claim, "chunk_ids": list(c.chunk_ids)} for c in t.citations],
        "feedback": t.feedback,
        "reformulated": t.reformulated,
        "citation_opened": t.citation_opened,
        "versions": dict(t.versions),
        "attributes": dict(t.attributes),
        "policy_version": t.versions.get("policy"),
        "model_version": t.versions.get("model"),
        "language": _attr_text(t, "language"),
        "customer_tier": _attr_text(t, "customer_tier"),
        "document_type": _attr_text(t, "document_type"),
        "redactions": {k: v for k, v in redactions.items() if v},
        "sample_key": trace_sample_key(t.trace_id),  # the audit draw's per-trace key
    }


#: The columns of a chunk row, in the order of :func:`chunk_values`'s tuples (``trace_pk``
#: and ``trace_at``, the trace's ``at``, first, set when the trace is written).
CHUNK_COLUMNS: Final = ("trace_pk", "trace_at", *fields.CHUNK_KEYS)

#: Positions in a chunk tuple that the restricted rule reads.
CHUNK_DOC_ID: Final = CHUNK_COLUMNS.index("doc_id")
CHUNK_FILTERED: Final = CHUNK_COLUMNS.index("filtered")


def chunk_values(t: Trace) -> list[tuple[Any, ...]]:
    """The chunk rows of ``t`` as tuples in :data:`CHUNK_COLUMNS` order (``trace_pk`` None,
    ``trace_at`` the trace's time)."""
    return [
        (
            None,
            t.time,
            c.chunk_id,
            c.doc_id,
            c.doc_version,
            c.rank,
            c.score,
            c.text,
            c.filtered,
            c.effective_date,
        )
        for c in t.chunks
    ]


# ---------------------------------------------------------------------------------------
# Writers


@contextlib.contextmanager
def custom_plans(conn: Connection) -> Iterator[None]:
    """On PostgreSQL, plan each statement run inside for its own parameters: the driver
    prepares a statement run five times, and a generic plan made while the table was small (a
    scan) would then be kept for the id look-ups of the whole import.

    Only inside: the setting is put back when the block ends (not when it raises: the
    transaction is then rolled back, which puts it back). A ``COPY`` checks each row's foreign
    key through a plan PostgreSQL keeps for the transaction, and under this setting every one
    of those checks was planned again (one per chunk: the chunks' ``COPY`` took three times
    the floor's)."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
    yield
    if postgres:
        conn.exec_driver_sql("SET LOCAL plan_cache_mode TO DEFAULT")


def lock_trace_inserts(conn: Connection) -> None:
    """Serialize trace inserts on PostgreSQL for the rest of the transaction (SQLite's write
    transaction already holds the database's only write lock)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _INSERT_LOCK})


_Proc = Callable[[Any], Any]

#: Types whose values both drivers take as they are (their bind processors, where a dialect
#: has one, only re-make the same number).
_AS_IS: Final = (Boolean, Float, Integer, String)


def _iso_date(v: dt.date | None) -> str | None:
    return None if v is None else v.isoformat()


def _processors(conn: Connection, table: Table, cols: Sequence[str]) -> list[tuple[int, _Proc]]:
    """(position, bind processor) of the columns whose type converts values for the driver.
    A date on SQLite is its ISO text, which is what SQLAlchemy writes (dates are checked to be
    1900-2199, all with four-digit years)."""
    out: list[tuple[int, _Proc]] = []
    dialect = conn.dialect
    for i, name in enumerate(cols):
        typ = table.c[name].type
        if isinstance(typ, _AS_IS):
            continue
        if dialect.name == "sqlite" and type(typ) is Date:
            out.append((i, _iso_date))
            continue
        proc = typ.dialect_impl(dialect).bind_processor(dialect)
        if proc is not None:
            out.append((i, proc))
    return out


def _driver_rows(
    conn: Connection, table: Table, cols: Sequence[str], rows: Sequence[Sequence[Any]]
) -> list[tuple[Any, ...]]:
    procs = _processors(conn, table, cols)
    if not procs:
        return [tuple(r) for r in rows]
    out: list[tuple[Any, ...]] = []
    for r in rows:
        vals = list(r)
        for i, proc in procs:
            vals[i] = proc(vals[i])
        out.append(tuple(vals))
    return out


def copy_rows(
    conn: Connection,
    table: str,
    cols: Sequence[str],
    rows: list[tuple[Any, ...]],
    while_copying: Callable[[], object] | None = None,
) -> None:
    raw: Any = conn.connection.driver_connection
    with raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
        for r in rows:
            cp.write_row(r)
        if while_copying is not None:
            # the rows are sent: the server writes them and their indexes meanwhile
            while_copying()


def insert_trace_rows(
    conn: Connection,
    rows: Sequence[Mapping[str, Any]],
    import_id: int,
    imported_at: dt.datetime,
    while_copying: Callable[[], object] | None = None,
) -> list[int]:
    """Insert trace rows (:func:`trace_values` plus ``restricted``) whose ids are not stored;
    returns their primary keys in the same order. ``while_copying`` (work of the caller that
    needs no database) is called once the rows are sent to PostgreSQL's ``COPY``, which then
    writes them on the server's core meanwhile; on the other databases after the insert."""
    if not rows:
        if while_copying is not None:
            while_copying()
        return []
    keys = [*rows[0], "import_id", "imported_at"]
    values = [[*r.values(), import_id, imported_at] for r in rows]
    # the months' partitions on PostgreSQL (their chunks' too), before the rows go in
    partitions.ensure_months(conn, [r["at"] for r in rows])
    dialect = conn.dialect.name if conn.dialect.name in FAST_DIALECTS else "other"
    if dialect == "sqlite":
        top = conn.exec_driver_sql("SELECT max(id) FROM traces").scalar()
        first = int(top or 0) + 1
        pks = list(range(first, first + len(rows)))
    elif dialect == "postgresql":
        pks = [
            int(pk)
            for pk in conn.execute(
                text(
                    "SELECT nextval(pg_get_serial_sequence('traces', 'id')) "
                    "FROM generate_series(1, :n)"
                ),
                {"n": len(rows)},
            ).scalars()
        ]
    else:
        got = conn.execute(
            insert(_TRACES).returning(_TRACES.c.id, sort_by_parameter_order=True),
            [dict(zip(keys, v, strict=True)) for v in values],
        )
        pks = [int(pk) for pk in got.scalars()]
        if while_copying is not None:
            while_copying()
        return pks
    cols = ["id", *keys]
    params = _driver_rows(
        conn, _TRACES, cols, [[pk, *v] for pk, v in zip(pks, values, strict=True)]
    )
    if dialect == "sqlite":
        conn.exec_driver_sql(
            f"INSERT INTO traces ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            params,
        )
        if while_copying is not None:
            while_copying()
    else:
        copy_rows(conn, "traces", cols, params, while_copying)
    return pks


def insert_chunk_rows(conn: Connection, rows: Sequence[Sequence[Any]]) -> None:
    """Insert chunk tuples (:data:`CHUNK_COLUMNS` order, ``trace_pk`` set)."""
    if not rows:
        return
    dialect = conn.dialect.name
    if dialect not in FAST_DIALECTS:
        conn.execute(insert(_CHUNKS), [dict(zip(CHUNK_COLUMNS, r, strict=True)) for r in rows])
        return
    params = _driver_rows(conn, _CHUNKS, CHUNK_COLUMNS, rows)
    if dialect == "sqlite":
        conn.exec_driver_sql(
            f"INSERT INTO trace_chunks ({', '.join(CHUNK_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(CHUNK_COLUMNS))})",
            params,
        )
    else:
        copy_rows(conn, "trace_chunks", CHUNK_COLUMNS, params)
