"""The heat map of label pairs: how often annotator A's value met annotator B's on one case."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from review.charts.style import no_data_chart

__all__ = ["pairs_heatmap"]


def pairs_heatmap(
    pairs: pd.DataFrame, order: Sequence[str], labels: Mapping[str, str] | None = None
) -> alt.LayerChart:
    """Cells ``value_a`` x ``value_b`` coloured and labelled by ``pairs`` (the count), both
    axes in ``order`` (the taxonomy's decisions), each value shown as its label in
    ``labels`` (key -> label) when given."""
    missing = {"value_a", "value_b", "pairs"} - set(pairs.columns)
    if missing:
        raise ValueError(f"pairs_heatmap: missing columns {sorted(missing)}")
    if pairs.empty:
        reason = "No case has labels from two annotators: there is no pair to show."
        return alt.LayerChart(layer=[no_data_chart(reason)])
    names = dict(labels or {})
    data = pairs.assign(
        value_a=pairs["value_a"].map(lambda k: names.get(str(k), str(k))),
        value_b=pairs["value_b"].map(lambda k: names.get(str(k), str(k))),
    )
    sort = [names.get(k, k) for k in order]
    cells = (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=alt.X(
                "value_a:N",
                title="annotator A",
                sort=sort,
                axis=alt.Axis(labelAngle=-30, labelLimit=160),
            ),
            y=alt.Y("value_b:N", title="annotator B", sort=sort, axis=alt.Axis(labelLimit=200)),
            color=alt.Color("pairs:Q", scale=alt.Scale(scheme="oranges")),
            tooltip=[
                alt.Tooltip("value_a:N", title="annotator A"),
                alt.Tooltip("value_b:N", title="annotator B"),
                alt.Tooltip("pairs:Q", title="pairs"),
            ],
        )
    )
    text = (
        alt.Chart(data)
        .mark_text()
        .encode(
            x=alt.X("value_a:N", sort=sort),
            y=alt.Y("value_b:N", sort=sort),
            text="pairs:Q",
        )
    )
    chart: alt.LayerChart = cells + text
    return chart
