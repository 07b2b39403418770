"""A trace-import job's outcome, as the Traces page showed an import's outcome under its form:
the summary, the traces restricted for citing unknown documents, the first rejected lines and
the rejected lines to download (those two quote the file as it came, before redaction: shown
to the person who imported it and to people with clearance). Every value from the file is
shown as text or through ``ui.plain``."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from pages import jobs_view, ui
from pages.jobs_view import Render
from review.core.identity import Actor
from review.jobs import queue, trace_import
from review.jobs.queue import JobView


def result_view(engine: Engine, actor: Actor) -> Render:
    """The renderer of a finished import for :func:`pages.jobs_view.job_status`."""

    def render(job: JobView) -> None:
        done = job.result
        st.success("Import finished.")
        st.text(str(done.get("summary", "")))
        unknown = done.get("unknown")
        if unknown:
            # document ids come from the file: shown as text, never as Markdown
            st.warning(ui.plain(unknown["headline"]))
            if unknown.get("ids"):
                st.caption(ui.plain(unknown["ids_caption"]))
                st.code(str(unknown["ids"]), language=None)
            st.caption(ui.plain(unknown["way_forward"]))
        raw = trace_import.may_see_rejected(actor, job.created_by)
        if done.get("problems") and raw:
            st.caption("First rejected lines")
            st.code("\n".join(str(p) for p in done["problems"]), language=None)
        if done.get("rejects") and raw:
            with Session(engine) as s:
                data = queue.result_file(s, actor, job.id, trace_import.REJECTS)
            if data:
                st.download_button(
                    "Download the rejected lines (JSONL)",
                    data,
                    file_name="rejected-lines.jsonl",
                    mime="application/jsonl",
                    key=f"job_rejects_{job.id}",
                )
        elif done.get("rejected") and not raw:
            st.caption(
                "The rejected lines quote the file before redaction: only the person who "
                "imported it and people with clearance see them."
            )

    return render


def error_view(job: JobView) -> None:
    """A failed import: what went wrong, the message (quoting the file) as text."""
    headline, detail = trace_import.failure(jobs_view.error_of(job))
    ui.error(headline)
    if detail:
        st.code(detail, language=None)
