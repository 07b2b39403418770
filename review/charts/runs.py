"""Charts of the Runs page: each rate with its interval, and expected against observed."""

from __future__ import annotations

import altair as alt
import pandas as pd

__all__ = ["confusion_chart", "intervals_chart"]


def intervals_chart(summary: pd.DataFrame) -> alt.LayerChart:
    """Every rate of a run's summary (``metric``, ``value``, ``low``, ``high``, ``k``, ``n``)
    as a point on its 95% interval, on a 0-1 scale; the CRAG score (not a rate) and undefined
    rates are left out."""
    rates = summary[summary["metric"] != "CRAG score"].dropna(subset=["value"])
    base = alt.Chart(rates).encode(y=alt.Y("metric:N", title=None, sort=None))
    chart: alt.LayerChart = base.mark_rule().encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), title="rate (95% interval)"),
        x2="high:Q",
    ) + base.mark_point(filled=True, size=60).encode(
        x="value:Q", tooltip=["metric", "value", "k", "n"]
    )
    return chart


def confusion_chart(conf: pd.DataFrame) -> alt.LayerChart:
    """A confusion matrix (index ``gold``, one column per observed decision) as a heat map
    with the counts written in the cells."""
    long = conf.reset_index().melt(id_vars="gold", var_name="observed", value_name="cases")
    cells = (
        alt.Chart(long)
        .mark_rect()
        .encode(
            x=alt.X("observed:N", sort=None),
            y=alt.Y("gold:N", sort=None, title="expected"),
            color=alt.Color("cases:Q", scale=alt.Scale(scheme="blues")),
            tooltip=["gold", "observed", "cases"],
        )
    )
    labels = (
        alt.Chart(long)
        .mark_text()
        .encode(x=alt.X("observed:N", sort=None), y=alt.Y("gold:N", sort=None), text="cases:Q")
    )
    chart: alt.LayerChart = cells + labels
    return chart
