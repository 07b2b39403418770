"""The pieces every weekly chart is built from (monitoring's signals and counts, the
interaction rates, the wording violations): the week axis, the week in a tooltip, the legend
under the chart, and a line per series with a point per week."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

__all__ = ["bottom_legend", "week_tooltip", "week_x", "weekly_lines"]

WEEK_TITLE = "Week (Monday)"


def week_x(field: str = "week:T", domain: Sequence[str] = ()) -> alt.X:
    """The week axis: Mondays labelled "02 Nov", over ``domain`` (ISO dates) when given."""
    return alt.X(
        field,
        title=WEEK_TITLE,
        axis=alt.Axis(format="%d %b", labelAngle=0),
        scale=alt.Scale(domain=list(domain)) if domain else alt.Undefined,
    )


def week_tooltip(title: str | None = "week of") -> alt.Tooltip:
    """The week in a tooltip, as an ISO date."""
    return alt.Tooltip(
        "week:T", title=title if title is not None else alt.Undefined, format="%Y-%m-%d"
    )


def bottom_legend(**kwargs: Any) -> alt.Legend:
    """A legend under the chart whose labels are never clipped."""
    return alt.Legend(orient="bottom", labelLimit=0, **kwargs)


def weekly_lines(
    data: pd.DataFrame,
    *,
    y: alt.Y,
    color: alt.Color,
    tooltip: list[Any],
    height: int,
    x: alt.X | None = None,
) -> alt.Chart:
    """One line per series with a point per week."""
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(x=x if x is not None else week_x(), y=y, color=color, tooltip=tooltip)
        .properties(height=height)
    )
    return chart
