"""Monitoring: the weekly signals of production traces, alerts, and segments.

The signals are read from the daily rollup (review.traces.monitoring, review.traces.rollup); alert
thresholds come from policies/monitoring.yaml. Each alert links to the traces behind it on
the Traces page. Refusals that break a wording rule come from the production wording check
(review.wording.production) once it has run.
"""

from __future__ import annotations

import datetime as dt

import altair as alt
import pandas as pd
import streamlit as st

from pages import ui
from review.core.errors import WorkbenchError
from review.traces import browse, monitoring
from review.wording import production

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()
P = "monitoring_"
ALL = "(all traffic)"


@st.cache_data(ttl=600, show_spinner="Aggregating the weekly signals…")
def _monitor(
    url: str,
    stamp: str,
    policy: monitoring.MonitoringPolicy,
    weeks: int,
    segment: tuple[str, str] | None,
) -> monitoring.MonitorResult:
    return monitoring.monitor(engine, tax, policy, weeks=weeks, segment=segment)


@st.cache_data(ttl=600, show_spinner=False)
def _segment_values(url: str, stamp: str, dim: str, start: dt.date, end: dt.date) -> list[str]:
    return [v for v, _ in monitoring.segment_values(engine, dim, start, end)]


@st.cache_data(ttl=600, show_spinner="Comparing segments…")
def _by_segment(url: str, stamp: str, dim: str, weeks: int) -> pd.DataFrame:
    return monitoring.weekly_by_segment(engine, tax, dim, weeks=weeks)


def weekly_table(frame: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({"week of": [w.isoformat() for w in frame["week"]]})
    out["traces"] = frame["traces"]
    for key, label in monitoring.SIGNALS.items():
        out[label] = (frame[key] * 100).round(1)
    out["negative feedback (count)"] = frame["negative_feedback"]
    out["no logged reason (count)"] = frame["missing_reason"]
    return out


def alerts_table(result: monitoring.MonitorResult) -> None:
    if not result.alerts:
        st.success("No alerts in these weeks.")
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "week of": a.week.isoformat(),
                    "severity": a.severity,
                    "what happened": a.message,
                    "traces": ui.link("traces", **a.params()),
                }
                for a in reversed(result.alerts)
            ]
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "traces": st.column_config.LinkColumn("traces", display_text="open traces"),
            "what happened": st.column_config.TextColumn(width="large"),
        },
    )


st.title("Monitoring")
if not browse.can_view(actor):
    st.info(
        "Monitoring of production traces is for reviewers, product owners, compliance and admins."
    )
    st.stop()
try:
    policy = monitoring.load_monitoring_policy()
except WorkbenchError as exc:
    st.error("The monitoring policy file is invalid, so no alerts can be computed.")
    st.code(str(exc), language=None)
    st.stop()
if browse.total_traces(engine) == 0:
    st.info("No production traces yet: import them on the Traces page to see the weekly signals.")
    st.stop()

stamp = browse.data_stamp(engine)
url = str(engine.url)
c0, c1, c2 = st.columns([1, 1, 2])
weeks = int(c0.number_input("Weeks", min_value=2, max_value=104, value=12, step=1, key=f"{P}weeks"))
dims = [ALL, *monitoring.DIMENSIONS]
dim = c1.selectbox(
    "Segment",
    dims,
    key=f"{P}dim",
    format_func=lambda d: monitoring.DIMENSIONS.get(d, d),
)
segment: tuple[str, str] | None = None
if dim != ALL:
    probe = _monitor(url, stamp, policy, weeks, None)
    values = _segment_values(url, stamp, dim, probe.start, probe.end)
    if values:
        value = c2.selectbox("Value", values, key=f"{P}value_{dim}")
        segment = (dim, str(value))
    else:
        c2.caption("No trace in these weeks carries this segment.")

try:
    result = _monitor(url, stamp, policy, weeks, segment)
except WorkbenchError as exc:
    st.error(ui.plain(exc))
    st.stop()

last = result.end - dt.timedelta(days=1)
st.caption(
    f"Weeks of {result.start:%d %b %Y} to {last:%d %b %Y} (Monday to Sunday, UTC), "
    f"{int(result.weeks['traces'].sum()):,} traces"
    + (f" with {monitoring.DIMENSIONS[segment[0]].lower()} = " if segment else "")
    + "."
)
if segment:
    st.text(segment[1])

