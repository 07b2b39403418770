"""Audit: reproducible stratified samples of production traces, a reviewer queue with verdicts
and claim-by-claim review, population estimates, promotion to cases, export.

The page itself reads the deep links, shows the batch picker and dispatches to the open tab
(only the open tab is drawn: the others cost nothing until opened; a link to an item opens
My queue), whose UI lives in pages/audit/ (not a page of its own)."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from sqlalchemy import Engine
from streamlit.delta_generator import DeltaGenerator

from pages import integrity, ui
from pages.audit import estimates_tab, export_tab, plans_tab, queue_tab
from review.audits import display, items, queue
from review.audits import plans as audit_plans
from review.core.identity import Actor, Permission
from review.core.terms import PlanStatus

TABS = ["Plans", "My queue", "Estimates", "Export"]
#: The session key of the open tab (its label).
TAB_KEY = "aud_tab"
#: The widgets of each tab whose values outlive a visit to another tab (not buttons:
#: Streamlit refuses to set those), by key prefix.
KEPT = {
    "Plans": (
        "aud_from",
        "aud_to",
        "aud_f_",
        "aud_name",
        "aud_strata",
        "aud_alloc",
        "aud_total",
        "aud_seed",
        "aud_overlap",
        "aud_explicit",
        "aud_items_",
    ),
    "My queue": (
        "aud_verdict_",
        "aud_stages_",
        "aud_notes_",
        "aud_claimreview_",
        "aud_cv_",
        "aud_ct_",
        "aud_cc_",
        "aud_split_",
    ),
    "Estimates": ("aud_slice_",),
}


def _keep_widget_state(closed: Sequence[str]) -> None:
    """Only the open tab is drawn, and Streamlit forgets the state of a widget a run does not
    draw: set here again, the values of the ``closed`` tabs' widgets (a verdict being written
    before a look at the estimates) are as the person left them when they come back. Those
    of the open tab are left alone (a widget drawn with a default value and set in the same
    run warns)."""
    prefixes = tuple(p for label in closed for p in KEPT.get(label, ()))
    for key in [k for k in st.session_state if str(k).startswith(prefixes)]:
        st.session_state[key] = st.session_state[key]


def header() -> DeltaGenerator:
    """The title, and one fixed slot above the tabs for what a deep link could not open (so the
    tabs keep their place, and the tab the reviewer is on, whether or not a message is shown);
    returns the slot. What a button did is said under the button (``ui.said``)."""
    st.title("Audit")
    st.caption(
        "Sample production traces reproducibly, judge each one (claim by claim for answers), "
        "and read the failure rates weighted back to the whole population."
    )
    return st.container()


def follow_deep_links(
    engine: Engine, actor: Actor, plans: Sequence[audit_plans.PlanView], top: DeltaGenerator
) -> None:
    """?item=ID opens an item (reserving it for a reviewer, and selecting its plan) once;
    ?plan=ID selects a plan when none is selected yet."""
    deep_item = ui.query_int("item")
    if deep_item is not None and st.session_state.get("aud_deep_done") != deep_item:
        st.session_state["aud_deep_done"] = deep_item
        with ui.reported(where=top):
            view = items.get_item(engine, actor, deep_item)
            if view is None:
                ui.error(f"Audit item {deep_item:d} does not exist.", where=top)
            else:
                st.session_state["aud_plan"] = view.plan_id
                if actor.can(Permission.audit) and view.plan_status == PlanStatus.open:
                    ui.transact(
                        lambda s: queue.reserve_item(s, actor, deep_item), prefix="", where=top
                    )
                st.session_state[f"aud_item_{view.plan_id}"] = deep_item
                st.session_state[TAB_KEY] = "My queue"  # where the item is shown
    deep_plan = ui.query_int("plan")
    if deep_plan in {p.id for p in plans} and "aud_plan" not in st.session_state:
        st.session_state["aud_plan"] = deep_plan


def pick_batch(plans: Sequence[audit_plans.PlanView]) -> audit_plans.PlanView | None:
    """The batch picker (newest first; a plan just created is selected); None without plans."""
    if "aud_want_plan" in st.session_state:  # a plan just created: select it
        st.session_state["aud_plan"] = st.session_state.pop("aud_want_plan")
    if not plans:
        return None
    by_id = {p.id: p for p in plans}
    ids = [p.id for p in plans]
    if st.session_state.get("aud_plan") not in ids:
        st.session_state["aud_plan"] = ids[0]
    plan_id = st.selectbox(
        "Audit batch",
        ids,
        format_func=lambda i: display.batch_label(by_id[i]),
        key="aud_plan",
    )
    st.query_params["plan"] = str(plan_id)
    return by_id.get(plan_id) if plan_id is not None else None


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    top = header()
    integrity.chain_banner(engine)
    plans = audit_plans.list_plans(engine)
    follow_deep_links(engine, actor, plans, top)
    plan = pick_batch(plans)
    # lazy tabs: switching tabs reruns the page, and only the open tab is computed
    tabs = st.tabs(TABS, key=TAB_KEY, on_change="rerun")
    _keep_widget_state([label for label, tab in zip(TABS, tabs, strict=True) if not tab.open])
    tab_plans, tab_queue, tab_est, tab_export = tabs
    if tab_plans.open:
        with tab_plans:
            plans_tab.render(engine, actor, tax, plans, plan)
    if tab_queue.open:
        with tab_queue:
            queue_tab.render(engine, actor, tax, plan)
    if tab_est.open:
        with tab_est:
            estimates_tab.render(engine, plan)
    if tab_export.open:
        with tab_export:
            export_tab.render(engine, actor, plan)


if __name__ == "__main__":
    main()
