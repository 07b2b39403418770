"""Chart downloads: the data as CSV with infinite thresholds as empty cells, and every kind of
chart the Thresholds page draws (plain, layered, faceted) as an SVG and a PNG file."""

from __future__ import annotations

import io

import altair as alt
import numpy as np
import pandas as pd
import pytest

from review.charts import charts
from review.charts.downloads import IMAGE_FORMATS, chart_image, csv_text
from review.policy.policy import Costs
from review.policy.selective import risk_coverage, sweep, sweep_by_slice

COSTS = Costs(false_refusal=1.0, unsupported_answer=5.0)


def _outcomes() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 300
    score = rng.random(n).round(3)
    answerable = rng.random(n) < 0.7
    return pd.DataFrame(
        {
            "score": score,
            "answerable": answerable,
            "acceptable": answerable & (rng.random(n) < 0.4 + score / 2),
            "slice": [["temporal_mismatch"] if i % 2 else ["entity_collision"] for i in range(n)],
        }
    )


def test_csv_leaves_infinite_thresholds_empty() -> None:
    frame = pd.DataFrame({"threshold": [0.1, np.inf, -np.inf], "coverage": [1.0, 0.0, 1.0]})
    text = csv_text(frame)
    assert text.splitlines() == ["threshold,coverage", "0.1,1.0", ",0.0", ",1.0"]
    back = pd.read_csv(io.StringIO(text))
    assert back["threshold"].isna().tolist() == [False, True, True]
    assert np.isinf(frame["threshold"]).sum() == 2  # the chart's own data is left as it was


def test_the_formats_offered() -> None:
    assert IMAGE_FORMATS == (("svg", "image/svg+xml"), ("png", "image/png"))


@pytest.mark.parametrize("kind", ["risk_coverage", "cost", "slices"])
def test_every_chart_of_the_page_renders_as_svg_and_png(kind: str) -> None:
    frame = _outcomes()
    sw = sweep(frame, COSTS)
    points = {"current": 0.4, "proposed": 0.6}
    chart: alt.TopLevelMixin
    if kind == "risk_coverage":
        chart = charts.risk_coverage_chart(
            risk_coverage(frame["score"], frame["acceptable"]), {"current": (0.8, 0.2)}
        )
    elif kind == "cost":
        chart = charts.cost_chart(sw, points)
    else:
        chart = charts.slice_small_multiples(sweep_by_slice(frame, COSTS), points)
    svg = chart_image(chart, "svg")
    assert svg.lstrip().startswith(b"<svg") and svg.rstrip().endswith(b"</svg>")
    svg.decode("utf-8")
    assert chart_image(chart, "png").startswith(b"\x89PNG\r\n\x1a\n")
