"""The ``workbench sync phoenix`` command: pull a Phoenix project's spans into traces.

``review.cli.main`` registers the ``sync`` group with ``main.add_command(sync_cmd)``. The
command creates the source for the URL and project the first time (later runs resume it), reads
the API key from the environment or ``.streamlit/secrets.toml`` by the name given (the name is
stored on the source, the key never), and syncs once or, with ``--every``, until stopped.
"""

from __future__ import annotations

import time

import click

from review.cli.common import WorkbenchSubgroup, cli_actor, fail, open_engine
from review.core import readable
from review.core.errors import WorkbenchError
from review.traces.live import phoenix, sources

__all__ = ["sync_cmd"]


@click.group("sync", cls=WorkbenchSubgroup)
def sync_cmd() -> None:
    """Pull traces from a trace store (a Phoenix project) into the workbench."""


def _summary(r: phoenix.SyncReport) -> str:
    parts = [
        f"read {readable.count(r.spans_read, 'span')} in {readable.count(r.pages, 'page')} "
        f"({r.added:,} new, {r.duplicates:,} read before)",
        f"imported {readable.count(r.imported, 'trace')}",
    ]
    if r.skipped:
        parts.append(f"{r.skipped:,} already stored")
    if r.rejected:
        parts.append(f"{r.rejected:,} refused")
    if r.late:
        parts.append(f"{readable.count(r.late, 'span')} arrived after their trace was imported")
    parts.append(f"{readable.count(r.waiting_spans, 'span')} waiting for their trace")
    return "; ".join(parts)


@sync_cmd.command("phoenix")
@click.option("--url", required=True, help="Phoenix's address, e.g. http://127.0.0.1:6006.")
@click.option("--project", required=True, help="The Phoenix project to read.")
@click.option(
    "--every",
    type=click.FloatRange(min=1),
    default=None,
    help="Sync again every SECONDS until stopped (Ctrl+C); errors are reported and retried.",
)
@click.option(
    "--api-key-env",
    "secret_name",
    default=None,
    help="Name of the environment variable (or .streamlit/secrets.toml key) holding "
    "Phoenix's API key; the name is stored on the source, never the key.",
)
@click.option("--name", default=None, help="The source's name (default: project at URL).")
@click.option(
    "--page-size",
    type=click.IntRange(1, 1000),
    default=phoenix.DEFAULT_PAGE_SIZE,
    show_default=True,
    help="Spans per request.",
)
@click.option(
    "--overlap",
    type=click.FloatRange(0, phoenix.MAX_OVERLAP_SECONDS),
    default=phoenix.DEFAULT_OVERLAP_SECONDS,
    show_default=True,
    help="Seconds of spans read again at every sync: a span Phoenix commits up to this long "
    "after taking its id (two Phoenix servers on one database) is still read, and a trace "
    "waits at least this long after its newest span. 0 is safe for one Phoenix on SQLite.",
)
@click.option(
    "--grace",
    type=click.FloatRange(0, sources.MAX_GRACE_SECONDS),
    default=None,
    help="Seconds a trace waits after its newest span before it is imported "
    "(default: the source's own, 30 for a new source).",
)
def sync_phoenix_cmd(
    url: str,
    project: str,
    every: float | None,
    secret_name: str | None,
    name: str | None,
    page_size: int,
    overlap: float,
    grace: float | None,
) -> None:
    """Sync spans from a Phoenix project: resumes where the last sync stopped, imports each
    trace once its root span has arrived and its grace period passed."""
    engine = open_engine()
    actor = cli_actor()
    src = sources.ensure_source(
        engine,
        actor,
        kind="phoenix",
        url=url,
        project=project,
        name=name,
        secret_name=secret_name,
        grace_seconds=grace,
    )
    client = phoenix.PhoenixClient(src.url, sources.secret_value(secret_name or src.secret_name))
    click.echo(f"source {src.name!r} (id {src.id})", err=True)
    while True:
        try:
            report = phoenix.sync_phoenix(
                engine,
                actor,
                src.id,
                client=client,
                page_size=page_size,
                overlap_seconds=overlap,
                grace_seconds=grace,
            )
        except WorkbenchError as exc:
            if every is None:
                raise
            click.echo(f"error: {exc}", err=True)
        else:
            click.echo(_summary(report))
            if report.error is not None:
                if every is None:
                    fail(phoenix.PhoenixError(report.error))
                click.echo(f"error: {report.error}", err=True)
        if every is None:
            return
        try:
            time.sleep(every)
        except KeyboardInterrupt:
            click.echo("stopped", err=True)
            return
