"""The interaction signals: what users do right after a response.

Production monitoring should track "user reformulation" and "citation interaction".
A trace logs them as ``reformulated`` (the user asked again in other words right after the
response) and ``citation_opened`` (the user opened a source the response cited); either is
NULL when the client does not log it. The daily rollup counts, per day and segment, the traces
that log each and those where it happened; each rate is a share of the traces that log it,
never of all traces, and a week or segment where no trace logs it has no rate (undefined),
and is not shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import altair as alt
import pandas as pd

from review.charts.style import colour_scale, percent_axis
from review.charts.weekly import bottom_legend, week_tooltip, week_x, weekly_lines

__all__ = [
    "INTERACTION_COUNTS",
    "INTERACTION_SIGNALS",
    "add_interaction_rates",
    "interaction_chart",
    "logged_interactions",
]

#: The interaction signals, each a share of the traces that log it (not of all
#: traces): rate column -> (label, count column, denominator column). Shown only for the
#: weeks and segments whose traces carry the field (``reformulated``, ``citation_opened``).
INTERACTION_SIGNALS: Final[dict[str, tuple[str, str, str]]] = {
    "reformulation_rate": (
        "User reformulation rate (of traces logging it)",
        "reformulated",
        "reformulation_logged",
    ),
    "citation_interaction_rate": (
        "Citation interaction rate (of traces logging it)",
        "citation_opened",
        "citation_logged",
    ),
}
INTERACTION_COUNTS: Final[tuple[str, ...]] = (
    "reformulation_logged",
    "reformulated",
    "citation_logged",
    "citation_opened",
)


def add_interaction_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Add each interaction rate to a frame of counts (NaN where no trace logs it)."""
    for rate, (_, count, logged) in INTERACTION_SIGNALS.items():
        d = frame[logged].astype("float64")
        frame[rate] = (frame[count].astype("float64") / d).where(d > 0)
    return frame


def logged_interactions(frame: pd.DataFrame) -> list[str]:
    """The interaction signals (keys of INTERACTION_SIGNALS) that some trace of the frame
    logs: the others are not shown, as a rate over no logged trace means nothing."""
    return [
        rate
        for rate, (_, _, logged) in INTERACTION_SIGNALS.items()
        if logged in frame and int(frame[logged].sum()) > 0
    ]


def interaction_chart(frame: pd.DataFrame, signals: Sequence[str]) -> alt.Chart:
    """Weekly interaction rates (each over the traces that log it), one line per signal; a
    week where no trace logs a signal has no point."""
    f = frame.copy()
    f["week"] = pd.to_datetime(f["week"])
    parts = []
    for rate in signals:
        label, count, logged = INTERACTION_SIGNALS[rate]
        part = f[["week", rate, count, logged]].rename(
            columns={rate: "value", count: "k", logged: "n"}
        )
        part["signal"] = label
        parts.append(part[part["n"] > 0])
    long = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["week", "value", "k", "n", "signal"])
    )
    weeks = f["week"].dropna()
    domain = [w.isoformat() for w in (weeks.min(), weeks.max())] if len(weeks) else []
    return weekly_lines(
        long,
        # the weeks shown above, also those whose traces log nothing
        x=week_x(domain=domain),
        y=alt.Y("value:Q", axis=percent_axis("Rate")),
        color=alt.Color(
            "signal:N",
            title=None,
            sort=[INTERACTION_SIGNALS[r][0] for r in signals],
            scale=colour_scale(INTERACTION_SIGNALS[r][0] for r in signals),
            legend=bottom_legend(),
        ),
        tooltip=[
            week_tooltip(),
            alt.Tooltip("signal:N"),
            alt.Tooltip("value:Q", title="rate", format=".1%"),
            alt.Tooltip("k:Q", title="traces with it"),
            alt.Tooltip("n:Q", title="traces logging it"),
        ],
        height=260,
    )
