"""Whole-database copies: SQLite's online backup API, PostgreSQL's pg_dump and pg_restore.

These are the mechanics only (files, processes, connection strings); ``review.admin.backup`` checks
that a file is a workbench backup, refuses to overwrite data and reports to the user.

- SQLite: ``sqlite3.Connection.backup`` copies the database in one step inside one read
  transaction, so it is consistent while the app keeps writing (WAL readers do not block
  writers). The copy is a single self-contained file (journal mode DELETE, no ``-wal``).
  Restoring copies the backup to a staging file, lets the caller check that copy
  (``PRAGMA integrity_check``, the schema), then runs the same API the other way, as one
  write transaction on the target.
- PostgreSQL: ``pg_dump --format=custom``; a restore replaces the ``public`` schema with the
  archive's SQL in one ``psql --single-transaction`` (all or nothing; :func:`pg_restore`); the
  archive is read with ``pg_restore --list`` first. The password goes through ``PGPASSWORD``, never
  the command line.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, column, inspect, select, table
from sqlalchemy.engine import make_url

from storage import partitions
from storage.db import BUSY_TIMEOUT_MS
from storage.trace_search import UNMODELLED

SQLITE_MAGIC = b"SQLite format 3\x00"
PGDUMP_MAGIC = b"PGDMP"
VERSION_TABLE = "alembic_version"


class BackupToolError(RuntimeError):
    """pg_dump/pg_restore is missing or failed; the message carries its own error text."""


def backend(url: str) -> str:
    """``sqlite``, ``postgresql`` or the URL's other backend name."""
    return make_url(url).get_backend_name()


def sqlite_path(url: str) -> Path:
    """The database file of a SQLite URL (``:memory:`` has none)."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ValueError("an in-memory SQLite database has no file to back up or restore")
    return Path(database)


def file_kind(path: Path) -> str | None:
    """``sqlite`` or ``pgdump`` from the file's first bytes, None for anything else."""
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PGDUMP_MAGIC):
        return "pgdump"
    return None


def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        return sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
        )
    return sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)


def sqlite_backup(source: Path, dest: Path) -> None:
    """Copy a live SQLite database to ``dest`` (replaced atomically; checked before)."""
    tmp = dest.with_name(dest.name + ".partial")
    tmp.unlink(missing_ok=True)
    src = _connect(source)
    try:
        out = _connect(tmp)
        try:
            src.backup(out)  # pages=-1: the whole database in one step, one snapshot
            out.execute("PRAGMA journal_mode=DELETE")
            check = out.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"the copy fails SQLite's quick_check: {check}")
        finally:
            out.close()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    tmp.replace(dest)


def sqlite_integrity(path: Path) -> list[str]:
    """What SQLite's ``PRAGMA integrity_check`` finds wrong in a database file (empty: ok),
    opened read-only. A file too damaged to open raises ``sqlite3.DatabaseError``."""
    con = _connect(path, readonly=True)
    try:
        rows = [str(r[0]) for r in con.execute("PRAGMA integrity_check(20)")]
    finally:
        con.close()
    return [] if rows == ["ok"] else rows


