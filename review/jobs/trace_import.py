"""The job kind "trace_import": an uploaded trace file imported by a worker (or, inline, by
the page that started it), with what the Traces page shows today as its result.

Parameters: ``file_name`` (the upload's name: the import's source and the name in its
messages), ``fmt`` ("auto" or a format of :data:`review.traces.formats.FORMATS`), ``skip_bad``
and ``redact``; the file itself is the job's input ``traces``. The run calls the one importer
(:func:`review.traces.importer.import_bytes`), so a run is idempotent: the importer skips the
trace ids already stored, and a job taken over after its worker died (or run twice) completes
the import without a duplicate. Redaction can be switched off only by someone with clearance,
checked at submit (the page offers the choice to them only) and again here with the actor as
they are now (the importer refuses otherwise).

Progress: the importer's phases (checking, then writing) become the job's progress, its note
the words of the Traces page's bar (:func:`review.traces.display.import_progress`); checking
has no known total. Rejected lines (``skip_bad``) become the result file ``rejects.jsonl``.
A file with a problem (and ``skip_bad`` off) fails the job with :data:`FILE_PROBLEM` before
the importer's message, nothing written."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission
from review.core.taxonomy import taxonomy
from review.jobs.context import JobContext
from review.jobs.kinds import Kind, expect, register, stored_count, stored_text
from review.traces import display, importer, unknowndocs
from review.traces.formats import FORMATS

__all__ = [
    "FILE_PROBLEM",
    "KIND",
    "NAME",
    "REJECTS",
    "failure",
    "params",
    "rejected_shown_to",
    "unknown_info",
]

NAME: Final = "trace_import"
#: the result file of the rejected lines (JSON lines ``{"line", "reason", "raw"}``)
REJECTS: Final = "rejects.jsonl"
#: how a failed job's error starts when the file had a problem and nothing was written
FILE_PROBLEM: Final = "Nothing was imported. The file has a problem: "


def params(file_name: str, fmt: str = "auto", *, skip_bad: bool, redact: bool) -> dict[str, Any]:
    """The job's parameters, checked (the upload itself is the input ``traces``)."""
    if fmt != "auto" and fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r} (one of auto, {', '.join(FORMATS)})")
    name = str(file_name).strip()
    if not name:
        raise InputError("the trace file has no name")
    return {"file_name": name[:500], "fmt": fmt, "skip_bad": bool(skip_bad), "redact": bool(redact)}


def _run(ctx: JobContext) -> dict[str, Any]:
    """Import the job's file (module docs); returns what the page shows."""
    got = expect(
        ctx.params,
        {"file_name": (str,), "fmt": (str,), "skip_bad": (bool,), "redact": (bool,)},
    )
    p = params(got["file_name"], got["fmt"], skip_bad=got["skip_bad"], redact=got["redact"])
    name, fmt, skip_bad, redact = p["file_name"], p["fmt"], p["skip_bad"], p["redact"]
    actor = ctx.actor  # as they are now: a clearance taken away since the submit counts
    if not redact and not clearance.cleared(actor):
        raise PermissionDenied(
            "Importing traces without redaction needs clearance, which "
            f"{actor.name} no longer holds: nothing was imported."
        )
    with ctx.input("traces") as fh:
        data = fh.read()

    def progress(phase: str, done: int, total: int | None) -> None:
        shown = display.import_progress(phase, done, total)
        if phase == "checking":
            ctx.progress(done, None, shown[1] if shown else "Checking the file…")
        elif shown is not None:
            ctx.progress(done, total, shown[1])

    with tempfile.TemporaryDirectory(prefix="wb-job-rejects-") as tmp:
        rejects = Path(tmp) / REJECTS if skip_bad else None
        try:
            report = importer.import_bytes(
                ctx.engine,
                actor,
                data,
                name,
                fmt,
                tax=taxonomy(),
                skip_bad=skip_bad,
                rejects_path=rejects,
                redact=redact,
                progress=progress,
            )
        except InputError as exc:  # raised while checking: nothing was written
            raise InputError(FILE_PROBLEM + str(exc)) from exc
        rejected = b""
        if report.rejected and rejects is not None and rejects.exists():
            rejected = rejects.read_bytes()
    if rejected:
        ctx.output(REJECTS, rejected, "application/jsonl")
    # the rejected lines are the job's result file, not the worker's temporary one
    report.rejects_file = None
    return {
        "summary": report.summary(),
        "import_id": report.import_id,
        "traces": report.traces,
        "added": report.added,
        "skipped": report.skipped,
        "rejected": report.rejected,
        "restricted": report.restricted,
        "problems": list(report.problems),
        "rejects": REJECTS if rejected else None,
        "unknown": unknown_info(report),
    }


def unknown_info(report: importer.ImportReport) -> dict[str, str] | None:
    """What the import says about traces restricted for citing unknown documents."""
    u = report.unknown
    if not u.traces:
        return None
    first = u.first_ids()
    return {
        "headline": u.headline(report.added),
        "ids_caption": (
            f"Unknown document ids: the first {len(first)} of {u.total_text()}"
            if u.more or len(u.ids) > len(first)
            else f"Unknown document ids ({len(first)})"
        ),
        "ids": "\n".join(first),
        "way_forward": unknowndocs.WAY_FORWARD,
    }


def rejected_shown_to(actor: Actor, created_by: str) -> bool:
    """Whether ``actor`` is shown an import's rejected lines (its first problems and the
    rejects file): they quote the file before redaction (clearance decides:
    :func:`review.core.clearance.may_see_unredacted_upload`)."""
    return clearance.may_see_unredacted_upload(actor, created_by)


def failure(error: str) -> tuple[str, str]:
    """A failed import's error as the page shows it: a headline, and the detail (quoting the
    file) to show as text."""
    if error.startswith(FILE_PROBLEM):
        return FILE_PROBLEM.rstrip(), error[len(FILE_PROBLEM) :]
    return "The import failed.", error


def summarise(result: Mapping[str, Any]) -> str:
    """The import report's own words (what ``workbench import-traces`` prints), else its
    counts."""
    said = stored_text(result)
    if said is not None:
        return said
    added, rejected = stored_count(result, "added"), stored_count(result, "rejected")
    if added is None or rejected is None:
        return ""
    return f"{readable.count(added, 'trace')} added, {rejected:,} rejected."


KIND: Final = register(
    Kind(
        name=NAME,
        title="Trace import",
        permission=Permission.import_traces,
        run=_run,
        summarise=summarise,
    )
)
