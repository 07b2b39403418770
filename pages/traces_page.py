"""Traces: import production traces, filter and page through them, open one (?trace=ID).

Every text that came from production (questions, chunks, context, answers, claims, ids, file
names, error messages quoting them) is shown with st.text, st.code or in dataframe cells.
The parts of the page live in pages/traces/; the import form stays here, beside the upload
check every page's file upload goes through.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.traces import cached
from pages.traces.retention_panel import retention_panel
from pages.traces.sources_panel import sources_panel
from pages.traces.trace_list import P, clear_button, init_from_query, trace_list
from pages.traces.trace_view import show_trace
from review.admin import users
from review.core import clearance, uploads
from review.core.errors import InputError, PermissionDenied, WorkbenchError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.traces import browse, display, importer, unknowndocs
from review.traces.formats import FORMATS


def _import_report() -> None:
    """The outcome of the last import (kept in session state across reruns)."""
    done = st.session_state.get(f"{P}report")
    if not done:
        return
    st.success("Import finished.")
    st.text(done["summary"])
    unknown = done.get("unknown")
    if unknown:
        # document ids come from the file: shown as text, never as Markdown
        st.warning(ui.plain(unknown["headline"]))
        if unknown["ids"]:
            st.caption(ui.plain(unknown["ids_caption"]))
            st.code(unknown["ids"], language=None)
        st.caption(ui.plain(unknown["way_forward"]))
    if done.get("problems"):
        st.caption("First rejected lines")
        st.code("\n".join(done["problems"]), language=None)
    if done.get("rejects"):
        st.download_button(
            "Download the rejected lines (JSONL)",
            done["rejects"],
            file_name="rejected-lines.jsonl",
            mime="application/jsonl",
        )


def import_panel(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    with st.expander("Import traces", expanded=browse.total_traces(engine) == 0):
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
            run_import(engine, actor, tax, up, fmt, skip_bad, redact)
        _import_report()
        rows = importer.recent_imports(engine, limit=8)
        if rows:
            st.caption("Recent imports")
            names = users.display_names(engine)
            st.dataframe(display.imports_frame(rows, names), hide_index=True, width="stretch")


def run_import(
    engine: Engine, actor: Actor, tax: Taxonomy, up: Any, fmt: str, skip_bad: bool, redact: bool
) -> None:
    st.session_state.pop(f"{P}report", None)
    if up is None:
        ui.error("Choose a file to import.")
        return
    data = up.getvalue()
    try:
        uploads.check_upload(up.name, len(data), "traces")
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    bar = st.progress(0.0, text="Checking the file…")

    def progress(phase: str, done: int, total: int | None) -> None:
        shown = display.import_progress(phase, done, total)
        if shown is not None:
            bar.progress(shown[0], text=ui.plain(shown[1]))

    with tempfile.TemporaryDirectory(prefix="wb-rejects-") as tmp:
        rejects = Path(tmp) / "rejects.jsonl" if skip_bad else None
        try:
            report = importer.import_bytes(
                engine,
                actor,
                data,
                up.name,
                fmt,
                tax=tax,
                skip_bad=skip_bad,
                rejects_path=rejects,
                redact=redact,
                progress=progress,
            )
        except InputError as exc:
            bar.empty()
            ui.error("Nothing was imported. The file has a problem:")
            st.code(str(exc), language=None)
            return
        except PermissionDenied as exc:
            bar.empty()
            ui.show_error(exc)
            return
        bar.progress(1.0, text="Done")
        saved = rejects.read_bytes() if rejects is not None and rejects.exists() else b""
    st.session_state[f"{P}report"] = {
        "summary": report.summary(),
        "problems": report.problems,
        "rejects": saved if report.rejected else b"",
        "unknown": _unknown(report),
    }
    cached.forget()


def _unknown(report: importer.ImportReport) -> dict[str, str] | None:
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
        import_panel(engine, actor, tax)
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
