"""Label: my queue of cases, blind labels by keyboard and mouse, the evidence beside the form,
progress for me and the team, and my label history."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.labeling import evidence, form, nav
from review.admin import navigation, users
from review.cases import cases
from review.core import readable
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import blind, labeling


#: this page only: less space above the title, so the form and evidence fit 1280x720
def idle() -> None:
    """No case open: start (or go on) labeling, bring skipped cases back."""
    st.info("No case is open. Press N (or the button) for the next case from your queue.")
    nav.buttons(None, labeled=False)
    form.message()
    skipped = st.session_state["lab_skipped"]
    if skipped:
        st.caption(f"{readable.count(len(skipped), 'case')} skipped this session.")
        if st.button("Bring skipped cases back"):
            st.session_state["lab_skipped"] = []
            st.rerun()


def labels_on_case(engine: Engine, actor: Actor, tax: Taxonomy, case_id: int) -> None:
    """Once I have labeled the case: everyone's current labels and my history on it."""
    others = labeling.visible_labels(engine, actor, case_id) or []
    names = {u.email: u.name for u in users.list_users(engine)}
    mine = [h for h in labeling.history(engine, case_id) if h.annotator == actor.email]
    with st.expander(f"Labels on this case ({len(others):d}) and my history ({len(mine):d})"):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "annotator": names.get(o.annotator, o.annotator),
                        "decision": readable.term(tax, "decisions", o.decision),
                        "reasons": ", ".join(
                            readable.term(tax, "reason_codes", c) for c in o.reason_codes
                        ),
                        "rationale": o.rationale,
                        "when": readable.when(o.created_at),
                    }
                    for o in others
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        st.caption("My labels on this case, oldest first (a change adds a row)")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "decision": readable.term(tax, "decisions", h.decision),
                        "reasons": ", ".join(
                            readable.term(tax, "reason_codes", c) for c in h.reason_codes
                        ),
                        "when": readable.when(h.created_at),
                    }
                    for h in mine
                ]
            ),
            hide_index=True,
            width="stretch",
        )


def label_case(engine: Engine, actor: Actor, tax: Taxonomy, view: cases.CaseView) -> None:
    mine = labeling.my_label(engine, actor, view.id)
    case = blind.labeling_case(view, blind.judgement_visible(engine, actor, view.id))
    form.prefill(case, mine)
    left, right = st.columns([11, 9], gap="medium")
    with left:
        evidence.case_header(tax, case)
        evidence.documents(engine, actor, tax, case)
    with right:
        st.markdown("**Your label**" + (" · :small[you labeled this case]" if mine else ""))
        form.fields(tax, case)
        form.actions(case, mine)
        if mine is not None:
            labels_on_case(engine, actor, tax, view.id)


def open_deep_link(engine: Engine, actor: Actor) -> None:
    deep = ui.query_case()
    if deep is not None and st.session_state["lab_case"] != deep:
        with ui.reported():
            labeling.reserve(engine, actor, deep)
            nav.open_case(deep)


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    title, bar = st.columns([1, 5], vertical_alignment="center")
    title.title("Label", anchor=False)
    ui.compact()
    if not actor.can(Permission.label):
        ui.not_for_you("Labeling", navigation.holders(Permission.label), actor)
        st.caption("The Agreement and Adjudicate pages show the labels.")
        return
    st.session_state.setdefault("lab_skipped", [])
    st.session_state.setdefault("lab_case", None)
    with bar:
        nav.bar(tax)
    open_deep_link(engine, actor)
    case_id = st.session_state["lab_case"]
    if case_id is None:
        idle()
        return
    view = cases.get_case(engine, case_id=case_id, viewer=actor)
    if view is None:
        ui.error(f"Case {case_id} does not exist.")
        return
    label_case(engine, actor, tax, view)


if __name__ == "__main__":
    main()
