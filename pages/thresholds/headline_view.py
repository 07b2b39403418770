"""The headline of a threshold change: coverage, false-refusal and unsupported-answer rates in
force, proposed and targeted, each with its count and interval, coloured pass/fail against the
target (review/thresholds/headline.py computes it)."""

from __future__ import annotations

import streamlit as st

from pages import ui
from review.core import readable
from review.thresholds import headline as hl


def show(h: hl.Headline, *, key: str, basis: str = "") -> None:
    """The headline as a grid of rates; the failing targets listed below it; ``basis`` says
    which decisions the targets are computed on (beside the verdict)."""
    for note in h.notes:
        st.info(ui.plain(note))
    if not h.rows:
        return
    with st.container(border=True, key=f"thr_headline_{key}"):
        if basis:
            st.caption(ui.plain(basis))
        st.caption(
            ui.plain(
                f"On the {h.report_on} split ({h.n_report:,} outcomes); intervals are 95% "
                "Wilson intervals"
            )
        )
        widths = [2, 3, 3, 2] if h.proposed else [2, 3, 2]
        head = st.columns(widths)
        head[0].markdown("**Rate**")
        head[1].markdown("**In force**")
        if h.proposed:
            head[2].markdown("**Proposed**")
        head[-1].markdown("**Target**")
        for row in h.rows:
            cols = st.columns(widths)
            cols[0].markdown(ui.plain(row.label), help=ui.plain(row.definition))
            figures = [(row.current, row.current_ok)]
            if h.proposed and row.proposed is not None:
                figures.append((row.proposed, row.proposed_ok))
            for col, (fig, ok) in zip(cols[1:], figures, strict=False):
                col.markdown(
                    ui.plain(fig.text)
                    + (
                        " " + readable.badge(ok, "meets target", "fails target")
                        if ok is not None
                        else ""
                    )
                )
            cols[-1].markdown(ui.plain(row.target))
        verdict = hl.verdict(h)
        if h.failing:
            st.markdown(readable.badge(False, no="fails targets") + " " + ui.plain(verdict))
            for item in h.failing:
                st.markdown("- " + ui.plain(item))
        elif h.proposed and h.targets_total:
            st.markdown(readable.badge(True, yes="meets targets") + " " + ui.plain(verdict))
        else:
            st.caption(ui.plain(verdict))
