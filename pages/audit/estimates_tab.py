"""The Estimates tab: a drawn batch's sizes, each verdict's rate in the sample and weighted back
to the population with 95 % intervals (a table and a chart of the headline verdicts), the
strata, and the rate of one verdict within each value of a trace field."""

from __future__ import annotations

import altair as alt
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.audits import display, estimates, population, vocabulary
from review.audits.plans import PlanView
from review.core.terms import PlanStatus


def render(engine: Engine, plan: PlanView | None) -> None:
    """The whole tab; ``plan`` is the batch selected above the tabs."""
    if plan is None or plan.status == PlanStatus.planned:
        st.info("Estimates appear once a plan is drawn and its traces are audited.")
        return
    report = estimates.estimates(engine, plan.id)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Population", report.population)
    c2.metric("Sampled", report.sampled)
    c3.metric("Audited", report.audited)
    c4.metric("Reviewers disagree", report.disagreements)
    if report.audited == 0:
        st.info("No trace of this batch has a verdict yet.")
        return
    rates(report, plan)
    st.subheader("By stratum")
    ui.table(
        display.readable_strata(report.strata, plan.spec.strata, ui.tax()).rename(
            columns=vocabulary.VERDICTS
        ),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(report.strata), 12),
        column_config={"weight": st.column_config.NumberColumn(format="%.2f")},
    )
    slices(engine, plan)


def rates(report: estimates.EstimateReport, plan: PlanView) -> None:
    """Every verdict's rate, and the headline ones as intervals side by side."""
    share = display.unsampled_share(report.rates)
    if share is not None:
        st.warning(
            f"{ui.plain(display.pct(share))} of the population lies in strata with no audited "
            "trace yet; the weighted rates cover the rest."
        )
    if report.single_item_strata:
        warning = display.single_item_warning(report.single_item_strata, plan.spec.strata, ui.tax())
        st.warning(ui.plain(warning))
    st.subheader("Rates")
    st.dataframe(
        display.rates_table(report.rates),
        hide_index=True,
        width="stretch",
        height=ui.table_height(7),
    )
    base = alt.Chart(display.headline_intervals(report.rates)).encode(
        y=alt.Y("verdict:N", title=None, axis=alt.Axis(labelLimit=320)),
        yOffset="kind:N",
        color=alt.Color("kind:N", title=None),
    )
    chart = base.mark_rule().encode(
        x=alt.X("lo:Q", title="rate", axis=alt.Axis(format="%")), x2="hi:Q"
    ) + base.mark_point(filled=True).encode(x="rate:Q")
    st.altair_chart(chart, width="stretch")


def slices(engine: Engine, plan: PlanView) -> None:
    """The rate of one verdict within each value of a trace field (ratio estimator)."""
    st.subheader("By slice")
    c1, c2 = st.columns(2)
    dim = c1.selectbox(
        "Slice by",
        list(estimates.SLICE_DIMS),
        format_func=lambda d: population.DIMENSIONS[d],
        key="aud_slice_dim",
    )
    which = c2.selectbox(
        "Rate of",
        list(vocabulary.VERDICTS),
        format_func=lambda v: vocabulary.VERDICTS[v],
        key="aud_slice_verdict",
    )
    table = display.slice_table(
        estimates.by_slice(engine, plan.id, str(dim), str(which)), str(dim), ui.tax()
    )
    st.dataframe(table, hide_index=True, width="stretch", height=ui.table_height(len(table), 12))
    st.caption(
        "Weights are population / audited traces per stratum; slices that cut across "
        "strata use the ratio estimator. Intervals are 95 %."
    )
