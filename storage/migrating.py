"""Schema migration, one process at a time (:func:`migrate`, which ``storage.db.migrate`` is).

Servers, workers and commands started at the same moment on one database each bring the schema
to the newest Alembic revision before they work. Exactly one of them migrates; the others wait
for it and then start on the migrated schema:

- A cheap check first: when the database is already at the newest revision (every start but
  the first after an upgrade), nothing else happens, no lock is taken.
- Otherwise the process takes the migration lock, reads the revision again (another process
  may have migrated meanwhile) and upgrades only if it is still behind.
- On PostgreSQL the lock is a session-level advisory lock (:data:`MIGRATION_LOCK_KEY`) on a
  connection of its own, the way Label Studio's ``locked_migrate`` does it; it is released
  with ``pg_advisory_unlock`` and, whatever happens, by closing that connection (the server
  also drops it when a process dies). On a SQLite file it is an OS file lock (``flock``) on
  ``<database file>.migrate-lock`` beside it; an in-memory database needs none.
- A process waits for the lock at most ``WORKBENCH_MIGRATE_WAIT`` seconds (default 600: a
  large migration can take minutes), saying whom it waits for, then fails with an error
  naming the lock and its holder. The migration itself is one transaction: a process that
  fails or dies while migrating leaves the schema as it was.

What happens is logged to the ``workbench.migrate`` logger ("waiting for the migration lock
held by pid N ...", "migrated from X to Y", "schema at head (Y)") and returned as a
:class:`MigrationResult`.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import OperationalError

from storage.errors import WorkbenchError

__all__ = [
    "DEFAULT_WAIT_SECONDS",
    "MIGRATION_LOCK_KEY",
    "WAIT_ENV",
    "MigrationError",
    "MigrationLockTimeout",
    "MigrationResult",
    "alembic_config",
    "lock_file",
    "migrate",
    "migration_lock",
]

log = logging.getLogger("workbench.migrate")

#: The PostgreSQL advisory lock a migration holds: the eight bytes ``WBMIGRAT`` read as one
#: big-endian 64-bit integer (6287673006887158100). Advisory locks are per database, so two
#: workbench databases on one server do not share it. ``pg_locks`` shows it as
#: ``locktype = 'advisory'``, ``classid = 1463962953`` (the high 32 bits), ``objid =
#: 1196573012`` (the low 32 bits), ``objsubid = 1`` (a 64-bit key).
MIGRATION_LOCK_KEY = 0x57424D4947524154

#: How long a process waits for another's migration, in seconds (0: not at all).
WAIT_ENV = "WORKBENCH_MIGRATE_WAIT"
DEFAULT_WAIT_SECONDS = 600.0

#: While waiting, a line saying who still holds the lock every this many seconds.
NOTICE_EVERY_SECONDS = 30.0

#: PostgreSQL's "lock_not_available", raised when ``lock_timeout`` passes.
LOCK_NOT_AVAILABLE = "55P03"

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class MigrationError(WorkbenchError):
    """The schema could not be brought to the newest revision; the message says why. The
    schema was left as it was."""


class MigrationLockTimeout(MigrationError):
    """Another process held the migration lock for longer than this one may wait."""


@dataclass(frozen=True)
class MigrationResult:
    """What :func:`migrate` did: the revision before (None: an empty database) and after,
    whether this process upgraded, and whether it waited for another's lock first."""

    before: str | None
    after: str
    upgraded: bool
    waited: bool

    def describe(self) -> str:
        if self.upgraded:
            text_ = f"migrated from {_name(self.before)} to {self.after}"
        else:
            text_ = f"schema at head ({self.after})"
        if self.waited:
            text_ += ", after waiting for the migration lock"
        return text_


def _name(revision: str | None) -> str:
    return revision if revision is not None else "an empty database"


def wait_seconds() -> float:
    """How long to wait for the lock (``WORKBENCH_MIGRATE_WAIT``); a value that is not a
    number of seconds >= 0 is refused."""
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_WAIT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise MigrationError(
            f"{WAIT_ENV} must be a number of seconds, 0 or more (how long to wait for another "
            f"process's migration), not {raw!r}"
        )
    return value


