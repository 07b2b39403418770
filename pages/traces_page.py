"""Traces: import production traces, filter and page through them, open one (?trace=ID).

Every text that came from production (questions, chunks, context, answers, claims, ids, file
names, error messages quoting them) is shown with st.text, st.code or in dataframe cells.
The parts of the page live in pages/traces/; the import form stays here, beside the upload
check every page's file upload goes through.
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import jobs_view, ui
from pages.traces import cached
from pages.traces import import_job as import_job_view
from pages.traces.retention_panel import retention_panel
from pages.traces.sources_panel import sources_panel
from pages.traces.trace_list import P, clear_button, init_from_query, trace_list
from pages.traces.trace_view import show_trace
from review.admin import users
from review.core import clearance, uploads
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.jobs import runner, trace_import
from review.traces import browse, display, importer
from review.traces.formats import FORMATS

#: the import job this session started (also in the address: ?job=N)
JOB_KEY = f"{P}job"


def _shown_job() -> int | None:
    """The import job the panel shows: the one the link names (?job=N), else the one this
    session started."""
    job_id = ui.query_int("job")
    return job_id if job_id is not None else st.session_state.get(JOB_KEY)


def import_panel(engine: Engine, actor: Actor) -> None:
    # open while it shows an import (whose end would otherwise fold it away as the first
    # traces arrive), or while there is no trace yet
    opened = _shown_job() is not None or browse.total_traces(engine) == 0
    with st.expander("Import traces", expanded=opened):
        st.caption(
            "Canonical JSONL, OpenTelemetry OTLP/JSON lines (OpenInference or GenAI attributes), "
            "Langfuse observation exports or a flat CSV. A file lands whole or nothing is "
            "written and the line and field are named; with “skip bad lines” the rest is "
            "imported and the rejected lines can be downloaded. Re-importing adds nothing."
        )
        with st.form("traces_import", clear_on_submit=True):
            up = ui.file_upload(
                "Trace file", "traces", type=["jsonl", "ndjson", "json", "csv", "txt"]
            )
            c1, c2, c3 = st.columns(3)
            fmt = c1.selectbox("Format", ["auto", *FORMATS], format_func=lambda f: f"{f}")
            skip_bad = c2.checkbox("Skip bad lines (and report them)")
            redact = True
            if clearance.cleared(actor):
                redact = c3.checkbox("Redact personal data", value=True)
            else:
                c3.caption("Personal data is redacted on import.")
            go = st.form_submit_button("Import traces", type="primary")
        if go:
            run_import(engine, actor, up, fmt, skip_bad, redact)
        import_job(engine, actor)
        rows = importer.recent_imports(engine, limit=8)
        if rows:
            st.caption("Recent imports")
            names = users.display_names(engine)
            st.dataframe(display.imports_frame(rows, names), hide_index=True, width="stretch")


def run_import(
    engine: Engine, actor: Actor, up: Any, fmt: str, skip_bad: bool, redact: bool
) -> int | None:
    """Start the import job of the uploaded file (review/jobs/trace_import.py): run now with
    the bar moving (inline mode) or queued for a worker; returns the job's id (None when
    nothing was started: said so)."""
    st.session_state.pop(JOB_KEY, None)  # the form's new import replaces the one shown
    st.query_params.pop("job", None)
    if up is None:
        ui.error("Choose a file to import.")
        return None
    data = up.getvalue()
    bar = st.progress(0.0, text="Checking the file…")

    def progress(done: int, total: int | None, note: str) -> None:
        bar.progress(min(1.0, done / total) if total else 0.0, text=ui.plain(note))

    job_id: int | None = None
    with ui.reported():
        uploads.check_upload(up.name, len(data), "traces")
        params = trace_import.params(up.name, fmt, skip_bad=skip_bad, redact=redact)
        job_id = runner.start(
            engine, actor, trace_import.NAME, params, {"traces": data}, on_progress=progress
        )
    job = jobs_view.read_job(engine, actor, job_id) if job_id is not None else None
    if job is not None and job.status == "done":
        bar.progress(1.0, text="Done")  # run during the click (inline): the bar ends full
    else:
        bar.empty()  # queued for a worker, or refused: the job's own view says so below
    if job_id is not None:
        st.session_state[JOB_KEY] = job_id
        st.query_params["job"] = str(job_id)
    return job_id


def import_job(engine: Engine, actor: Actor) -> None:
    """The import this session started, or the one the link names (?job=N), as it runs and
    when it is finished (on any server: it is read from the database)."""
    job_id = _shown_job()
    if job_id is None:
        return
    job = jobs_view.job_status(
        engine,
        actor,
        job_id,
        import_job_view.result_view(engine, actor),
        render_error=import_job_view.error_view,
        kind=trace_import.NAME,
    )
    if job is not None and job.finished:
        if st.session_state.get(f"{P}job_seen") != job.id:
            st.session_state[f"{P}job_seen"] = job.id
            cached.forget()  # what the import added shows in the pickers
        if st.button("Close", key=f"{P}job_close"):
            st.session_state.pop(JOB_KEY, None)
            st.query_params.pop("job", None)
            st.rerun()


def _one_trace(engine: Engine, actor: Actor, tax: Taxonomy, pk: int) -> None:
    """The page opened on one trace (?trace=ID), with the way back to the list."""
    if st.button("← All traces"):
        del st.query_params["trace"]
        st.rerun()
    show_trace(engine, actor, tax, pk)


def _list(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    """The page without ?trace: import, live sources, retention (each saying what it did
    under its button), the list."""
    if actor.can(Permission.import_traces):
        import_panel(engine, actor)
    sources_panel(engine, actor)
    retention_panel(engine, actor)
    init_from_query(tax)
    clear_button()
    trace_list(engine, actor, tax)


def main() -> None:
    engine, actor, tax = ui.engine(), ui.actor(), ui.tax()
    st.title("Traces")
    if not browse.can_view(actor):
        ui.not_for_you("Browsing production traces", browse.VIEW_ROLES, actor)
        return
    trace_param = ui.query_int("trace")
    if trace_param is not None:
        _one_trace(engine, actor, tax, trace_param)
    else:
        _list(engine, actor, tax)


if __name__ == "__main__":
    main()
