"""The preview of an edit: the excerpts before and after, the marked diff, the derived
document's metadata and new documents, and the operator's suggested label."""

from __future__ import annotations

import streamlit as st

from pages import ui
from review.builder import diffs, tables, variants
from review.builder.operator import Suggestion
from review.core.taxonomy import Taxonomy


def show_group_preview(
    group: diffs.GroupPreview, tax: Taxonomy, freshness: str | None = None
) -> None:
    """Every document's diff (one edit of several documents), then the one suggestion (with
    the policy's age limits, ``freshness``, when it suggests stale evidence)."""
    st.caption(
        "Changes are marked `[-removed-]` and `{+added+}`; the text is escaped first, so "
        "marks already in a document show as `[\\-` or `{\\+`."
    )
    several = len(group.previews) > 1
    if several:
        st.caption(
            f"One edit of {len(group.previews):d} decisive documents: each gets its own "
            "derived copy and provenance record, with the same operator and parameters."
        )
    for k, (ref, pv) in enumerate(group.previews):
        if several:
            st.markdown(f"**{k + 1:d}. {ui.plain(ref)}**")
        show_diff(pv, ref, k)
    st.caption("Suggested label (an expert confirms it in the family view; it is not a label)")
    st.dataframe(
        tables.suggestion_table(group.suggestion, tax, freshness),
        hide_index=True,
        width="stretch",
    )


def show_diff(pv: diffs.Preview, doc_ref: str, k: int = 0) -> None:
    """One document's change: before and after, the marked diff rows, new metadata and
    documents."""
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
            key="bld_diff_table" if k == 0 else f"bld_diff_table_{k}",
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


def show_variant_preview(pv: variants.VariantPreview, tax: Taxonomy) -> None:
    """An evidence-state variant before it is saved: what it does to each decisive document
    it works on (a marked diff where a copy's text differs), then its one suggestion."""
    st.caption(
        "Changes are marked `[-removed-]` and `{+added+}`; the text is escaped first. Nothing "
        "is saved until you build the variant."
    )
    n = len(pv.changes)
    if n > 1:
        st.caption(f"One variant of {n:d} decisive documents:")
    for k, change in enumerate(pv.changes):
        st.markdown(f"**{k + 1:d}. {ui.plain(change.source)}**")
        st.caption(ui.plain(change.outcome))
        if change.rows:
            left, right = st.columns(2)
            left.code(change.before_excerpt or "(empty)", language=None, wrap_lines=True)
            right.code(change.after_excerpt or "(empty)", language=None, wrap_lines=True)
    v = pv.variant
    sug = Suggestion(
        v.suggested_decision,
        v.suggested_reasons,
        v.suggested_slices,
        None,
        v.evidence_state,
        v.derivation,
    )
    st.caption("Suggested label (an expert confirms it in the family view; it is not a label)")
    st.dataframe(tables.suggestion_table(sug, tax), hide_index=True, width="stretch")
