"""Cases: filter and page through cases, open one (?case=ID), create, edit, import, export.

This file routes by query parameters and keeps the import and export panel; the list, one
case, the form and the split assignment are in pages/cases/, and what they compute (form
values, tables, messages) in review/cases.
"""

from __future__ import annotations

import io

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.cases.case_form import case_form
from pages.cases.case_list import case_list, filters, seed_filters_from_query
from pages.cases.case_view import said_key, show_case
from pages.cases.splits_panel import splits_panel
from review.cases import cases, sight
from review.core import readable, uploads
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus
from review.labels import blind

EXPORT_KEY = "cases_export"


def import_export_panel(engine: Engine, actor: Actor, tax: Taxonomy, flt: cases.CaseFilter) -> None:
    with st.expander("Import and export (canonical JSONL)"):
        if actor.can(Permission.edit_cases):
            with st.form("cases_import", clear_on_submit=True):
                up = ui.file_upload("Cases JSONL", "cases", type=["jsonl"])
                go = st.form_submit_button("Import cases")
            if go:
                if up is None:
                    ui.error("Choose a file.")
                else:
                    with (
                        ui.reported("Nothing was imported. "),
                        st.spinner(ui.plain(f"Importing {up.name} ({up.size:,} bytes)…")),
                    ):
                        text = uploads.read_text(up.name, up.getvalue(), "cases")
                        items = list(cases.iter_cases_jsonl(text.splitlines(), up.name, tax))
                        report = ui.transact(
                            lambda s: cases.import_cases(s, actor, items, up.name),
                            prefix="Nothing was imported. ",
                        )
                        if report is not None:
                            st.success(ui.plain(report.summary()))
        if st.button("Prepare export of the filtered cases"):
            buf = io.StringIO()
            n, withheld = sight.export_cases(
                engine, blind.sight(engine, actor), buf, flt, viewer=actor
            )
            st.session_state[EXPORT_KEY] = (n, buf.getvalue(), withheld)
        if st.session_state.get(EXPORT_KEY):
            n, data, withheld = st.session_state[EXPORT_KEY]
            if withheld:
                st.caption(
                    f"{readable.count(withheld, 'case')} still waiting for your label "
                    f"{readable.plural(withheld, 'is', 'are')} left out (blind "
                    "labeling): label them first."
                )
            st.download_button(
                f"Download {readable.count(n, 'case')} as JSONL",
                data,
                file_name="cases.jsonl",
                mime="application/jsonl",
            )


def new_case(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    with st.expander("New case"):
        new = case_form(tax, "case_new_form", {"status": CaseStatus.draft}, "Create case")
        if new is not None:
            new_id = ui.transact(lambda s: cases.create_case(s, actor, new, tax), prefix="")
            if new_id is not None:
                st.query_params["case"] = str(new_id)
                ui.said(said_key(new_id), "Case created.")
                st.rerun()


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Cases")
    case_param = ui.query_case()
    if case_param is not None:
        if st.button("← All cases"):
            del st.query_params["case"]
            st.rerun()
        show_case(engine, actor, tax, case_param)
        return
    seed_filters_from_query()
    flt = filters(engine, tax)
    import_export_panel(engine, actor, tax, flt)
    if actor.can(Permission.edit_cases):
        new_case(engine, actor, tax)
        splits_panel(engine, actor)
    case_list(engine, actor, tax, flt, blind.sight(engine, actor))


if __name__ == "__main__":
    main()
