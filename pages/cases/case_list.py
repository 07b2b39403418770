"""The case list: its filters (seeded from deep-link query parameters) and one page of cases,
a selected row opening the case."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.admin import users
from review.cases import cases, display, sight
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy

# Deep-link query parameters that start a filter (once: the widget keeps it afterwards)
FILTER_PARAMS = (
    ("status", "cases_status"),
    ("slice", "cases_slice"),
    ("decision", "cases_decision"),
    ("family", "cases_family"),
)


def seed_filters_from_query() -> None:
    for param, skey in FILTER_PARAMS:
        if param in st.query_params and skey not in st.session_state:
            st.session_state[skey] = st.query_params[param]


def filters(engine: Engine, tax: Taxonomy) -> cases.CaseFilter:
    with st.container(border=True):
        c0, c1, c2, c3 = st.columns([3, 1, 1, 1])
        text = c0.text_input("Search question or key", key="cases_q")
        decision = c1.selectbox(
            "Expected decision",
            ["", *tax.decisions],
            key="cases_decision",
            format_func=ui.fmt_option(tax.decisions),
        )
        category = c2.selectbox(
            "Category",
            ["", *tax.categories],
            key="cases_category",
            format_func=ui.fmt_option(tax.categories),
        )
        slice_ = c3.selectbox(
            "Slice", ["", *tax.slices], key="cases_slice", format_func=ui.fmt_option(tax.slices)
        )
        c4, c5, c6, _ = st.columns([1, 1, 1, 3])
        split = c4.selectbox(
            "Split", ["", *tax.splits], key="cases_split", format_func=ui.fmt_option(tax.splits)
        )
        status = c5.selectbox(
            "Status",
            ["", *tax.case_statuses],
            key="cases_status",
            format_func=ui.fmt_option(tax.case_statuses),
        )
        fams = cases.family_keys(engine, ui.PICKER_LIMIT)
        family = ui.many_choice(
            c6, "Family", fams, "cases_family", known=lambda k: cases.family_exists(engine, k)
        )
    return display.case_filter(text, decision, category, slice_, split, status, family)


def case_list(
    engine: Engine, actor: Actor, tax: Taxonomy, flt: cases.CaseFilter, seen: sight.Sight
) -> None:
    total = sight.count_cases(engine, seen, flt, viewer=actor)
    page = ui.paginate(total, "cases")
    rows = sight.list_cases(engine, seen, flt, page=page, viewer=actor)
    if not rows:
        all_cases = cases.count_cases(engine, cases.CaseFilter()) if total == 0 else 0
        st.info(ui.plain(display.empty_list_message(total, all_cases)))
        return
    df = display.case_table(
        rows, lambda case_id: ui.link("cases", case=case_id), tax, users.display_names(engine)
    )
    event = ui.table(
        df,
        pin=("open", "case"),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(df)),
        on_select="rerun",
        selection_mode="single-row",
        key="cases_table",
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "question": st.column_config.TextColumn("question", width="large"),
        },
    )
    picked = event.selection.rows if event is not None else []
    if picked:
        st.query_params["case"] = str(rows[picked[0]].id)
        st.rerun()
    st.caption("Select a row to open the case.")
    if any(r.blind for r in rows):
        st.caption(
            "Cases still waiting for your label show no expected decision, category or "
            "evidence state until you label them (blind labeling)."
        )