def migrate(engine: Engine) -> MigrationResult:
    """Bring the schema to the newest revision, one process at a time (see the module)."""
    wait = wait_seconds()
    heads = _heads()
    before = _current(engine)
    if before == heads:
        log.info("schema at head (%s)", _head_name(heads))
        return MigrationResult(_show(before), _head_name(heads), upgraded=False, waited=False)
    with migration_lock(engine, wait) as waited:
        before = _current(engine)
        if before == heads:
            log.info("schema at head (%s), migrated by another process", _head_name(heads))
            return MigrationResult(_show(before), _head_name(heads), upgraded=False, waited=waited)
        log.info("migrating from %s to %s", _name(_show(before)), _head_name(heads))
        from alembic import command

        command.upgrade(alembic_config(engine), "head")
        after = _head_name(_current(engine))
        log.info("migrated from %s to %s", _name(_show(before)), after)
        return MigrationResult(_show(before), after, upgraded=True, waited=waited)


def _show(revisions: tuple[str, ...]) -> str | None:
    return "+".join(revisions) if revisions else None


def _head_name(heads: tuple[str, ...]) -> str:
    return "+".join(heads)


def alembic_config(engine: Engine) -> Any:
    """Alembic's configuration for the workbench's migrations, run on ``engine``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["engine"] = engine
    return cfg


@functools.cache
def _scripts() -> Any:
    """The migration scripts (read once per process)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg)


def _heads() -> tuple[str, ...]:
    return tuple(sorted(_scripts().get_heads()))


def _current(engine: Engine) -> tuple[str, ...]:
    """The database's revision(s), checked against the scripts: a revision they do not know
    (a newer workbench migrated the database) is refused before anything is changed."""
    from alembic.runtime.migration import MigrationContext
    from alembic.util import CommandError

    with engine.connect() as conn:
        current = tuple(sorted(MigrationContext.configure(conn).get_current_heads()))
    for revision in current:
        try:
            _scripts().get_revision(revision)
        except CommandError:
            raise MigrationError(
                f"the database is at schema revision {revision}, which this version of the "
                f"workbench does not know (a newer version migrated it): run the newer version, "
                f"or restore a backup taken before; nothing was changed"
            ) from None
    return current


@contextmanager
def migration_lock(engine: Engine, wait: float | None = None) -> Iterator[bool]:
    """Hold ``engine``'s migration lock for the block (waiting at most ``wait`` seconds, by
    default ``WORKBENCH_MIGRATE_WAIT``); yields whether another process held it first. While
    it is held no other process migrates the schema."""
    if wait is None:
        wait = wait_seconds()
    if engine.dialect.name == "postgresql":
        with _advisory_lock(engine, wait) as waited:
            yield waited
        return
    path = lock_file(engine)
    if path is None:  # in-memory SQLite: this process is the only one that sees it
        yield False
        return
    with _file_lock(path, wait) as waited:
        yield waited


