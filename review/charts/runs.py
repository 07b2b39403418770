"""Charts of the Runs page: each rate with its interval, and expected against observed."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from review.charts.style import colour_scale, no_data_chart, percent_axis

__all__ = ["confusion_chart", "family_lines_chart", "intervals_chart"]


def intervals_chart(summary: pd.DataFrame) -> alt.LayerChart:
    """Every rate of a run's summary (``metric``, ``value``, ``low``, ``high``, ``k``, ``n``)
    as a point on its 95% interval, on a 0-100% scale, each metric in its colour of the one
    palette; the CRAG score (not a rate) and undefined rates are left out (with no rate at
    all, the chart says so)."""
    rates = summary[summary["metric"] != "CRAG score"].dropna(subset=["value"])
    if rates.empty:
        reason = "No rate of this run is defined (no case in any denominator)."
        return alt.LayerChart(layer=[no_data_chart(reason)])
    names = rates["metric"].astype(str).tolist()
    y = alt.Y("metric:N", title=None, sort=None, axis=alt.Axis(labelLimit=320))
    colour = alt.Color("metric:N", scale=colour_scale(names), legend=None)
    base = alt.Chart(rates).encode(y=y, color=colour)
    chart: alt.LayerChart = base.mark_rule(size=2).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), axis=percent_axis("rate (95% interval)")),
        x2="high:Q",
    ) + base.mark_point(filled=True, size=60).encode(
        x="value:Q",
        tooltip=[
            "metric",
            alt.Tooltip("value:Q", format=".1%"),
            alt.Tooltip("low:Q", format=".1%"),
            alt.Tooltip("high:Q", format=".1%"),
            "k",
            "n",
        ],
    )
    return chart


def confusion_chart(conf: pd.DataFrame, labels: Mapping[str, str] | None = None) -> alt.LayerChart:
    """A confusion matrix (index ``gold``, one column per observed decision) as a heat map
    with the counts written in the cells; ``labels`` (decision key -> label) names the
    decisions as people read them."""
    long = conf.reset_index().melt(id_vars="gold", var_name="observed", value_name="cases")
    if long.empty:
        return alt.LayerChart(layer=[no_data_chart("No output of this run has a decision.")])
    names = dict(labels or {})
    long["gold"] = long["gold"].map(lambda k: names.get(str(k), str(k)))
    long["observed"] = long["observed"].map(lambda k: names.get(str(k), str(k)))
    axis = alt.Axis(labelAngle=-30, labelLimit=160)
    cells = (
        alt.Chart(long)
        .mark_rect()
        .encode(
            x=alt.X("observed:N", sort=None, axis=axis),
            y=alt.Y("gold:N", sort=None, title="expected", axis=alt.Axis(labelLimit=200)),
            color=alt.Color("cases:Q", scale=alt.Scale(scheme="blues")),
            tooltip=["gold", "observed", "cases"],
        )
    )
    text = (
        alt.Chart(long)
        .mark_text()
        .encode(x=alt.X("observed:N", sort=None), y=alt.Y("gold:N", sort=None), text="cases:Q")
    )
    chart: alt.LayerChart = cells + text
    return chart


_FAMILY_COLOURS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f",
)  # fmt: skip


def _family_range(kept: int) -> list[str]:
    """Colours of ``kept`` families then of the combined others (grey)."""
    return [_FAMILY_COLOURS[i % len(_FAMILY_COLOURS)] for i in range(kept)] + ["#9e9e9e"]


def family_lines_chart(
    data: pd.DataFrame, metric: str, *, title: str, runs: list[str], rate: bool, top: int
) -> alt.LayerChart:
    """One line per question family across ``runs`` (columns run, family, ``metric``,
    cases): a rate on a 0-100% axis, else a count; when there are more than ``top`` families
    the last line is the others combined, in grey."""
    families = list(dict.fromkeys(data["family"].astype(str)))
    others = families[-1].startswith("other ") and len(families) > top
    base = alt.Chart(data).encode(
        x=alt.X(
            "run:N",
            sort=runs,
            title="run (oldest first)",
            axis=alt.Axis(labelAngle=0, labelLimit=200),
        ),
        y=alt.Y(
            f"{metric}:Q",
            scale=alt.Scale(domain=[0, 1]) if rate else alt.Undefined,
            axis=percent_axis(title) if rate else alt.Axis(title=title, titlePadding=10),
        ),
        color=alt.Color(
            "family:N",
            title="question family",
            # the families each in a colour of their own, the combined others in grey
            scale=alt.Scale(domain=families, range=_family_range(len(families) - 1))
            if others
            else alt.Scale(scheme="tableau10"),
            legend=alt.Legend(labelLimit=0, symbolLimit=0),
        ),
        tooltip=[
            alt.Tooltip("run:N", title="run"),
            alt.Tooltip("family:N", title="question family"),
            alt.Tooltip(f"{metric}:Q", title=title, format=".1%" if rate else "d"),
            alt.Tooltip("cases:Q", title="cases"),
        ],
    )
    return alt.LayerChart(
        layer=[base.mark_line(), base.mark_point(filled=True, size=50)], height=320
    )
