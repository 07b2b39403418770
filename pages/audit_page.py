"""Audit: reproducible stratified samples of production traces, a reviewer queue with verdicts
and claim-by-claim review, population estimates, promotion to cases, export.

The page itself reads the deep links, shows the batch picker and dispatches to the tabs, whose
UI lives in pages/audit/ (not a page of its own)."""

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


def header() -> DeltaGenerator:
    """The title, and one fixed slot above the tabs for messages (so the tabs keep their place,
    and the tab the reviewer is on, whether or not a message is shown); returns the slot."""
    st.title("Audit")
    st.caption(
        "Sample production traces reproducibly, judge each one (claim by claim for answers), "
        "and read the failure rates weighted back to the whole population."
    )
    top = st.container()
    flash = st.session_state.pop("aud_flash", None)
    if flash:
        top.success(ui.plain(flash))
    return top


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
    tab_plans, tab_queue, tab_est, tab_export = st.tabs(
        ["Plans", "My queue", "Estimates", "Export"]
    )
    with tab_plans:
        plans_tab.render(engine, actor, tax, plans, plan)
    with tab_queue:
        queue_tab.render(engine, actor, tax, plan)
    with tab_est:
        estimates_tab.render(engine, plan)
    with tab_export:
        export_tab.render(engine, actor, plan)


if __name__ == "__main__":
    main()
