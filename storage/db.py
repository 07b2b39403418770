"""Engine factory, units of work and schema migration.

SQLite is the default (a file under ``data/``); ``WORKBENCH_DATABASE_URL`` points at any
SQLAlchemy URL, e.g. ``postgresql+psycopg://user@host/db`` for a team.

On SQLite every connection gets WAL, foreign keys and a busy timeout, and write transactions
start with ``BEGIN IMMEDIATE`` so that a read-then-write cannot lose an update or fail at once
with "database is locked".
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Engine,
    Table,
    create_engine,
    event,
    func,
    literal,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from storage import migrating, trace_search
from storage.inlists import SQLITE_IN_LIMIT as SQLITE_IN_LIMIT
from storage.inlists import one_of as one_of  # where callers find it
from storage.migrating import MigrationResult
from storage.migrating import alembic_config as alembic_config  # where callers find it

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = f"sqlite:///{ROOT / 'data' / 'workbench.db'}"
BUSY_TIMEOUT_MS = 15000

T = TypeVar("T")

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def database_url() -> str:
    """The configured database URL (``WORKBENCH_DATABASE_URL``) or the default SQLite file."""
    return os.environ.get("WORKBENCH_DATABASE_URL") or DEFAULT_URL


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        # Let SQLAlchemy (not pysqlite) decide when a transaction begins.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA synchronous=NORMAL")
        # the trigram table's vocabulary, which a two-character search reads (trace_search)
        cur.execute(trace_search.TERMS_DDL)
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("workbench_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def make_engine(url: str | None = None) -> Engine:
    """Create a new engine for ``url`` (no caching); SQLite gets its pragmas and BEGIN mode.
    A database error's text leaves out its statement's parameters: they are the rows being
    written (a trace's text, restricted or not), and the text reaches logs and error notes
    that users without clearance read."""
    url = url or database_url()
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            hide_parameters=True,
        )
        _configure_sqlite(engine)
    else:
        engine = create_engine(url, pool_pre_ping=True, hide_parameters=True)
    return engine


def get_engine(url: str | None = None) -> Engine:
    """One shared engine per URL for the process."""
    url = url or database_url()
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = make_engine(url)
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A read-only unit of work (deferred transaction, released when the block ends)."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A write unit of work: BEGIN IMMEDIATE on SQLite; commit on success, roll back on error."""
    bound = engine.execution_options(workbench_write=True)
    factory = sessionmaker(bind=bound, expire_on_commit=False)
    with factory() as session, session.begin():
        yield session


def _is_locked(exc: OperationalError) -> bool:
    text = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return (
        "database is locked" in text
        or "database is busy" in text
        or "deadlock detected" in text
        or "could not serialize" in text
    )


def run_write(engine: Engine, work: Callable[[Session], T], attempts: int = 6) -> T:
    """Run ``work`` in a write unit of work, retrying with backoff when the database is busy.

    Busy errors are retried (the whole unit of work is re-run, so ``work`` must be idempotent
    up to its own reads); any other error propagates at once.
    """
    delay = 0.05
    for attempt in range(1, attempts + 1):
        try:
            with write_session(engine) as session:
                return work(session)
        except OperationalError as exc:
            if not _is_locked(exc) or attempt == attempts:
                raise
            time.sleep(delay + random.random() * delay)
            delay *= 2
    raise AssertionError("unreachable")


@contextmanager
def planner(s: Session, **settings: str) -> Iterator[None]:
    """Within the block PostgreSQL's ``settings`` (planner and I/O settings a session may
    change) have the given values (for the transaction at most; as they were after it)."""
    names = list(settings)
    was = s.execute(select(*(func.current_setting(name) for name in names))).one()
    s.execute(select(*(func.set_config(n, v, True) for n, v in settings.items())))
    try:
        yield
    finally:
        s.execute(select(*(func.set_config(n, v, True) for n, v in zip(names, was, strict=True))))


def planner_off(s: Session, *switches: str) -> Any:
    """Within the block the planner's ``switches`` (``enable_...`` settings) are off."""
    return planner(s, **dict.fromkeys(switches, "off"))


def leads_an_index(column: Any) -> bool:
    """Whether ``column`` (a mapped attribute or a table column) is a column of a table that
    some index of that table starts with; False for any other expression."""
    col = getattr(column, "expression", column)  # a mapped attribute's column
    table = getattr(col, "table", None)
    name = getattr(col, "name", None)
    if not isinstance(table, Table) or not isinstance(name, str) or name not in table.c:
        return False
    return any(
        next(iter(index.columns), None) is not None and next(iter(index.columns)).name == name
        for index in table.indexes
    )


def seek_distinct(
    session: Session, column: Any, limit: int, *where: Any, check_null: bool = True
) -> tuple[list[Any], bool]:
    """The first ``limit`` distinct non-null values of ``column`` in the database's order, and
    whether it holds a null: what ``SELECT DISTINCT ... ORDER BY ... LIMIT`` gives, found by
    one index seek per value (``min(column) WHERE column > last``) instead of reading the whole
    index. For a column that leads an index (:func:`leads_an_index`), or follows the columns
    that ``where`` fixes by equality in one; on another column every seek would read the
    table. ``check_null=False`` skips the look for a null (then reported False)."""
    values: list[Any] = []
    while len(values) < limit:
        cond = column.is_not(None) if not values else column > values[-1]
        value = session.scalar(select(func.min(column)).where(cond, *where))
        if value is None:
            break
        values.append(value)
    if not check_null:
        return values, False
    has_null = (
        session.scalar(select(literal(1)).where(column.is_(None), *where).limit(1)) is not None
    )
    return values, has_null


def distinct_values(session: Session, column: Any, cap: int = 1000, *where: Any) -> list[Any]:
    """The distinct non-null values of ``column`` (leading an index, or following the columns
    ``where`` fixes by equality in one), within ``where``, in no set order: by index seeks
    (:func:`seek_distinct`) while there are at most ``cap``, else one ``SELECT DISTINCT``
    (past a thousand values the round trips cost more than the scan). The seeks read a few
    index pages per value where the scan reads the whole index (0.3 s for the sources of
    2,000,000 labels on PostgreSQL)."""
    values, _null = seek_distinct(session, column, cap + 1, *where, check_null=False)
    if len(values) <= cap:
        return values
    stmt = select(column).where(column.is_not(None), *where).distinct()
    return list(session.scalars(stmt))


def count_upto(session: Session, stmt: Any, limit: int) -> tuple[int, bool]:
    """How many rows the SELECT ``stmt`` gives, counted as far as ``limit``: ``(n, False)``
    exactly, or ``(limit, True)`` when there are more (the database stops at the
    ``limit`` + 1st row instead of reading every match)."""
    n = int(session.scalar(select(func.count()).select_from(stmt.limit(limit + 1).subquery())) or 0)
    return (limit, True) if n > limit else (n, False)


def plain_rows(session: Session, stmt: Any) -> list[tuple[Any, ...]]:
    """Rows of a SELECT as the driver returns them (plain tuples), bypassing SQLAlchemy's
    per-row processing: for reads of hundreds of thousands of rows, where building Row
    objects and converting types costs more than the query. Values come raw: SQLite gives
    booleans as 0/1, timestamps and JSON as text."""
    conn = session.connection()
    compiled = stmt.compile(conn, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    positional = getattr(compiled, "positiontup", None)
    args: Any = tuple(params[k] for k in positional) if positional else params
    cursor = conn.connection.cursor()
    try:
        cursor.execute(str(compiled), args)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def migrate(engine: Engine) -> MigrationResult:
    """Bring the schema to the newest Alembic revision (``upgrade head``), one process at a
    time: the others wait for it, and a database already at the newest revision costs one
    read (:mod:`storage.migrating`). Says what it did (from which revision to which)."""
    return migrating.migrate(engine)
