"""``workbench worker`` (run background jobs) and ``workbench jobs`` (list, cancel).

``review.cli.main`` registers them with ``main.add_command(...)``. Start any number of workers,
on any machine that reaches the database: each claims one due job at a time (the oldest), and
a job whose worker died is taken over when its lease has passed (WORKBENCH_JOB_LEASE_SECONDS,
30 s). The first SIGTERM or Ctrl-C lets the running job finish and then stops; a second one
stops at once (the job is taken over by another worker when its lease passes).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

import click

from review.cli.common import WorkbenchCommand, WorkbenchSubgroup, cli_actor, open_engine, transact
from review.core import readable
from review.core.errors import InputError
from review.jobs import catalog, queue, runner
from storage.db import read_session

__all__ = ["jobs_group", "worker_cmd"]


@click.command("worker", cls=WorkbenchCommand)
@click.option("--once", is_flag=True, help="Run the jobs that are due, then stop.")
@click.option(
    "--poll",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.1, 60),
    help="Seconds between looks for a due job when there is none.",
)
@click.option("--name", default=None, help="The worker's name (default: host:pid).")
def worker_cmd(once: bool, poll: float, name: str | None) -> None:
    """Run background jobs (imports, syncs, rebuilds, exports) until stopped."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    assert catalog.kinds.REGISTRY is not None  # every kind registered
    queue.lease()  # a bad WORKBENCH_JOB_LEASE_SECONDS stops it here, with the reason
    engine = open_engine()
    stop = threading.Event()
    presses = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            raise SystemExit(130)
        click.echo("stopping after the running job (again to stop now)", err=True)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ran = runner.run_worker(engine, name=name, stop=stop, once=once, poll_seconds=poll)
    click.echo(f"worker stopped: {readable.count(ran, 'job')} run")


@click.group("jobs", cls=WorkbenchSubgroup)
def jobs_group() -> None:
    """Background jobs: list them, cancel one."""


@jobs_group.command("list", cls=WorkbenchCommand)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--status", type=click.Choice(queue.STATUSES), default=None)
@click.option(
    "--before",
    type=click.IntRange(1),
    default=None,
    help="the jobs older than this job id (the next page)",
)
@click.option(
    "--after",
    type=click.IntRange(1),
    default=None,
    help="the jobs newer than this job id (the page before)",
)
def list_cmd(limit: int, status: str | None, before: int | None, after: int | None) -> None:
    """The newest jobs, and the workers alive; a page at a time with --before or --after."""
    engine = open_engine()
    with read_session(engine) as s:
        rows = queue.recent(s, cli_actor(), limit=limit, status=status, before=before, after=after)
        alive = queue.workers(s)
    if alive:
        names = ", ".join(w.name for w in alive)
        click.echo(f"{readable.count(len(alive), 'worker')} alive: {names}")
    else:
        click.echo("no worker alive: jobs wait, or run in the page that starts them")
    for j in rows:
        total = "?" if j.total is None else f"{j.total:,}"
        click.echo(
            f"{j.id}\t{j.title}\t{j.status}\t{j.done:,}/{total}\t{j.created_by}\t"
            f"{j.created_at:%Y-%m-%d %H:%M}\tattempt {j.attempts}/{j.max_attempts}\t"
            + " ".join(repr(x) for x in (j.note, j.error) if x)
        )
    if not rows:
        click.echo("no job on this page" if before or after else "no job yet")
    elif len(rows) == limit:
        click.echo(f"older jobs: workbench jobs list --before {rows[-1].id}", err=True)


@jobs_group.command("cancel", cls=WorkbenchCommand)
@click.argument("job_id", type=int)
def cancel_cmd(job_id: int) -> None:
    """Cancel a job: a queued one at once, a running one at its next progress report."""
    if job_id < 1:
        raise InputError("a job id is a positive number")
    engine = open_engine()
    click.echo(transact(engine, lambda s: queue.cancel(s, cli_actor(), job_id)))
