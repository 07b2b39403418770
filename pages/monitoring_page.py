"""Monitoring: the weekly signals of production traces, alerts, and segments.

The signals are read from the daily rollup (review.traces.monitoring, review.traces.rollup);
alert thresholds come from policies/monitoring.yaml. Each alert links to the traces behind it
on the Traces page. Refusals that break a wording rule come from the production wording check
(review.wording.production) once it has run.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import integrity, ui
from review.charts.violations import violations_chart
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.traces import browse, interaction, monitoring, weekly
from review.traces.live import display as live_display
from review.traces.live.freshness import read_freshness
from review.wording import display as wording_display
from review.wording import production
from review.wording.findings import RULE_TITLES

P = "monitoring_"
ALL = "(all traffic)"
DEFAULT_SIGNALS = [
    "no_answer_rate",
    "caveat_rate",
    "empty_retrieval_rate",
    "ungrounded_rate",
    "negative_feedback_rate",
]
PERCENT_COLUMNS = {
    label: st.column_config.NumberColumn(label, format="%.1f%%")
    for label in (
        *monitoring.SIGNALS.values(),
        *(v[0] for v in interaction.INTERACTION_SIGNALS.values()),
    )
}


@st.cache_data(ttl=600, show_spinner="Aggregating the weekly signals…")
def _monitor(
    url: str,
    stamp: str,
    policy: monitoring.MonitoringPolicy,
    weeks: int,
    segment: tuple[str, str] | None,
) -> monitoring.MonitorResult:
    return monitoring.monitor(ui.engine(), ui.tax(), policy, weeks=weeks, segment=segment)


@st.cache_data(ttl=600, show_spinner=False)
def _segment_values(url: str, stamp: str, dim: str, start: dt.date, end: dt.date) -> list[str]:
    return [v for v, _ in monitoring.segment_values(ui.engine(), dim, start, end)]


@st.cache_data(ttl=600, show_spinner="Comparing segments…")
def _by_segment(url: str, stamp: str, dim: str, weeks: int) -> pd.DataFrame:
    return monitoring.weekly_by_segment(ui.engine(), ui.tax(), dim, weeks=weeks)


def choose_view(
    url: str, stamp: str, policy: monitoring.MonitoringPolicy
) -> tuple[int, tuple[str, str] | None]:
    """The number of weeks and the segment (None: all traffic) the person picks."""
    c0, c1, c2 = st.columns([1, 1, 2])
    weeks = int(
        c0.number_input("Weeks", min_value=2, max_value=104, value=12, step=1, key=f"{P}weeks")
    )
    dim = c1.selectbox(
        "Segment",
        [ALL, *monitoring.DIMENSIONS],
        key=f"{P}dim",
        format_func=lambda d: monitoring.DIMENSIONS.get(d, d),
    )
    if dim == ALL:
        return weeks, None
    probe = _monitor(url, stamp, policy, weeks, None)
    values = _segment_values(url, stamp, dim, probe.start, probe.end)
    if not values:
        c2.caption("No trace in these weeks carries this segment.")
        return weeks, None
    value = c2.selectbox("Value", values, key=f"{P}value_{dim}")
    return weeks, (dim, str(value))


def alerts(result: monitoring.MonitorResult, policy: monitoring.MonitoringPolicy) -> None:
    st.subheader("Alerts")
    if not result.alerts:
        st.success("No alerts in these weeks.")
    else:
        st.dataframe(
            weekly.alerts_frame(result.alerts, lambda params: ui.link("traces", **params)),
            hide_index=True,
            width="stretch",
            column_config={
                "traces": st.column_config.LinkColumn("traces", display_text="open traces"),
                "what happened": st.column_config.TextColumn(width="large"),
            },
        )
    with st.expander("Alert rules (policies/monitoring.yaml)"):
        st.text("\n".join(weekly.alert_rules(policy)))


def weekly_signals(result: monitoring.MonitorResult) -> None:
    st.subheader("Weekly signals")
    chosen = st.multiselect(
        "Signals",
        list(monitoring.SIGNALS),
        default=DEFAULT_SIGNALS,
        format_func=monitoring.SIGNALS.__getitem__,
        key=f"{P}signals",
        select_all=False,
    )
    if chosen:
        st.altair_chart(
            monitoring.signals_chart(result.weeks, result.alerts, chosen), width="stretch"
        )
    logged = interaction.logged_interactions(result.weeks)
    if logged:
        st.caption(
            "User interaction after the response, each a share of the traces that "
            "log it: a rise in reformulation or a fall in citation interaction is a reason to "
            "segment and look at the traces."
        )
        st.altair_chart(interaction.interaction_chart(result.weeks, logged), width="stretch")
    else:
        st.caption(
            "No trace of these weeks logs user reformulation or citation interaction (the "
            "trace fields `reformulated` and `citation_opened`), so they are not shown."
        )
    st.caption("Counts per week: negative feedback, ungrounded traces, decisions without a reason")
    st.altair_chart(monitoring.counts_chart(result.weeks), width="stretch")
    st.dataframe(
        weekly.weekly_table(result.weeks),
        hide_index=True,
        width="stretch",
        column_config=PERCENT_COLUMNS,
    )


def wording_violations(engine: Engine, actor: Actor, result: monitoring.MonitorResult) -> None:
    st.subheader("Refusal wording in production")
    try:
        violations = production.weekly_violations_or_unchecked(
            engine, actor, result.start, result.end
        )
    except WorkbenchError as exc:
        # a wording version edited in the database (or unreadable): this panel says so, the
        # rest of the page still shows, as every other page does
        ui.error("The refusal wording in force cannot be read, so refusals are not checked here.")
        st.code(str(exc), language=None)
        return
    if isinstance(violations, int):
        st.info(
            f"The production wording check has {readable.count(violations, 'refusal text')} "
            "to look at. Run it on the Wording page (Production check); the weekly "
            "count of refusals that break a wording rule then shows here."
        )
        st.link_button("Open the production check", ui.link("wording"))
        return
    st.caption(
        f"Refusals that break a wording rule (the wording in force), per week: "
        f"{int(violations['offending'].sum()):,} in these weeks. The traces are listed on the "
        "Wording page (Production check)."
    )
    chart = violations_chart(violations, list(production.RULE_BITS), RULE_TITLES)
    st.altair_chart(chart, width="stretch")
    st.dataframe(wording_display.violations_table(violations), hide_index=True, width="stretch")


def compare_segments(url: str, stamp: str, weeks: int) -> None:
    st.subheader("Compare segments")
    c0, c1 = st.columns(2)
    compare = c0.selectbox(
        "Segment by",
        list(monitoring.DIMENSIONS),
        format_func=monitoring.DIMENSIONS.__getitem__,
        key=f"{P}compare",
    )
    signal = c1.selectbox(
        "Signal",
        list(monitoring.SIGNALS),
        format_func=monitoring.SIGNALS.__getitem__,
        key=f"{P}compare_signal",
    )
    seg_frame = _by_segment(url, stamp, compare, weeks)
    if seg_frame.empty:
        st.info("No trace in these weeks carries this segment.")
        return
    st.altair_chart(monitoring.segment_chart(seg_frame, signal), width="stretch")
    st.dataframe(
        weekly.segment_totals(seg_frame),
        hide_index=True,
        width="stretch",
        column_config=PERCENT_COLUMNS,
    )


def freshness(engine: Engine, *, no_traces: bool = False) -> None:
    """How fresh the data is: the newest trace, each live source's last successful sync or
    receive and lag, or the last file import when there is no live source (``no_traces``:
    the page said there is no trace, so the first line is left out)."""
    lines = live_display.freshness_lines(read_freshness(engine), dt.datetime.now(dt.UTC))
    for line in lines[1:] if no_traces else lines:
        st.caption(ui.plain(line))


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    st.title("Monitoring")
    integrity.chain_banner(engine)
    if not browse.can_view(actor):
        ui.not_for_you("Monitoring production traces", browse.VIEW_ROLES, actor)
        return
    try:
        policy = monitoring.load_monitoring_policy()
    except WorkbenchError as exc:
        ui.error("The monitoring policy file is invalid, so no alerts can be computed.")
        st.code(str(exc), language=None)
        return
    if browse.total_traces(engine) == 0:
        st.info(
            "No production traces yet: import them on the Traces page to see the weekly signals."
        )
        freshness(engine, no_traces=True)
        return
    freshness(engine)
    stamp = browse.data_stamp(engine)
    url = str(engine.url)
    weeks, segment = choose_view(url, stamp, policy)
    try:
        result = _monitor(url, stamp, policy, weeks, segment)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    last = result.end - dt.timedelta(days=1)
    st.caption(
        f"Weeks of {result.start:%d %b %Y} to {last:%d %b %Y} (Monday to Sunday, UTC), "
        f"{int(result.weeks['traces'].sum()):,} traces"
        + (f" with {ui.plain(monitoring.DIMENSIONS[segment[0]].lower())} = " if segment else "")
        + "."
    )
    if segment:
        st.text(segment[1])
    alerts(result, policy)
    weekly_signals(result)
    wording_violations(engine, actor, result)
    compare_segments(url, stamp, weeks)


if __name__ == "__main__":
    main()