def lock_file(engine: Engine) -> Path | None:
    """The file whose lock serialises migrations of ``engine``'s SQLite database (beside the
    database file), or None for an in-memory database or another engine."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database or ""
    if database in ("", ":memory:") or engine.url.query.get("mode") == "memory":
        return None
    if database.startswith("file:"):  # a URI filename: its path part
        database = database[len("file:") :].split("?", 1)[0]
    return Path(os.path.abspath(database + ".migrate-lock"))


def _who_am_i() -> str:
    return f"workbench migrate, process {os.getpid()} on {socket.gethostname()}"


def _file_owner_line() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} (workbench migrate)"


# --- PostgreSQL: an advisory lock -------------------------------------------------------------


@contextmanager
def _advisory_lock(engine: Engine, wait: float) -> Iterator[bool]:
    conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    held = False
    try:
        # the name pg_stat_activity shows, so a waiting process can say who holds the lock
        conn.execute(
            text("SELECT set_config('application_name', :name, false)"),
            {"name": _who_am_i()[:63]},
        )
        held = bool(conn.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY}))
        waited = not held
        if not held:
            _wait_for_advisory_lock(conn, wait)
            held = True
        yield waited
    finally:
        if held:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
            except Exception:  # closing the connection below releases it too
                log.debug("pg_advisory_unlock failed; closing the connection releases the lock")
        # never back to the pool: closing the session is what guarantees the lock is gone
        conn.invalidate()
        conn.close()


def _wait_for_advisory_lock(conn: Connection, wait: float) -> None:
    """Block on the lock (``pg_advisory_lock`` under ``lock_timeout``), a line every
    :data:`NOTICE_EVERY_SECONDS` saying who holds it, until ``wait`` seconds have passed."""
    deadline = time.monotonic() + wait
    log.warning("waiting for the migration lock held by %s", _advisory_holder(conn))
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise MigrationLockTimeout(
                f"the schema migration lock (PostgreSQL advisory lock {MIGRATION_LOCK_KEY}) is "
                f"still held by {_advisory_holder(conn)} after waiting {wait:g} s; nothing was "
                f"changed. If that process is stuck, stop it (on the database: SELECT "
                f"pg_terminate_backend(<its pid>)); to wait longer, set {WAIT_ENV} (seconds)."
            )
        step = min(left, NOTICE_EVERY_SECONDS)
        conn.execute(
            text("SELECT set_config('lock_timeout', :t, false)"),
            {"t": f"{max(1, math.ceil(step * 1000))}ms"},  # 0 would mean no timeout
        )
        try:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            return
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
        if deadline - time.monotonic() > 0:
            log.warning("still waiting for the migration lock held by %s", _advisory_holder(conn))


def _advisory_holder(conn: Connection) -> str:
    """Who holds the advisory lock, from pg_locks and pg_stat_activity."""
    row = conn.execute(
        text(
            "SELECT l.pid, a.application_name, host(a.client_addr), a.backend_start "
            "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.classid::bigint = :hi AND l.objid::bigint = :lo "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ),
        {"hi": MIGRATION_LOCK_KEY >> 32, "lo": MIGRATION_LOCK_KEY & 0xFFFFFFFF},
    ).first()
    if row is None:
        return "another session (it has just let go)"
    pid, app, addr, since = row
    details = ["a PostgreSQL backend"]
    if app:
        details.append(str(app))
    if addr:
        details.append(f"from {addr}")
    if since is not None:
        details.append(f"connected since {since:%Y-%m-%d %H:%M:%S %Z}".rstrip())
    return f"pid {pid} ({', '.join(details)})"


# --- SQLite: a file lock beside the database -------------------------------------------------


@contextmanager
def _file_lock(path: Path, wait: float) -> Iterator[bool]:
    if sys.platform == "win32":  # pragma: no cover - no flock: SQLite's own locking only
        log.warning("no migration lock on this platform; start one process at a time")
        yield False
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        waited = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waited = True
            _wait_for_file_lock(fd, path, wait)
        # the holder writes who it is into the file, for a waiter's message
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{_file_owner_line()}\n".encode(), 0)
        try:
            yield waited
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _wait_for_file_lock(fd: int, path: Path, wait: float) -> None:
    import fcntl

    deadline = time.monotonic() + wait
    notice = time.monotonic() + NOTICE_EVERY_SECONDS
    log.warning("waiting for the migration lock held by %s", _file_holder(path))
    pause = 0.02
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        now = time.monotonic()
        if now >= deadline:
            raise MigrationLockTimeout(
                f"the schema migration lock (the file {path}) is still held by "
                f"{_file_holder(path)} after waiting {wait:g} s; nothing was changed. If that "
                f"process is stuck, stop it; to wait longer, set {WAIT_ENV} (seconds)."
            )
        if now >= notice:
            log.warning("still waiting for the migration lock held by %s", _file_holder(path))
            notice = now + NOTICE_EVERY_SECONDS
        time.sleep(min(pause, max(0.0, deadline - now)))
        pause = min(pause * 2, 0.5)


def _file_holder(path: Path) -> str:
    try:
        said = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        said = ""
    return said or f"another process (the lock file {path})"
