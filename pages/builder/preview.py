"""The preview of an edit: the excerpts before and after, the marked diff, the derived
document's metadata and new documents, and the operator's suggested label."""

from __future__ import annotations

import streamlit as st

from pages import ui
from review.builder import diffs, tables
from review.core.taxonomy import Taxonomy


def show_preview(
    pv: diffs.Preview, doc_ref: str, tax: Taxonomy, freshness: str | None = None
) -> None:
    st.caption(
        "Changes are marked `[-removed-]` and `{+added+}`; the text is escaped first, so "
        "marks already in a document show as `[\\-` or `{\\+`."
    )
    left, right = st.columns(2)
    with left:
        st.caption(f"Before: {ui.plain(doc_ref)}")
        st.code(pv.before_excerpt or "(empty)", language=None, wrap_lines=True)
    with right:
        st.caption("After (the derived document)")
        st.code(pv.after_excerpt or "(empty)", language=None, wrap_lines=True)
    frame = tables.preview_table(pv.rows)
    if not frame.empty:
        styled = frame.style.apply(
            lambda row: tables.change_styles(row["change"], len(row)), axis=1
        )
        st.dataframe(
            styled,
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(frame), 12),
            key="bld_diff_table",
        )
    if pv.metadata:
        st.caption("Metadata of the derived document")
        st.dataframe(tables.metadata_table(pv.metadata), hide_index=True)
    for title, scope, body in pv.extra_documents:
        st.caption(
            f"New document in scope {ui.plain(repr(scope))}, forbidden to the case's identity"
        )
        st.text(title)
        ui.document_body(body)
    st.caption("Suggested label (an expert confirms it in the family view; it is not a label)")
    st.dataframe(
        tables.suggestion_table(pv.suggestion, tax, freshness), hide_index=True, width="stretch"
    )
