"""The ``workbench import-traces``, ``purge``, ``rebuild-rollup``, ``runs`` and
``recompute-restricted`` commands.

They are plain click commands; ``review.cli.main`` registers them on the ``workbench`` group with
``main.add_command(...)``. Like the other commands they work on ``WORKBENCH_DATABASE_URL`` as
the command-line user (an administrator with clearance).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from review.cli.common import WorkbenchCommand, cli_actor, open_engine
from review.core import readable
from review.core.errors import InputError
from review.core.taxonomy import load_taxonomy
from review.traces import importer, restricted, retention
from review.traces.formats import FORMATS

__all__ = [
    "import_traces_cmd",
    "purge_cmd",
    "rebuild_rollup_cmd",
    "recompute_restricted_cmd",
    "runs_cmd",
]


def _ticker(bar: Any) -> Callable[[int], None]:
    """A progress callback that moves ``bar`` to a running count (the services report how
    many so far, the bar takes steps)."""
    last = 0

    def tick(n: int) -> None:
        nonlocal last
        bar.update(n - last)
        last = n

    return tick


class _Bar:
    """A click progress bar that appears once the check pass knows the total."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.done = 0

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if phase == "checking":
            if total is None and done % 100_000 == 0:
                click.echo(f"checked {done:,} traces…", err=True)
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total or 0, label="writing", show_pos=True)
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.command("import-traces", cls=WorkbenchCommand)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="canonical JSONL, OTLP/JSON lines, Langfuse observations or a flat CSV.",
)
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Import the good traces and write rejected lines to the rejects file.",
)
@click.option(
    "--rejects",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where --skip-bad writes rejected lines (default: FILE.rejects.jsonl).",
)
@click.option("--no-redact", is_flag=True, help="Store personal data as it is (needs clearance).")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=importer.BATCH_SIZE,
    show_default=True,
    help="Traces per transaction.",
)
def import_traces_cmd(
    file: Path, fmt: str, skip_bad: bool, rejects: Path | None, no_redact: bool, batch_size: int
) -> None:
    """Import production traces. Idempotent on trace id; a file lands whole unless --skip-bad.

    The file is checked first (nothing is written if a line is bad: the error names the line
    and field), then written in batches; a killed import is completed by running it again.
    """
    if rejects is not None and not skip_bad:
        raise click.UsageError("--rejects needs --skip-bad")
    engine = open_engine()
    tax = load_taxonomy()
    bar = _Bar()

    try:
        report = importer.import_file(
            engine,
            cli_actor(),
            file,
            fmt,
            tax=tax,
            skip_bad=skip_bad,
            rejects_path=rejects,
            redact=not no_redact,
            batch_size=batch_size,
            progress=bar,
        )
    finally:
        bar.close()
    click.echo(report.summary())
    for line in report.unknown.lines(report.added):
        click.echo(line)
    for line in report.problems:
        click.echo(f"rejected: {line}", err=True)
    if report.rejected > len(report.problems):
        click.echo(f"... and {report.rejected - len(report.problems)} more", err=True)


@click.command("purge", cls=WorkbenchCommand)
@click.option(
    "--older-than",
    "days",
    type=click.IntRange(0, retention.MAX_RETENTION_DAYS),
    default=None,
    help="Delete traces recorded more than DAYS days ago (default: the retention setting).",
)
def purge_cmd(days: int | None) -> None:
    """Delete old production traces (and their chunks); traces in audit samples are kept.

    Without --older-than the retention setting (Traces page, admins) decides. Audited.
    """
    engine = open_engine()
    if days is None:
        setting = retention.get_retention(engine)
        if setting.days is None:
            raise InputError(
                "no retention rule is set: give --older-than DAYS or set one on the Traces page"
            )
        days = setting.days
    with click.progressbar(length=0, label="purging", show_pos=True) as bar:
        report = retention.purge_older_than(engine, cli_actor(), days, progress=_ticker(bar))
    click.echo(report.summary())


@click.command("rebuild-rollup", cls=WorkbenchCommand)
def rebuild_rollup_cmd() -> None:
    """Recompute the daily monitoring rollup from the traces.

    Imports and purges keep it in step; run this after writing traces into the database by
    other means (a bulk SQL load, a restore of a partial dump).
    """
    from review.traces import rollup

    engine = open_engine()
    n = rollup.rebuild(engine)
    click.echo(f"rollup rebuilt from {n} traces")


@click.command("runs", cls=WorkbenchCommand)
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="How many of the latest runs to list.",
)
def runs_cmd(limit: int) -> None:
    """List the latest trace imports and purges from the audit log, newest first.

    Each shows its status (running, completed, failed or interrupted) and its last counts; an
    interrupted run names the run that resumed it. Exits with status 1 when a run was
    interrupted and nothing has resumed it.
    """
    from review.admin import changelog

    engine = open_engine()
    rows = changelog.recent_runs(engine, page_size=limit)
    if not rows:
        click.echo("no imports or purges recorded")
        return
    frame = changelog.runs_frame(rows)
    for rec in frame.to_dict("records"):
        click.echo(
            f"{rec['run']}: {rec['details']} - {rec['what']} - {rec['counts'] or 'no counts'}"
            f" - by {rec['who']}, started {rec['started']:%Y-%m-%d %H:%M} UTC"
        )
    open_runs = [r for r in rows if r.status == "interrupted" and r.resumed_by is None]
    if open_runs:
        click.echo(
            f"{readable.count(len(open_runs), 'interrupted run')} not resumed: run the import or "
            "purge again "
            "to complete it",
            err=True,
        )
        raise SystemExit(1)


@click.command("recompute-restricted", cls=WorkbenchCommand)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=restricted.RECOMPUTE_BATCH,
    show_default=True,
    help="Traces per transaction.",
)
def recompute_restricted_cmd(batch_size: int) -> None:
    """Rebuild every trace's restricted flag from the rule and the corpus as they are now.

    Document changes, the unknown-documents setting and marks keep the flags in step; run this
    once after upgrading a database, after restoring one, or after writing traces or documents
    into the database by other means.
    """
    engine = open_engine()
    with click.progressbar(length=0, label="checking", show_pos=True) as bar:
        flips = restricted.recompute_all(engine, batch_size, progress=_ticker(bar))
    click.echo(
        f"{flips.checked} traces checked: {flips.restricted} became restricted, "
        f"{flips.opened} became open"
    )
