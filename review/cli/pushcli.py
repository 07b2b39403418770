"""The ``workbench push`` group: audit verdicts back to the trace store (``push phoenix``).

``review.cli.main`` registers the group with ``main.add_command(...)``. Like the other commands
it works on ``WORKBENCH_DATABASE_URL`` as the command-line user (an administrator).
"""

from __future__ import annotations

import click

from review.audits import pushback
from review.cli.common import WorkbenchCommand, WorkbenchSubgroup, cli_actor, open_engine
from review.traces.live import push

__all__ = ["push_group"]


@click.group("push", cls=WorkbenchSubgroup)
def push_group() -> None:
    """Send audit verdicts back to the trace store the traces came from."""


@push_group.command("phoenix", cls=WorkbenchCommand)
@click.option("--plan", "plan_id", type=int, help="The closed audit batch (plan id) to push.")
@click.option("--all", "all_plans", is_flag=True, help="Push every closed audit batch.")
@click.option("--source", help="Only this Phoenix source (its name); default: every one.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 1000),
    default=push.BATCH,
    show_default=True,
    help="Annotations per request.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 600),
    default=push.TIMEOUT,
    show_default=True,
    help="Seconds to wait for Phoenix per request.",
)
def push_phoenix_cmd(
    plan_id: int | None, all_plans: bool, source: str | None, batch_size: int, timeout: float
) -> None:
    """Write each verdict, failed stage and claim judgment of a closed audit batch to its
    trace's root span in Phoenix as span annotations (annotator HUMAN, the reviewer as
    identifier). Running it again writes nothing new; what failed is retried. Exits with
    status 1 when an annotation failed."""
    if (plan_id is None) == (not all_plans):
        raise click.UsageError("give --plan ID or --all")
    report = pushback.push_to_phoenix(
        open_engine(),
        cli_actor(),
        plan_id=plan_id,
        all_plans=all_plans,
        source=source,
        batch_size=batch_size,
        timeout=timeout,
    )
    for line in report.lines():
        click.echo(line, err=line.startswith("Failed"))
    if not report.ok:
        raise SystemExit(1)
