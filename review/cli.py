"""The ``workbench`` command line."""

from __future__ import annotations

import getpass
import sys
from dataclasses import replace
from pathlib import Path

import click
from sqlalchemy import Engine

from review import cases, corpus, fixtures, users
from review.errors import InputError, PermissionDenied, PolicyFileError
from review.identity import SYSTEM, Actor
from review.taxonomy import load_taxonomy
from storage.db import database_url, get_engine, migrate


def _cli_actor() -> Actor:
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = "unknown"
    return replace(SYSTEM, email=f"cli:{who}", name=f"command line ({who})")


def _engine() -> Engine:
    engine = get_engine()
    migrate(engine)
    return engine


@click.group()
@click.version_option(package_name="abstention-workbench")
def main() -> None:
    """Abstention Workbench: test when your RAG assistant should not answer.

    The database is WORKBENCH_DATABASE_URL (default: SQLite under data/).
    """


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


@main.command("migrate")
def migrate_cmd() -> None:
    """Create or upgrade the database schema to the newest revision."""
    migrate(get_engine())
    click.echo(f"database is at the newest schema: {database_url()}")


@main.command("seed-demo")
@click.option("--if-empty", is_flag=True, help="Only load when the database has no data yet.")
def seed_demo(if_empty: bool) -> None:
    """Load the Brightwave demo company: users, documents and cases."""
    engine = _engine()
    if if_empty and not fixtures.is_empty(engine):
        click.echo("database already has data; demo not loaded")
        return
    try:
        report = fixtures.build_demo(engine, load_taxonomy())
    except (InputError, PolicyFileError) as exc:
        _fail(exc)
        return
    click.echo(
        f"demo loaded: {report.users} users, {report.documents} document versions, "
        f"{report.cases} cases"
    )


@main.command("import-docs")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def import_docs(paths: tuple[Path, ...]) -> None:
    """Import documents: Markdown/text files with YAML front matter, folders of them, or JSONL.

    All files land together or nothing is written (the error names file, line and field).
    """
    engine = _engine()
    try:
        docs, nfiles = corpus.read_files(paths, load_taxonomy())
        report = corpus.import_documents(
            engine, _cli_actor(), docs, nfiles, source=", ".join(str(p) for p in paths)[:500]
        )
    except (InputError, PermissionDenied, PolicyFileError) as exc:
        _fail(exc)
        return
    click.echo(report.summary())


@main.command("import-cases")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_cases_cmd(file: Path) -> None:
    """Import cases from canonical JSONL (all or nothing)."""
    engine = _engine()
    try:
        with file.open(encoding="utf-8") as fh:
            items = list(cases.iter_cases_jsonl(fh, str(file), load_taxonomy()))
        report = cases.import_cases(engine, _cli_actor(), items, str(file))
    except (InputError, PermissionDenied, PolicyFileError, UnicodeDecodeError) as exc:
        _fail(exc)
        return
    click.echo(report.summary())


@main.command("export-cases")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--status", default=None, help="Only cases with this status (draft, ready, ...).")
def export_cases_cmd(file: Path, status: str | None) -> None:
    """Export cases as canonical JSONL ('-' for standard output)."""
    engine = _engine()
    flt = cases.CaseFilter(status=status)
    if str(file) == "-":
        n = cases.export_cases(engine, sys.stdout, flt)
    else:
        tmp = file.with_suffix(file.suffix + ".partial")
        with tmp.open("w", encoding="utf-8") as fh:
            n = cases.export_cases(engine, fh, flt)
        tmp.replace(file)
    click.echo(f"{n} case(s) exported", err=str(file) == "-")


@main.command("add-user")
@click.argument("email")
@click.option("--name", required=True, help="Display name.")
@click.option(
    "--role",
    "roles",
    multiple=True,
    required=True,
    help="annotator, reviewer, product_owner, compliance or admin (repeatable).",
)
@click.option("--clearance", is_flag=True, help="May see restricted documents and traces.")
def add_user_cmd(email: str, name: str, roles: tuple[str, ...], clearance: bool) -> None:
    """Add a user (e.g. the first admin)."""
    engine = _engine()
    try:
        u = users.add_user(engine, _cli_actor(), email, name, list(roles), clearance)
    except (InputError, PermissionDenied) as exc:
        _fail(exc)
        return
    click.echo(
        f"user {u.email} added with roles {', '.join(u.roles)}"
        + (" and clearance" if u.clearance else "")
    )


if __name__ == "__main__":
    main()
