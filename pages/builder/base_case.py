"""The base-case view of the Case builder (?case=ID): the case at a glance and its three tabs
(edit a document, evidence-state variant, decisive passage)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.builder.edit_tab import edit_tab
from pages.builder.nav import go
from pages.builder.variant_tab import family_tab
from review.builder import documents, suggestions, tables
from review.cases import cases, sight
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import blind


def passage_tab(engine: Engine, actor: Actor, view: cases.CaseView) -> None:
    if view.evidence_state != "present":
        st.info("The decisive passage is marked on the evidence-present case of a family.")
        return
    st.caption(
        "The family checks compare every variant with this passage: the removed variant must "
        "no longer show it, the forbidden variant must not leak it."
    )
    if not actor.can(Permission.edit_cases):
        return
    with st.form(f"bld_mark_{view.id}"):
        passage = st.text_area("Decisive passage (exact text of a visible document)", height=80)
        ok = st.form_submit_button("Mark as decisive")
    if ok:
        ref = ui.transact(lambda s: suggestions.mark_passage(s, actor, view.id, passage))
        if ref is not None:
            st.success(f"Marked the decisive passage in {ui.plain(ref)}.")


def builder_view(engine: Engine, actor: Actor, tax: Taxonomy, case_id: int) -> None:
    view = sight.get_case(engine, blind.sight(engine, actor), case_id, viewer=actor)
    if view is None:
        ui.error(f"Case {case_id:d} does not exist.")
        return
    if view.blind:  # building from it would tell its evidence state and expected decision
        st.subheader(f"Case {ui.plain(view.key)}")
        ui.text(view.question, label="Question")
        st.info(ui.plain(sight.BLIND_NOTE))
        # the way forward, as on the Cases page: label it first (then build from it), or ask
        # a reviewer, who does not label, to build from it now
        st.link_button("Label this case", ui.link("label", case=view.id))
        st.caption("Reviewers do not label, so a reviewer can build from it now.")
        return
    c1, c2 = st.columns([3, 1])
    c1.subheader(f"Base case {ui.plain(view.key)}")
    if view.family and c2.button("Open the family view", key="bld_to_family"):
        go(family=view.family)
    ui.text(view.question, label="Question")
    st.caption(
        f"Expected {ui.plain(tables.decision_label(tax, view.expected_decision))} · "
        f"{ui.plain(tables.evidence_state_label(tax, view.evidence_state))} · family "
        f"{ui.plain(view.family or '—')} "
        f"· identity {ui.plain(view.identity_name)} ({ui.plain(', '.join(view.identity_scopes))})"
    )
    if view.evidence_state not in (None, "present") or view.expected_decision != "answer":
        st.warning(
            "Variants are derived from the evidence-present case of a family (expected "
            "decision: answer). Open the family view to find it."
        )
        return
    if not view.family:
        st.warning("This case has no family key: edit the case on the Cases page to set one.")
        return
    docs = documents.case_documents(engine, actor, view.id)
    t1, t2, t3 = st.tabs(["Edit a document", "Evidence-state variant", "Decisive passage"])
    with t1:
        edit_tab(engine, actor, tax, view, docs)
    with t2:
        family_tab(engine, actor, tax, view, docs)
    with t3:
        passage_tab(engine, actor, view)
