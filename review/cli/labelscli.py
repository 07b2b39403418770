"""The ``workbench labels`` group: cases out to Label Studio or Argilla for labeling, and their
labels back (``labels export``, ``labels import``, ``labels imports``); and the recount of the
Agreement page's stored figures (``labels rebuild-agreement``).

``review.cli.main`` registers the group with ``main.add_command(...)``. Like the other commands
it works on ``WORKBENCH_DATABASE_URL`` as the command-line user (an administrator with
clearance; ``--without-restricted`` exports as a user without it). The import streams the file
(no size limit, unlike the page's upload) and writes all of it or nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import click

from review.cli.common import WorkbenchCommand, WorkbenchSubgroup, cli_actor, open_engine, transact
from review.core import readable
from review.core.errors import InputError
from review.core.taxonomy import load_taxonomy
from review.labels import agreement_rollup, imports, tools
from review.labels.external import TOOLS, ExternalLabel, Skipped

__all__ = ["labels_group"]

_TOOL = click.option(
    "--tool",
    type=click.Choice(TOOLS),
    required=True,
    help="label-studio or argilla.",
)


@click.group("labels", cls=WorkbenchSubgroup)
def labels_group() -> None:
    """Label where your annotators already work: Label Studio and Argilla, out and back."""


@labels_group.command("export", cls=WorkbenchCommand)
@_TOOL
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The folder to write the tool's files into (created; existing files are refused).",
)
@click.option("--family", default=None, help="Only the cases of this question family.")
@click.option("--slice", "slice_", default=None, help="Only the cases in this slice.")
@click.option(
    "--without-restricted",
    is_flag=True,
    help="Write the cases as a user without clearance sees them: the text of cases relying "
    "on restricted documents replaced by the redaction text.",
)
def export_cmd(
    tool: str, out: Path, family: str | None, slice_: str | None, without_restricted: bool
) -> None:
    """Write the ready cases for labeling in TOOL: Label Studio's labeling configuration and
    tasks, or Argilla's dataset folder (rg.Dataset.from_disk reads it). Each case shows what a
    blind annotator sees: no expected decision, roles or notes."""
    viewer = cli_actor()
    if without_restricted:
        viewer = dataclasses.replace(viewer, clearance=False)
    written, redacted = tools.export_to(
        open_engine(), viewer, load_taxonomy(), tool, out, family=family, slice_=slice_
    )
    said = f"Wrote {readable.count(written, 'case')} for {tools.NAMES[tool]} into {out}"
    if redacted:
        said += f" ({readable.count(redacted, 'case')} with restricted text withheld)"
    click.echo(said + ".")


def _mapping(pairs: tuple[str, ...], users_file: Path | None) -> dict[str, str]:
    text = users_file.read_text(encoding="utf-8") if users_file is not None else ""
    text += "\n" + "\n".join(pairs)
    mapping = imports.parse_user_map(text)
    if not mapping:
        raise InputError(
            "a user mapping is required: --user 'TOOL-USER=workbench e-mail' for every "
            "annotator of the file, or --users FILE with one such line each"
        )
    return mapping


@labels_group.command("import", cls=WorkbenchCommand)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_TOOL
@click.option(
    "--user",
    "pairs",
    multiple=True,
    help="TOOL-USER=E-MAIL: whose labels the tool's user (as the export names them: an "
    "e-mail or a user id) gives. Repeat for every annotator.",
)
@click.option(
    "--users",
    "users_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file of 'TOOL-USER = E-MAIL' lines (# starts a comment).",
)
def import_cmd(file: Path, tool: str, pairs: tuple[str, ...], users_file: Path | None) -> None:
    """Import the submitted labels of a TOOL export (Label Studio JSON or JSON-MIN, Argilla
    records) into the label history, all or nothing. Cancelled, skipped and draft
    annotations, predictions and suggestions are not labels. Importing the same file again
    adds nothing; a changed annotation becomes a new label."""
    mapping = _mapping(pairs, users_file)
    read = tools.reader(tool)
    with file.open("rb") as fh:
        sha = tools.sha256_of(fh)

    def records(skipped: Skipped) -> Iterator[ExternalLabel]:
        with file.open("rb") as fh:
            yield from read(fh, skipped)

    engine = open_engine()
    tax = load_taxonomy()
    report = transact(
        engine,
        lambda s: imports.import_labels(
            s, cli_actor(), tool, records, mapping, tax, file_name=file.name, sha256=sha
        ),
    )
    click.echo(imports.summary(report, tools.NAMES[tool]))


@labels_group.command("rebuild-agreement", cls=WorkbenchCommand)
def rebuild_agreement_cmd() -> None:
    """Recount the Agreement page's stored figures from the labels and the cases.

    The labeling and case services keep them in step; until this runs after labels, slices
    or categories were written into the database by other means (a bulk SQL load, a restore
    of a partial dump), the page counts from the labels (slower at millions of labels).
    """
    n = agreement_rollup.rebuild_everything(open_engine())
    click.echo(f"agreement figures rebuilt from {readable.count(n, 'label')}")


@labels_group.command("imports", cls=WorkbenchCommand)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
def imports_cmd(limit: int) -> None:
    """List the newest label imports: file, tool, who, when and what each added."""
    rows = imports.imports_list(open_engine(), limit)
    if not rows:
        click.echo("No label import yet.")
    for r in rows:
        click.echo(
            f"#{r['import']} {r['at']} {r['tool']} {r['file']} (sha256 {r['sha256']}) by "
            f"{r['by']}: {r['added']} added, {r['changed']} changed, {r['unchanged']} unchanged"
            + (f"; passed over {r['passed over']}" if r["passed over"] else "")
        )
