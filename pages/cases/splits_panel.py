"""Assigning train / validation / test splits: preview an assignment for a seed, then apply
it (the texts and the kept preview come from review.cases.display)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.cases import display, splits
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor

PREVIEW_KEY = "cases_split_preview"
APPLIED = "cases_split_applied"  # what applying did, said under the Preview button


def splits_panel(engine: Engine, actor: Actor) -> None:
    with st.expander("Assign train / validation / test splits"):
        last = splits.last_assignment(engine)
        st.caption(ui.plain(display.split_note(last)))
        c1, c2 = st.columns(2)
        seed = int(
            c1.number_input(
                "Seed",
                min_value=0,
                value=int(last["seed"]) if last else 7,
                step=1,
                key="cases_split_seed",
            )
        )
        keep = c2.toggle(
            "Keep every case where it is (only place new cases)", value=True, key="cases_split_keep"
        )
        # The preview reads every ready case and its slices: computed only when asked for
        # (issue 11), kept for these inputs until they change or the assignment is applied.
        asked = st.button("Preview the split", key="cases_split_preview_btn")
        ui.under(APPLIED)
        if asked:
            try:
                sp = splits.plan(engine, seed, keep_existing=keep)
            except WorkbenchError as exc:
                st.session_state.pop(PREVIEW_KEY, None)
                st.info(ui.plain(exc))
            else:
                st.session_state[PREVIEW_KEY] = display.split_preview(sp, seed, keep)
        preview = st.session_state.get(PREVIEW_KEY)
        if preview is not None and not display.split_preview_current(preview, seed, keep):
            st.session_state.pop(PREVIEW_KEY, None)
            preview = None
        if preview is None:
            st.caption("Preview the split to see what an assignment with this seed would do.")
            return
        moves = preview["moves"]
        st.dataframe(preview["counts"], width="stretch")
        st.caption(
            f"{readable.count(len(moves), 'case')} would change split; "
            f"{readable.count(preview['locked'], 'locked case')} "
            "stay put."
        )
        if len(moves):
            st.dataframe(
                moves,
                hide_index=True,
                width="stretch",
                height=ui.table_height(len(moves), 10),
            )
        if st.button("Apply this assignment", disabled=moves.empty, key="cases_split_apply"):
            here = ui.under("cases_split_apply")
            with ui.reported(where=here):
                n = splits.apply(engine, actor, seed, keep_existing=keep)
                st.session_state.pop(PREVIEW_KEY, None)
                ui.said(APPLIED, display.split_applied_message(n, seed, len(moves)))
                st.rerun()
