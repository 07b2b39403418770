"""Weekly refusals that break a wording rule, as stacked bars per rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from review.charts.style import no_data_chart
from review.charts.weekly import week_tooltip, week_x
from review.core.readable import humanize

__all__ = ["violations_chart"]


def violations_chart(
    weekly: pd.DataFrame, rules: Sequence[str], titles: Mapping[str, str] | None = None
) -> alt.Chart:
    """``weekly``: one row per week with a count column per rule; rules with no refusal in a
    week draw no bar; with none at all the chart says so. Each rule reads as its title in
    ``titles`` (rule id -> title), in the legend and the tooltip, never as its id."""
    long = weekly.melt(
        id_vars=["week"], value_vars=list(rules), var_name="rule", value_name="traces"
    )
    names = dict(titles or {})
    long["rule"] = long["rule"].map(lambda r: names.get(r) or humanize(r))
    shown = long[long["traces"] > 0]
    if shown.empty:
        return no_data_chart("No refusal in these weeks breaks a wording rule.")
    chart: alt.Chart = (
        alt.Chart(shown)
        .mark_bar()
        .encode(
            x=week_x("yearmonthdate(week):T"),
            y=alt.Y("traces:Q", title="Refusals breaking the rule", axis=alt.Axis(titlePadding=10)),
            color=alt.Color("rule:N", title="Rule", legend=alt.Legend(labelLimit=0)),
            tooltip=[
                week_tooltip(title=None),
                alt.Tooltip("rule:N", title="Rule"),
                alt.Tooltip("traces:Q", title="Refusals"),
            ],
        )
    )
    return chart
