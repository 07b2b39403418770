"""The download buttons under each chart of the Thresholds page: its data as CSV and the
chart as SVG and PNG (rendered only when someone clicks)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import ui
from review.charts.downloads import IMAGE_FORMATS, ImageFormat, chart_image, csv_text


def chart_downloads(chart: alt.TopLevelMixin, data: pd.DataFrame, name: str) -> None:
    """PNG or SVG of a chart when the renderer is installed, and its data as CSV."""
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Data (CSV)",
        lambda: csv_text(data),  # written when someone clicks, not on every slider step
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"thr_csv_{name}",
    )
    for col, (fmt, mime) in zip((c2, c3), IMAGE_FORMATS, strict=True):

        def render(fmt: ImageFormat = fmt) -> bytes:
            # made only when someone clicks: rendering every chart on every run is slow
            return chart_image(chart, fmt)

        col.download_button(
            ui.plain(fmt.upper()),
            render,
            file_name=f"{name}.{fmt}",
            mime=mime,
            key=f"thr_{fmt}_{name}",
        )
