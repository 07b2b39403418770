"""The create/edit form of a case; its starting values, parsing and validation are in
review.cases.form."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from pages import ui
from review.cases import cases, display
from review.cases import form as case_form_data
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.taxonomy import Taxonomy


def case_form(
    tax: Taxonomy, key: str, start: Mapping[str, object], submit_label: str
) -> cases.CaseIn | None:
    """The create/edit form; returns a validated CaseIn when submitted and valid."""
    s = case_form_data.form_start(start)
    index = case_form_data.option_index
    with st.form(key):
        question = st.text_area("Question", s.question, height=80)
        claims = st.text_area(
            "Required claims (one per line: each atomic claim the answer must establish)",
            s.claims,
            height=100,
        )
        st.caption(ui.plain(case_form_data.kinds_help(tax)))
        c1, c2 = st.columns(2)
        ident_name = c1.text_input("Test identity", s.identity_name)
        ident_scopes = c2.multiselect(
            "Identity may see",
            list(tax.access_scopes),
            default=s.identity_scopes,
            format_func=lambda k: readable.term(tax, "access_scopes", k),
            select_all=False,
        )
        st.caption("Documents available to retrieval (reference as ID@VERSION).")
        docs_df = st.data_editor(
            case_form_data.documents_frame(s.documents),
            num_rows="dynamic",
            hide_index=True,
            width="stretch",
            key=f"{key}_docs",
            column_config={
                "doc_id": st.column_config.TextColumn("document id", required=True),
                "version": st.column_config.NumberColumn(
                    "version", min_value=1, step=1, required=True
                ),
                "visibility": st.column_config.SelectboxColumn(
                    "visibility", options=["visible", "forbidden"], required=True
                ),
                "role": st.column_config.SelectboxColumn(
                    "role", options=list(tax.document_roles), required=True
                ),
            },
        )
        c1, c2, c3, c4 = st.columns(4)
        categories = list(tax.categories)
        category = c1.selectbox(
            "Category",
            categories,
            index=index(categories, s.category),
            format_func=lambda k: tax.categories[k].label,
            help=display.terms_help(tax.categories),
        )
        decisions = ["", *tax.decisions]
        decision = c2.selectbox(
            "Expected decision",
            decisions,
            index=index(decisions, s.expected_decision),
            format_func=lambda k: tax.decisions[k].label if k else "(the category's default)",
            help=display.category_defaults_help(tax),
        )
        messages = case_form_data.message_options(tax)
        message = c3.selectbox(
            "Expected wording",
            messages,
            index=index(messages, s.expected_message),
            format_func=lambda k: k or "(suggested)",
            help="The refusal-wording message the answer should use (R1, R2, R3, C1, F1, "
            "E1). Suggested: the category's, else the reasons', else the decision's only one.",
        )
        splits = list(tax.splits)
        split = c4.selectbox("Split", splits, index=index(splits, s.split))
        reasons = st.multiselect(
            "Reason codes (why the evidence is insufficient)",
            list(tax.case_reason_codes()),
            default=s.reason_codes,
            format_func=lambda k: tax.reason_codes[k].label,
            help=display.terms_help(tax.case_reason_codes()),
            select_all=False,
        )
        slices = st.multiselect(
            "Slices",
            list(tax.slices),
            default=s.slices,
            format_func=lambda k: tax.slices[k].label,
            help=display.terms_help(tax.slices),
            select_all=False,
        )
        c1, c2, c3, c4 = st.columns(4)
        family = c1.text_input("Family key (optional)", s.family)
        language = c4.text_input(
            "Question language (optional)",
            s.language,
            max_chars=35,
            help="A language tag such as en, de or pt-BR: run metrics are shown by language.",
        )
        states = ["", *tax.evidence_states]
        evidence_state = c2.selectbox(
            "Evidence state",
            states,
            index=index(states, s.evidence_state),
            format_func=lambda k: tax.evidence_states[k].label if k else "(none)",
        )
        statuses = list(tax.case_statuses)
        status = c3.selectbox("Status", statuses, index=index(statuses, s.status))
        notes = st.text_area("Notes for labelers", s.notes, height=68)
        submitted = st.form_submit_button(ui.plain(submit_label), type="primary")
    if not submitted:
        return None
    try:
        values = case_form_data.FormValues(
            key=s.key,
            question=question,
            claims=claims,
            identity_name=ident_name,
            identity_scopes=ident_scopes,
            documents=case_form_data.document_rows(docs_df),
            expected_decision=decision,
            expected_message=message,
            category=category,
            split=split,
            reason_codes=reasons,
            slices=slices,
            family=family,
            evidence_state=evidence_state,
            status=status,
            notes=notes,
            language=language,
        )
        return case_form_data.validate_form(values, tax)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return None
