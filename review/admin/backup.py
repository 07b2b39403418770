"""Backup and restore of the whole workbench database (``workbench backup`` / ``restore``).

A backup is the database as one file: a SQLite database made with SQLite's online backup
API (safe while the app is running) or a PostgreSQL ``pg_dump`` custom-format archive. A
restore refuses a file that is not a workbench backup, a damaged one (SQLite's
``integrity_check``, ``pg_restore --list``), a backup of the other kind of database, a backup
from a newer workbench, and a target that already holds data (unless forced); after it the
schema is upgraded to this version's newest revision and the sign-off chain is verified.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from review.core import readable
from review.core.errors import InputError
from storage import backup as store
from storage.db import make_engine, migrate

# Tables every workbench database has had since its first migration.
CORE_TABLES = frozenset({"users", "documents", "cases", "audit_log", "counters"})


@dataclass(frozen=True)
class BackupReport:
    path: Path
    kind: str  # "sqlite" or "pgdump"
    revision: str
    size: int

    def summary(self) -> str:
        what = "SQLite online backup" if self.kind == "sqlite" else "pg_dump custom archive"
        return (
            f"backup written to {self.path} ({what}, {self.size:,} bytes, "
            f"schema revision {self.revision})"
        )


@dataclass(frozen=True)
class RestoreReport:
    path: Path
    revision: str
    upgraded_to: str
    replaced: tuple[str, ...]  # tables that held rows before a forced restore
    chain_problems: tuple[str, ...]

    def summary(self) -> str:
        lines = [f"restored {self.path} (schema revision {self.revision})"]
        if self.upgraded_to != self.revision:
            lines.append(f"schema upgraded to {self.upgraded_to}")
        if self.replaced:
            lines.append(
                f"replaced the existing data in {readable.count(len(self.replaced), 'table')}"
            )
        lines.append(
            "sign-off chain intact"
            if not self.chain_problems
            else "sign-off chain BROKEN: " + "; ".join(self.chain_problems)
        )
        return "\n".join(lines)


def _backend(url: str) -> str:
    name = store.backend(url)
    if name not in ("sqlite", "postgresql"):
        raise InputError(f"backup and restore support SQLite and PostgreSQL, not {name}")
    return name


def _check_revision(revision: str | None, tables: set[str], source: str) -> str:
    _, known = store.known_revisions()
    if revision is None or not tables >= CORE_TABLES:
        raise InputError(
            f"{source} is not a workbench backup: it has no workbench schema "
            "(no alembic_version row or missing core tables)"
        )
    if revision not in known:
        raise InputError(
            f"{source} is not a backup this workbench can restore: its schema revision "
            f"{revision!r} is not one of this version's migrations (made by a newer "
            "workbench, or not a workbench database)"
        )
    return revision


def inspect_file(path: Path) -> tuple[str, str]:
    """(kind, schema revision) of a backup file, or InputError saying why it is not one."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    kind = store.file_kind(path)
    if kind is None:
        raise InputError(
            f"{path} is not a workbench backup: it is neither a SQLite database nor a "
            "pg_dump custom-format archive"
        )
    try:
        if kind == "sqlite":
            _check_integrity(path, str(path))
            revision, tables = store.sqlite_file_info(path)
        else:
            revision, tables = store.pg_archive_info(path)  # pg_restore --list reads it
    except (sqlite3.DatabaseError, store.BackupToolError) as exc:
        raise InputError(f"{path} is not a readable workbench backup: {exc}") from None
    return kind, _check_revision(revision, tables, str(path))


def _check_integrity(path: Path, source: str) -> None:
    """Refuse a SQLite file that fails ``PRAGMA integrity_check`` (damaged pages, broken
    indexes), naming what SQLite found."""
    try:
        found = store.sqlite_integrity(path)
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    if found:
        shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
        raise InputError(
            f"{source} is damaged: SQLite's integrity_check reports {shown}. Nothing was "
            "restored; use another backup"
        )


def _check_staged(path: Path) -> None:
    """The staged copy of a SQLite backup, checked before it replaces the database."""
    try:
        _check_integrity(path, "the restored copy")
        revision, tables = store.sqlite_file_info(path)
    except sqlite3.DatabaseError as exc:
        raise InputError(
            f"the restored copy is not readable ({exc}); nothing was restored"
        ) from None
    _check_revision(revision, tables, "the restored copy")


def backup(url: str, dest: Path) -> BackupReport:
    """Write a backup of the database at ``url`` to ``dest`` (replaced only when complete)."""
    name = _backend(url)
    if dest.exists() and dest.is_dir():
        raise InputError(f"{dest} is a folder; name the backup file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        if name == "sqlite":
            source = store.sqlite_path(url)
            if not source.is_file():
                raise InputError(f"there is no database at {source} to back up")
            revision, tables = store.sqlite_file_info(source)
            _check_revision(revision, tables, f"the database {source}")
            store.sqlite_backup(source, dest)
        else:
            store.pg_backup(url, dest)
    except InputError:
        raise
    except (ValueError, sqlite3.Error, store.BackupToolError) as exc:
        raise InputError(f"backup failed, nothing was written to {dest}: {exc}") from None
    kind, revision = inspect_file(dest)
    return BackupReport(dest, kind, revision, dest.stat().st_size)


def restore(url: str, src: Path, *, force: bool = False) -> RestoreReport:
    """Replace the database at ``url`` with the backup ``src``.

    Refused (nothing written) when the file is not a workbench backup, is of the other
    database kind, is damaged (SQLite: ``PRAGMA integrity_check`` on the file and again on
    the staged copy, with its tables and schema revision, before the database is replaced;
    PostgreSQL: ``pg_restore --list`` must read the archive, and the restore itself is one
    transaction, so an archive damaged past its table of contents fails and changes
    nothing), or when the target holds data and ``force`` is not set."""
    name = _backend(url)
    kind, revision = inspect_file(src)
    expected = "sqlite" if name == "sqlite" else "pgdump"
    if kind != expected:
        made = "SQLite" if kind == "sqlite" else "PostgreSQL"
        target = "SQLite" if name == "sqlite" else "PostgreSQL"
        raise InputError(
            f"{src} is a {made} backup and the configured database is {target}; restore it "
            f"into a {made} database (WORKBENCH_DATABASE_URL)"
        )
    try:
        if name == "sqlite":
            target_path = store.sqlite_path(url)
            if target_path.exists() and target_path.resolve() == src.resolve():
                raise InputError("the backup file is the database itself")
        engine = make_engine(url)
        try:
            occupied = tuple(store.tables_with_rows(engine))
        finally:
            engine.dispose()
        if occupied and not force:
            shown = ", ".join(occupied[:6]) + (", ..." if len(occupied) > 6 else "")
            raise InputError(
                f"the database already holds data ({shown}); nothing was restored. Restore "
                "into an empty database, or pass --force to replace everything in it"
            )
        if name == "sqlite":
            store.sqlite_restore(src, store.sqlite_path(url), _check_staged)
        else:
            store.pg_restore(url, src)
    except InputError:
        raise
    except (ValueError, sqlite3.Error, store.BackupToolError) as exc:
        raise InputError(f"restore failed: {exc}") from None
    engine = make_engine(url)
    try:
        migrate(engine)
        head, _ = store.known_revisions()
        problems = tuple(_verify(engine))
    finally:
        engine.dispose()
    return RestoreReport(src, revision, head, occupied, problems)


def _verify(engine: Engine) -> list[str]:
    from review.policy import signoff

    return signoff.verify_chain(engine)
