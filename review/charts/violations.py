"""Weekly refusals that break a wording rule, as stacked bars per rule."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

__all__ = ["violations_chart"]


def violations_chart(weekly: pd.DataFrame, rules: Sequence[str]) -> alt.Chart:
    """``weekly``: one row per week with a count column per rule; rules with no refusal in a
    week draw no bar."""
    long = weekly.melt(
        id_vars=["week"], value_vars=list(rules), var_name="rule", value_name="traces"
    )
    chart: alt.Chart = (
        alt.Chart(long[long["traces"] > 0])
        .mark_bar()
        .encode(
            x=alt.X("yearmonthdate(week):T", title="Week (Monday)"),
            y=alt.Y("traces:Q", title="Refusals breaking the rule"),
            color=alt.Color("rule:N", title="Rule"),
            tooltip=["week:T", "rule:N", "traces:Q"],
        )
    )
    return chart
