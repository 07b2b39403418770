"""The "Production check" tab of the Wording page: the refusal texts the assistant actually
sent, linted with the wording in force; counts per rule and the offending traces, page by
page, as the signed-in user may see them (restricted names masked without clearance)."""

from __future__ import annotations

import streamlit as st

from pages import ui
from pages.wording.common import WordingContext
from review.wording import display, production
from review.wording.findings import RULES, rule_title
from review.wording.production import ProductionSummary

PAGE_SIZE = 25


def _asked_first(ctx: WordingContext) -> bool:
    """Before a first check of many texts, say so and wait for a click; True while waiting."""
    todo = production.unchecked_count(ctx.engine)
    if not display.should_ask_first(todo, bool(st.session_state.get("wd_prod_go"))):
        return False
    st.info(
        f"{todo:,} refusal texts have not been checked with the wording in force yet. The "
        "first check lints them all (a few thousand a second); later checks only look at "
        "traces imported since."
    )
    if st.button("Check them now", key="wd_prod_run"):
        st.session_state["wd_prod_go"] = True
        st.rerun()
    return True


def _counts(s: ProductionSummary) -> None:
    c1, c2, c3 = st.columns(3)
    c1.metric("Refusal texts checked", s.checked)
    c2.metric("With findings", s.offending)
    c3.metric("Share", display.production_share(s))
    st.caption(ui.plain(display.production_caption(s)))
    st.dataframe(display.rules_frame(s), hide_index=True, width="stretch")


def _offending(ctx: WordingContext, s: ProductionSummary) -> None:
    """The offending traces tripping the chosen rule, a page at a time, and one opened."""
    rule = st.selectbox(
        "Show traces tripping",
        ["", *RULES],
        key="wd_prod_rule",
        format_func=lambda r: "(any rule)" if r == "" else rule_title(r),
    )
    total = s.per_rule[rule] if rule else s.offending
    if total == 0:
        st.info("No trace trips this rule.")
        return
    page = ui.paginate(total, "wd_prod", PAGE_SIZE)
    result = production.production_findings(
        ctx.engine, ctx.actor, page, PAGE_SIZE, rule=rule or None
    )
    st.dataframe(
        result.frame(ui.tax()),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(result.rows)),
    )
    if not result.rows:
        return
    by_id = {r.trace_id: r for r in result.rows}
    pick = st.selectbox("Open a trace of this page", list(by_id), key="wd_prod_trace")
    row = by_id[pick]
    st.text(display.trace_line(row))  # the trace id comes from the imported file: text
    ui.text(row.text, label="Final text shown to the user")
    if row.masked:
        st.caption("Names of restricted documents are masked: seeing them needs clearance.")
    st.dataframe(display.finding_rows_frame(row), hide_index=True, width="stretch")


def production_tab(ctx: WordingContext) -> None:
    if _asked_first(ctx):
        return
    s = production.production_counts(ctx.engine, ctx.actor)
    if s.checked == 0 and s.hidden_restricted == 0:
        st.info(
            "No refusal texts to check yet: import production traces first. Refusals, "
            "follow-ups, escalations, partial answers and caveat answers are linted."
        )
        return
    _counts(s)
    _offending(ctx, s)
