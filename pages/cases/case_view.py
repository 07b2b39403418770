"""One case (?case=ID): its question, claims, documents, labels and family, and its edit
form (a save is refused when someone saved the case meanwhile)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.cases.case_form import case_form
from review.admin import users
from review.cases import cases, display, sight
from review.core import clearance, readable
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import blind


def said_key(case_id: int) -> str:
    """The place under a case's Edit button: what saving or creating the case did."""
    return f"cases_case_{case_id}"


def edit_key(case_id: int) -> str:
    """Where the version an edit started from is kept (None: not editing)."""
    return f"cases_edit_{case_id}"


def edit_case(
    engine: Engine, actor: Actor, tax: Taxonomy, view: cases.CaseView, opened_version: int
) -> None:
    st.info(
        f"Editing version {opened_version:d}. If someone saves meanwhile, your save is "
        "refused and nothing is overwritten."
    )
    result = case_form(tax, f"case_edit_form_{view.id}", view.record, "Save changes")
    here = ui.under(f"case_edit_form_{view.id}")  # a refused save, under the form
    if st.button("Cancel editing"):
        st.session_state[edit_key(view.id)] = None
        st.rerun()
    if result is not None:
        new_version = ui.transact(
            lambda s: cases.update_case(s, actor, view.id, opened_version, result, tax),
            prefix="",
            where=here,
        )
        if new_version is not None:
            st.session_state[edit_key(view.id)] = None
            ui.said(said_key(view.id), f"Saved {view.key} (version {new_version}).")
            st.rerun()


def documents_and_claims(actor: Actor, tax: Taxonomy, view: cases.CaseView) -> None:
    st.caption("Required claims")
    if view.required_claims:
        for i, claim in enumerate(view.required_claims, 1):
            kind = view.claim_kinds[i - 1] if i <= len(view.claim_kinds) else None
            said = f"  · kind: {readable.term(tax, 'claim_kinds', kind)}" if kind else ""
            st.text(f"{i}. {claim}{said}")
    else:
        st.text("(none)")
    st.caption(
        f"Documents available to retrieval for identity “{ui.plain(view.identity_name)}” "
        f"(may see: {ui.plain(', '.join(view.identity_scopes)) or 'nothing'})"
    )
    if view.documents:
        st.dataframe(
            display.documents_table(
                view.documents,
                actor,
                lambda doc_id: ui.link("corpus", doc=doc_id),
                tax,
            ),
            hide_index=True,
            width="stretch",
            column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
        )
    else:
        st.text("(no documents: empty retrieval)")


def labels(engine: Engine, tax: Taxonomy, view: cases.CaseView) -> None:
    agreed = display.agreed_text(view, tax)
    if view.agreed is None or not agreed:
        st.metric("Expected decision", display.decision_label(tax, view.expected_decision))
    elif view.agreed.decision == view.expected_decision:
        st.metric("Decision (agreed)", display.decision_label(tax, view.agreed.decision))
        st.caption(ui.plain(agreed))
    else:
        st.metric("Agreed decision", display.decision_label(tax, view.agreed.decision))
        st.warning(ui.plain(agreed))
        st.metric("Expected decision (author)", display.decision_label(tax, view.expected_decision))
    mismatch = display.category_mismatch(view, tax)
    if mismatch:
        st.info(ui.plain(mismatch))
    st.caption("Reason codes")
    st.text(display.reason_text(view.reason_codes, tax))
    details = display.details_table(view, tax, users.display_names(engine))
    st.dataframe(details, hide_index=True, width="stretch")
    if view.notes:
        ui.text(view.notes, label="Notes")


def blind_panel(view: cases.CaseView) -> None:
    """In place of the judgement, for a case still waiting for my label."""
    st.info(ui.plain(sight.BLIND_NOTE))
    st.link_button("Label this case", ui.link("label", case=view.id))


def family(
    engine: Engine, actor: Actor, tax: Taxonomy, view: cases.CaseView, seen: sight.Sight
) -> None:
    fam_rows = sight.list_cases(
        engine, seen, cases.CaseFilter(family=view.family), page_size=50, viewer=actor
    )
    st.caption(f"Family {ui.plain(view.family)}: {readable.count(len(fam_rows), 'variant')}")
    st.dataframe(
        display.family_table(fam_rows, lambda case_id: ui.link("cases", case=case_id), tax),
        hide_index=True,
        width="stretch",
        column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
    )


def show_case(engine: Engine, actor: Actor, tax: Taxonomy, case_id: int) -> None:
    seen = blind.sight(engine, actor)
    view = sight.get_case(engine, seen, case_id, viewer=actor)
    if view is None:
        ui.error(f"Case {case_id:d} does not exist.")
        return
    st.subheader(f"Case {ui.plain(view.key)}")
    opened = st.session_state.get(edit_key(view.id))
    # the form holds the whole judgement and the case's text
    if opened is not None and not view.blind and clearance.may_see(actor, view.text_restricted):
        edit_case(engine, actor, tax, view, int(opened))
        return
    ui.text(view.question, label="Question")
    left, right = st.columns([2, 1])
    with left:
        documents_and_claims(actor, tax, view)
    with right:
        if view.blind:
            blind_panel(view)
        else:
            labels(engine, tax, view)
    if view.family:
        family(engine, actor, tax, view, seen)
    if view.blind:
        return
    if not clearance.may_see(actor, view.text_restricted):
        st.caption("Editing this case needs clearance: it relies on a restricted document.")
    elif actor.can(Permission.edit_cases):
        if st.button("Edit this case", type="primary", key=f"cases_edit_btn_{view.id}"):
            st.session_state[edit_key(view.id)] = view.version
            st.rerun()
        ui.under(said_key(view.id))  # what the last save (or the creation) did
