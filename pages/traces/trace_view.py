"""One trace (the Traces page opened with ?trace=ID): the decision and its signals, the
question, the answer, the citations and the retrieved chunks, as the signed-in user may see
them. Every text from production is shown with st.text, st.code or in dataframe cells."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.traces.restriction_panel import restriction_panel
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.traces import browse, display
from review.traces.browse import TraceView


def _header(view: TraceView, tax: Taxonomy) -> None:
    st.subheader(f"Trace {view.id:d}")
    st.text(f"{view.trace_id} · {view.at:%Y-%m-%d %H:%M:%S} UTC")
    if view.restricted:
        st.warning("Restricted trace: you see it because you have clearance. Do not share it.")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Decision", display.decision_label(view.decision, tax))
    c2.metric("Top score", display.score_text(view.top_score))
    hits = view.hits_after_filter
    c3.metric("Hits after filtering", display.NONE if hits is None else hits)
    c4.metric("Chunks retrieved", len(view.chunks) + view.hidden_chunks)
    st.caption("Reason code")
    st.text(display.reason_line(view.reason_code, tax))
    if view.caveat:
        st.info("Answered with a caveat (reason support_below_threshold).")
    if view.missing_reason:
        ui.error(
            "This decision has no logged reason: every decision other than an answer must log one."
        )


def _texts(view: TraceView) -> None:
    ui.text(view.query, label="Question")
    if view.rewritten_query:
        ui.text(view.rewritten_query, label="Rewritten query (sent to retrieval)")
    ui.text(view.answer_text or "(no text)", label="Final text shown to the user")
    st.caption("Citations: each claim of the answer and the chunks it cites")
    if view.citations:
        st.dataframe(display.citations_frame(view), hide_index=True, width="stretch")
    else:
        st.text("(no citations logged)")


def _chunks(view: TraceView) -> None:
    st.caption("Retrieved chunks, in rank order")
    if view.chunks:
        st.dataframe(
            display.chunks_frame(view),
            hide_index=True,
            width="stretch",
            column_config={
                "score": st.column_config.NumberColumn(format="%.3f"),
                "text": st.column_config.TextColumn(width="large"),
            },
        )
        with st.expander("Chunk texts in full"):
            for c in view.chunks:
                ui.text(c.text or "(no text logged)", label=ui.plain(display.chunk_label(c)))
                st.caption("chunk id")
                st.code(c.chunk_id, language=None)
    else:
        st.text(display.no_chunks_text(view))
    note = display.hidden_chunks_note(view)
    if note:
        st.caption(ui.plain(note))
    with st.expander("Context sent to the model"):
        st.text(view.context_sent or "(not logged)")


def _details(view: TraceView) -> None:
    left, right = st.columns(2)
    with left:
        st.caption("Signals the decision gate saw")
        st.dataframe(display.signals_frame(view), hide_index=True, width="stretch")
    with right:
        st.caption("Versions")
        st.dataframe(
            display.value_frame(sorted(view.versions.items())), hide_index=True, width="stretch"
        )
        st.caption("Attributes (slices)")
        st.dataframe(
            display.value_frame(sorted(view.attributes.items())), hide_index=True, width="stretch"
        )
        st.caption("Redacted on import")
        st.dataframe(display.redactions_frame(view), hide_index=True, width="stretch")
        st.caption("Imported from")
        st.text(f"{view.import_source or display.NONE} at {view.imported_at:%Y-%m-%d %H:%M} UTC")


def show_trace(engine: Engine, actor: Actor, tax: Taxonomy, pk: int) -> None:
    """Trace ``pk`` as ``actor`` may see it, or why it cannot be shown."""
    try:
        view = browse.get_trace(engine, actor, pk=pk)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    if view is None:
        ui.error(f"Trace {pk:d} does not exist (it may have been purged by the retention rule).")
        return
    _header(view, tax)
    restriction_panel(engine, actor, pk)
    _texts(view)
    _chunks(view)
    _details(view)
