"""What a chart's download buttons hand over: its data as CSV (infinite thresholds written as
empty cells) and the chart itself as an SVG or PNG image (rendered by vl-convert, only when
someone asks for it: rendering every chart on every run is slow)."""

from __future__ import annotations

import io
from typing import Final, Literal

import altair as alt
import numpy as np
import pandas as pd

from review.core import csvsafe

__all__ = ["IMAGE_FORMATS", "ImageFormat", "chart_image", "csv_text"]

ImageFormat = Literal["svg", "png"]

#: The image formats offered, with their media types, in the order of the buttons.
IMAGE_FORMATS: Final[tuple[tuple[ImageFormat, str], ...]] = (
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
)


def csv_text(data: pd.DataFrame) -> str:
    """The chart's data as CSV, without the index; +/-inf (the "answer nothing" end of a
    sweep) become empty cells, and text cells (slice names, run names) are neutralised for
    spreadsheets (review.core.csvsafe) while numbers stay numbers."""
    return csvsafe.frame_csv(data.replace([np.inf, -np.inf], np.nan), index=False)


def chart_image(chart: alt.TopLevelMixin, fmt: ImageFormat) -> bytes:
    """The chart as an SVG (UTF-8) or PNG file, a layered or faceted chart as well as a plain
    one. Altair writes SVG as text and PNG as bytes, so each gets a buffer of its kind."""
    if fmt == "svg":
        text = io.StringIO()
        chart.save(text, format="svg")
        return text.getvalue().encode("utf-8")
    buf = io.BytesIO()
    chart.save(buf, format=fmt)
    return buf.getvalue()
