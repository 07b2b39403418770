"""The landing of the Case builder: pick an evidence-present base case or open a family."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.builder.nav import go
from review.builder import blinding, tables
from review.builder import family_view as builder_family_view
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import blind

PAGE_SIZE = 25


def base_cases(engine: Engine, actor: Actor) -> None:
    text = st.text_input("Search base cases (question or key)", key="bld_q")
    seen = blind.sight(engine, ui.actor())
    total, more = blinding.count_base_cases(engine, seen, text)
    page = ui.paginate(total, "bld_base", page_size=PAGE_SIZE, more=more)
    base = blinding.base_cases(engine, seen, text, page=page, page_size=PAGE_SIZE, viewer=actor)
    if not base:
        st.info(
            "No evidence-present cases yet. Create a case with a family key, evidence state "
            "'present' and expected decision 'answer' on the Cases page."
        )
        return
    picked = st.dataframe(
        tables.base_case_table(base),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(base)),
        on_select="rerun",
        selection_mode="single-row",
        key="bld_base_table",
    )
    rows = picked.selection.rows if picked is not None else []
    if rows:
        go(case=str(base[rows[0]].id))
    st.caption("Select a row to start building from that case.")


def families(engine: Engine, tax: Taxonomy) -> None:
    st.markdown("**Families**")
    nfam = builder_family_view.count_families(engine)
    fpage = ui.paginate(nfam, "bld_fam", page_size=PAGE_SIZE)
    fams = blinding.families(engine, blind.sight(engine, ui.actor()), fpage, PAGE_SIZE)
    if not fams:
        st.caption("No families yet.")
        return
    st.dataframe(
        tables.family_list_table(fams, lambda key: ui.link("builder", family=key), tax),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(fams)),
        column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
        key="bld_families_table",
    )


def landing(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    st.caption(
        "Pick an evidence-present case to derive hard variants from, or open a family to see "
        "its variants, checks and suggestions."
    )
    base_cases(engine, actor)
    families(engine, tax)
