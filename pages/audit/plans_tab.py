"""The Plans tab: the new-plan form (reviewers), every plan in a table, and the selected plan
with its strata, its population check, the buttons that draw, recount, close and verify it,
and its sample in queue order."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from pages import ui
from pages.audit.cached import forget_counts, population_check
from pages.audit.plan_form import new_plan_form
from review.admin import users
from review.audits import display, queue
from review.audits import plans as audit_plans
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.core.terms import PlanStatus

PAGE_SIZE = 25
ACTIONS = "aud_plan_actions"  # the row of a plan's buttons


def render(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    plans: Sequence[audit_plans.PlanView],
    plan: audit_plans.PlanView | None,
) -> None:
    """The whole tab; ``plan`` is the batch selected above the tabs."""
    can_audit = actor.can(Permission.audit)
    if can_audit:
        new_plan_form(engine, actor, tax, expanded=not plans)
    else:
        st.info("Plans are created and drawn by reviewers; you can read them and the estimates.")
    if not plans:
        st.info(
            "No sampling plans yet. A reviewer creates one above from the imported production "
            "traces."
        )
    else:
        ui.table(
            display.plans_frame(plans, users.display_names(engine)),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(plans), 8),
        )
    if plan is not None:
        plan_details(engine, plan)
        if can_audit:
            plan_actions(engine, actor, plan)
        if plan.status != PlanStatus.planned:
            sample_table(engine, plan)


def plan_details(engine: Engine, plan: audit_plans.PlanView) -> None:
    """The plan's name, how it samples, its strata with their weights, and whether its
    population changed since it was counted."""
    st.subheader(ui.plain(plan.name))
    st.caption(ui.plain(display.plan_summary(plan)))
    ui.table(
        display.readable_strata(plan.strata_frame(), plan.spec.strata, ui.tax()),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(plan.population), 10),
        column_config={
            "weight": st.column_config.NumberColumn("weight (population / sample)", format="%.2f")
        },
    )
    check = population_check(engine, plan)
    if check.changed:
        st.warning(ui.plain(check.message() + display.population_note(plan.status)))
    else:
        st.caption(ui.plain(check.message()))


def plan_actions(engine: Engine, actor: Actor, plan: audit_plans.PlanView) -> None:
    """Draw or recount a planned batch, close an open one, verify a drawn one; what a button
    did (or why it did nothing) is said right under the row of buttons."""
    c1, c2, c3 = st.columns(3)
    draw = plan.status == PlanStatus.planned and c1.button(
        "Draw the sample", type="primary", key="aud_draw"
    )
    recount = plan.status == PlanStatus.planned and c2.button(
        "Recount the population", key="aud_recount"
    )
    close = plan.status == PlanStatus.open and c1.button("Close the batch", key="aud_close")
    verify = plan.status != PlanStatus.planned and c3.button(
        "Check reproducibility", key="aud_verify"
    )
    here = ui.under(ACTIONS)
    if draw:
        res = ui.transact(lambda s: audit_plans.draw_plan(s, actor, plan.id), "", here)
        if res is None:
            forget_counts()
        else:
            ui.said(ACTIONS, f"Drew {res.items} traces into {plan.name!r}; the queue is open.")
            st.rerun()
    if (
        recount
        and ui.transact(lambda s: audit_plans.recount_plan(s, actor, plan.id), "", here) is not None
    ):
        forget_counts()
        ui.said(ACTIONS, "Population counted again.")
        st.rerun()
    if close and ui.transact(lambda s: _closed(s, actor, plan.id), "", here):
        ui.said(ACTIONS, f"{plan.name!r} is closed.")
        st.rerun()
    if verify:
        kind, message = display.reproducibility(audit_plans.verify_sample(engine, plan.id))
        if kind in ("success", "warning"):
            getattr(here, kind)(ui.plain(message))
        else:
            ui.error(message, where=here)


def sample_table(engine: Engine, plan: audit_plans.PlanView) -> None:
    """The drawn sample in queue order, a page at a time, each item with a link to open it."""
    n_items = queue.count_items(engine, plan.id)
    page = ui.paginate(n_items, f"aud_items_{plan.id}", PAGE_SIZE)
    rows = queue.list_items(engine, plan.id, page, PAGE_SIZE)
    ui.table(
        display.items_frame(
            rows,
            lambda item_id: ui.link("audit", item=item_id),
            plan.spec.strata,
            ui.tax(),
            users.display_names(engine),
        ),
        pin=("#", "open", "trace"),
        height=ui.table_height(len(rows)),
        column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
    )


def _closed(s: Session, actor: Actor, plan_id: int) -> bool:
    """Close the plan; True (so that ``ui.transact`` tells it from a refusal)."""
    audit_plans.close_plan(s, actor, plan_id)
    return True