def _copy(source: Path, dest: Path) -> None:
    src = _connect(source, readonly=True)
    try:
        dst = _connect(dest)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def sqlite_restore(backup: Path, target: Path, verify: Callable[[Path], None]) -> None:
    """Replace the whole content of ``target`` (created when missing) with ``backup``.

    The backup is first copied to a staging file beside the target and ``verify`` runs on that
    copy (it raises to stop); only then is the target replaced, in one write transaction:
    other connections see the old or the new database, never a mix, and in WAL mode the
    target stays in WAL mode. (Not a file rename: a live database has open connections and
    WAL files that a rename would leave pointing at the old file.) The staging file is
    removed either way."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(target.name + ".restoring")
    staged.unlink(missing_ok=True)
    try:
        _copy(backup, staged)
        verify(staged)
        _copy(staged, target)
    finally:
        staged.unlink(missing_ok=True)


def sqlite_file_info(path: Path) -> tuple[str | None, set[str]]:
    """(schema revision or None, table names) of a SQLite file, opened read-only."""
    con = _connect(path, readonly=True)
    try:
        tables = {
            str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        revision = None
        if VERSION_TABLE in tables:
            row = con.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
            revision = str(row[0]) if row else None
        return revision, tables
    finally:
        con.close()


# --- PostgreSQL ------------------------------------------------------------------------------


def pg_tool(name: str) -> str:
    """Path of ``pg_dump``/``pg_restore``/``psql``: ``WORKBENCH_PG_BIN``, else the newest Debian
    cluster binaries (a newer client reads older servers), else ``PATH``."""
    configured = os.environ.get("WORKBENCH_PG_BIN")
    if configured:
        candidate = Path(configured) / name
        if candidate.exists():
            return str(candidate)
    found = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/")[4])] or [0],
    )
    if found:
        return found[-1]
    which = shutil.which(name)
    if which:
        return which
    raise BackupToolError(
        f"{name} is not installed (apt-get install postgresql-client, or set "
        "WORKBENCH_PG_BIN to the folder that holds it)"
    )


def pg_connection(url: str) -> tuple[str, dict[str, str]]:
    """A libpq connection string for ``--dbname`` and the environment (password) to run with."""
    u = make_url(url)
    parts: dict[str, str] = {}
    if u.host:
        parts["host"] = u.host
    if u.port:
        parts["port"] = str(u.port)
    if u.username:
        parts["user"] = u.username
    if u.database:
        parts["dbname"] = u.database
    for key, value in u.query.items():
        parts[key] = value if isinstance(value, str) else value[-1]

    def quote(v: str) -> str:
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"

    conninfo = " ".join(f"{k}={quote(v)}" for k, v in parts.items())
    env = dict(os.environ)
    if u.password is not None:
        env["PGPASSWORD"] = str(u.password)
    return conninfo, env


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tool = Path(cmd[0]).name
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise BackupToolError(f"{tool} failed: {' / '.join(detail[-5:]) or 'no output'}")
    return done.stdout


def pg_backup(url: str, dest: Path) -> None:
    """``pg_dump --format=custom`` of the database to ``dest`` (replaced atomically)."""
    conninfo, env = pg_connection(url)
    tmp = dest.with_name(dest.name + ".partial")
    tmp.unlink(missing_ok=True)
    try:
        _run([pg_tool("pg_dump"), "--format=custom", f"--file={tmp}", f"--dbname={conninfo}"], env)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(dest)


#: What is sent to ``psql`` after the archive's SQL when ``pg_restore`` could not read the
#: archive to its end: it ends any ``COPY`` the SQL stopped in (``\\.``) and raises, so the one
#: transaction is rolled back whatever state the cut left ``psql`` in (with ``ON_ERROR_STOP``
#: an invalid line, a broken row and the raise each stop it before its ``COMMIT``).
_ABORT = b"\n\\.\nDO $$ BEGIN RAISE EXCEPTION 'the archive could not be read to its end'; END $$;\n"


def pg_restore(url: str, backup: Path) -> None:
    """Restore a custom-format archive into the database in one transaction: the ``public``
    schema is dropped and made again, then the archive's SQL (``pg_restore --file=-``, owners
    and grants those of the restoring user) runs in the same transaction through ``psql``, so
    a failure anywhere leaves the database as it was. The SQL is passed on as it is read; if
    ``pg_restore`` fails part way, :data:`_ABORT` makes ``psql`` roll back instead of
    committing what it was given.

    Not ``pg_restore --clean``: it drops the objects of the archive one by one, and a
    partition's key is not one it may drop alone ("cannot drop inherited constraint"), so it
    cannot restore over the traces' monthly partitions (storage.partitions)."""
    conninfo, env = pg_connection(url)
    with tempfile.TemporaryFile() as read_err, tempfile.TemporaryFile() as sql_err:
        reader = subprocess.Popen(
            [pg_tool("pg_restore"), "--no-owner", "--no-privileges", "--file=-", str(backup)],
            stdout=subprocess.PIPE,
            stderr=read_err,
            env=env,
        )
        runner = subprocess.Popen(
            [
                pg_tool("psql"),
                "--no-psqlrc",
                "--quiet",
                "--single-transaction",
                "--set=ON_ERROR_STOP=1",
                "--command=SET client_min_messages = warning",
                "--command=DROP SCHEMA IF EXISTS public CASCADE",
                "--command=CREATE SCHEMA public",
                "--file=-",
                f"--dbname={conninfo}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=sql_err,
            env=env,
        )
        assert reader.stdout is not None and runner.stdin is not None
        try:
            try:
                while block := reader.stdout.read(1 << 20):
                    runner.stdin.write(block)
                if reader.wait() != 0:
                    runner.stdin.write(_ABORT)
            except BrokenPipeError:  # psql stopped at an error: its own message says which
                pass
            finally:
                with contextlib.suppress(BrokenPipeError):
                    runner.stdin.close()
        finally:
            if reader.poll() is None:
                reader.kill()
            reader.wait()
            reader.stdout.close()
            runner.wait()
        read_err.seek(0)
        sql_err.seek(0)
        reading = read_err.read().decode("utf-8", "replace").strip().splitlines()
        running = sql_err.read().decode("utf-8", "replace").strip().splitlines()
    if reader.returncode != 0:
        raise BackupToolError(
            f"pg_restore failed, nothing was changed: {' / '.join(reading[-5:]) or 'no output'}"
        )
    if runner.returncode != 0:
        raise BackupToolError(
            "pg_restore failed: the database refused the archive's SQL, nothing was changed: "
            f"{' / '.join(running[-5:]) or 'no output'}"
        )


def pg_archive_info(path: Path) -> tuple[str | None, set[str]]:
    """(schema revision or None, table names) of a pg_dump custom-format archive."""
    listing = _run([pg_tool("pg_restore"), "--list", str(path)])
    tables = set()
    for line in listing.splitlines():
        m = re.match(r"^\d+;\s+\S+\s+\S+\s+TABLE\s+(\S+)\s+(\S+)\s", line)
        if m:
            tables.add(m.group(2))
    revision = None
    if VERSION_TABLE in tables:
        data = _run(
            [
                pg_tool("pg_restore"),
                "--data-only",
                f"--table={VERSION_TABLE}",
                "--file=-",
                str(path),
            ]
        )
        m = re.search(r"^COPY \S*alembic_version .*?FROM stdin;\n(.*?)^\\\.$", data, re.M | re.S)
        if m:
            rows = [r for r in m.group(1).splitlines() if r.strip()]
            revision = rows[0].split("\t")[0] if rows else None
    return revision, tables


# --- both --------------------------------------------------------------------------------------


def tables_with_rows(engine: Engine) -> list[str]:
    """Tables (except the schema version) that hold at least one row. The traces' search
    table and its shadow tables (storage.trace_search) are left out: they follow the traces
    (FTS5 keeps a configuration row even when empty), and so are the traces' monthly
    partitions (their rows are the traces')."""
    names = [
        n
        for n in inspect(engine).get_table_names()
        if n != VERSION_TABLE and n not in UNMODELLED and not partitions.is_partition(n)
    ]
    out = []
    with engine.connect() as conn:
        for name in sorted(names):
            query = select(1).select_from(table(name)).limit(1)
            if name == "counters":  # a counter at zero counts nothing (the traces' counter
                # of migration 0035 is made with the schema)
                query = query.where(column("value") != 0)
            if conn.execute(query).first() is not None:
                out.append(name)
    return out


def known_revisions() -> tuple[str, set[str]]:
    """(head revision, every revision) of the workbench's migrations."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(Path(__file__).parent / "migrations"))
    head = script.get_current_head()
    assert head is not None
    return head, {rev.revision for rev in script.walk_revisions()}
