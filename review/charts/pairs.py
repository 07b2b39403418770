"""The heat map of label pairs: how often annotator A's value met annotator B's on one case."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

__all__ = ["pairs_heatmap"]


def pairs_heatmap(pairs: pd.DataFrame, order: Sequence[str]) -> alt.LayerChart:
    """Cells ``value_a`` x ``value_b`` coloured and labelled by ``pairs`` (the count), both
    axes in ``order`` (the taxonomy's decisions)."""
    missing = {"value_a", "value_b", "pairs"} - set(pairs.columns)
    if missing:
        raise ValueError(f"pairs_heatmap: missing columns {sorted(missing)}")
    sort = list(order)
    cells = (
        alt.Chart(pairs)
        .mark_rect()
        .encode(
            x=alt.X("value_a:N", title="annotator A", sort=sort),
            y=alt.Y("value_b:N", title="annotator B", sort=sort),
            color=alt.Color("pairs:Q", scale=alt.Scale(scheme="oranges")),
            tooltip=["value_a", "value_b", "pairs"],
        )
    )
    labels = (
        alt.Chart(pairs)
        .mark_text()
        .encode(
            x=alt.X("value_a:N", sort=sort),
            y=alt.Y("value_b:N", sort=sort),
            text="pairs:Q",
        )
    )
    chart: alt.LayerChart = cells + labels
    return chart