st.subheader("Alerts")
alerts_table(result)
with st.expander("Alert rules (policies/monitoring.yaml)"):
    a = policy.alerts
    st.text(
        "\n".join(
            [
                f"Rate alerts need at least {policy.min_traces_per_week} traces in the week.",
                f"No-answer rate: moves by more than {a.no_answer_move.max_change_points:g} "
                "points week on week.",
                f"Caveat rate: {a.caveat_above_average.points_above:g} points or more above its "
                f"{a.caveat_above_average.baseline_weeks}-week average.",
                f"Ungrounded rate: {a.ungrounded_rise.warn_ratio:g}x (warning) or "
                f"{a.ungrounded_rise.critical_ratio:g}x (critical) its "
                f"{a.ungrounded_rise.baseline_weeks}-week baseline.",
                f"Negative feedback: {a.negative_feedback_rise.warn_ratio:g}x or "
                f"{a.negative_feedback_rise.critical_ratio:g}x its "
                f"{a.negative_feedback_rise.baseline_weeks}-week baseline.",
                "Decisions with no logged reason: more than "
                f"{a.missing_reason.max_count} in a week.",
            ]
        )
    )

st.subheader("Weekly signals")
DEFAULT_SIGNALS = [
    "no_answer_rate",
    "caveat_rate",
    "empty_retrieval_rate",
    "ungrounded_rate",
    "negative_feedback_rate",
]
chosen = st.multiselect(
    "Signals",
    list(monitoring.SIGNALS),
    default=DEFAULT_SIGNALS,
    format_func=monitoring.SIGNALS.__getitem__,
    key=f"{P}signals",
)
if chosen:
    st.altair_chart(monitoring.signals_chart(result.weeks, result.alerts, chosen), width="stretch")
st.caption("Counts per week: negative feedback, ungrounded traces, decisions without a reason")
st.altair_chart(monitoring.counts_chart(result.weeks), width="stretch")
st.dataframe(
    weekly_table(result.weeks),
    hide_index=True,
    width="stretch",
    column_config={
        label: st.column_config.NumberColumn(label, format="%.1f%%")
        for label in monitoring.SIGNALS.values()
    },
)

st.subheader("Refusal wording in production")
violations = production.weekly_violations(engine, actor, result.start, result.end)
if violations is None:
    st.info(
        f"The production wording check has {production.unchecked_count(engine):,} refusal "
        "text(s) to look at. Run it on the Wording page (Production check); the weekly count "
        "of refusals that break a wording rule then shows here."
    )
    st.link_button("Open the production check", ui.link("wording"))
else:
    st.caption(
        f"Refusals that break a wording rule (the wording in force), per week: "
        f"{int(violations['offending'].sum()):,} in these weeks. The traces are listed on the "
        "Wording page (Production check)."
    )
    long = violations.melt(
        id_vars=["week"],
        value_vars=list(production.RULE_BITS),
        var_name="rule",
        value_name="traces",
    )
    st.altair_chart(
        alt.Chart(long[long["traces"] > 0])
        .mark_bar()
        .encode(
            x=alt.X("yearmonthdate(week):T", title="Week (Monday)"),
            y=alt.Y("traces:Q", title="Refusals breaking the rule"),
            color=alt.Color("rule:N", title="Rule"),
            tooltip=["week:T", "rule:N", "traces:Q"],
        ),
        width="stretch",
    )
    st.dataframe(violations, hide_index=True, width="stretch")

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
else:
    st.altair_chart(monitoring.segment_chart(seg_frame, signal), width="stretch")
    totals = (
        seg_frame.groupby("segment", as_index=False)[list(monitoring.COUNT_COLUMNS)]
        .sum()
        .sort_values("traces", ascending=False)
    )
    table = pd.DataFrame({"segment": totals["segment"], "traces": totals["traces"]})
    for count, rate in monitoring.RATE_COLUMNS.items():
        if rate in monitoring.SIGNALS:
            table[monitoring.SIGNALS[rate]] = (100 * totals[count] / totals["traces"]).round(1)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            label: st.column_config.NumberColumn(label, format="%.1f%%")
            for label in monitoring.SIGNALS.values()
        },
    )
