"""Chart builders: the risk-coverage, cost, sweep and per-slice charts as Vega-Lite specs
(layers, marks and data checked), and downsampling that keeps the ends."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from review.charts import charts
from review.policy.policy import Costs
from review.policy.selective import (
    operating_point,
    risk_coverage,
    sweep,
    sweep_by_slice,
)

COSTS = Costs(false_refusal=1.0, unsupported_answer=5.0)


def _big_outcomes(n: int = 50_000) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    score = rng.random(n).round(4)
    answerable = rng.random(n) < 0.75
    acceptable = answerable & (rng.random(n) < 0.5 + score / 2)
    slices = np.array(["near_neighbour_distractor", "temporal_mismatch", "entity_collision"])
    return pd.DataFrame(
        {
            "score": score,
            "answerable": answerable,
            "acceptable": acceptable,
            "slice": slices[rng.integers(0, 3, n)],
        }
    )


def _datasets(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return list(spec.get("datasets", {}).values())


def test_risk_coverage_chart_has_band_line_and_points() -> None:
    frame = _big_outcomes()
    curve = risk_coverage(frame["score"], frame["acceptable"])
    current = operating_point(frame, 0.55, COSTS)
    proposed = operating_point(frame, 0.4, COSTS)
    chart = charts.risk_coverage_chart(
        curve,
        {
            "current": (current["coverage"], current["selective_risk"]),
            "proposed": (proposed["coverage"], proposed["selective_risk"]),
        },
    )
    spec = chart.to_dict()
    json.dumps(spec)  # serialisable: no inf/NaN smuggled into the spec
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["area", "line", "point", "text"]
    band, line = spec["layer"][0]["encoding"], spec["layer"][1]["encoding"]
    assert band["y"]["field"] == "selective_risk_lo" and band["y2"]["field"] == "selective_risk_hi"
    assert line["x"]["field"] == "coverage" and line["y"]["field"] == "selective_risk"
    sizes = sorted(len(d) for d in _datasets(spec))
    assert sizes[0] == 2 and sizes[-1] <= 502  # two operating points; thinned curve
    assert len(curve) > 5_000
    points = next(d for d in _datasets(spec) if len(d) == 2)
    assert {p["point"] for p in points} == {"current", "proposed"}
    curve_rows = max(_datasets(spec), key=len)
    covs = [r["coverage"] for r in curve_rows]
    assert min(covs) > 0  # the undefined "answer nothing" row is not drawn
    assert any(abs(c - current["coverage"]) < 1e-9 for c in covs)  # kept on the line


def test_operating_points_at_the_same_place_get_one_label_not_two_overprinted() -> None:
    frame = _big_outcomes()
    curve = risk_coverage(frame["score"], frame["acceptable"])
    same = operating_point(frame, 0.55, COSTS)
    other = operating_point(frame, 0.4, COSTS)
    at = (same["coverage"], same["selective_risk"])
    spec = charts.risk_coverage_chart(curve, {"current": at, "proposed": at}).to_dict()
    labels = [r["label"] for d in _datasets(spec) for r in d if "label" in r]
    assert labels == ["current = proposed"]
    moved = (other["coverage"], other["selective_risk"])
    spec = charts.risk_coverage_chart(curve, {"current": at, "proposed": moved}).to_dict()
    labels = [r["label"] for d in _datasets(spec) for r in d if "label" in r]
    assert sorted(labels) == ["current", "proposed"]


def test_cost_and_sweep_charts_mark_the_thresholds() -> None:
    table = sweep(_big_outcomes(), COSTS)
    for build in (charts.cost_chart, charts.sweep_chart):
        spec = build(table, {"current": 0.55, "proposed": 0.4}).to_dict()
        json.dumps(spec)
        layers = spec["layer"]
        assert layers[0]["mark"]["type"] == "line"
        assert layers[0]["encoding"]["x"]["field"] == "threshold"
        assert layers[1]["mark"]["type"] == "rule"
        rules = [d for d in _datasets(spec) if d and "point" in d[0]]
        assert {r["point"] for r in rules[0]} == {"current", "proposed"}
        assert all(math.isfinite(r["threshold"]) for d in _datasets(spec) for r in d)
    spec = charts.sweep_chart(table).to_dict()
    metrics = {r["metric"] for d in _datasets(spec) for r in d}
    assert metrics == {
        "Coverage (answered)",
        "False-refusal rate",
        "Unsupported-answer rate",
        "Abstention recall",
    }
    cost = charts.cost_chart(table).to_dict()
    assert cost["layer"][0]["encoding"]["y"]["field"] == "expected_cost"
    # two points on the same threshold share one label instead of overprinting
    same = charts.sweep_chart(table, {"current": 0.55, "proposed": 0.55}).to_dict()
    labels = {r["point"] for d in _datasets(same) for r in d if "point" in r}
    assert "current = proposed" in labels


def test_slice_small_multiples_has_one_panel_per_slice() -> None:
    table = sweep_by_slice(_big_outcomes(), COSTS)
    spec = charts.slice_small_multiples(table, {"current": 0.55}).to_dict()
    json.dumps(spec)
    assert spec["facet"]["field"] == "slice"
    rows = [r for d in _datasets(spec) for r in d]
    assert {r["slice"] for r in rows} == {
        "near_neighbour_distractor",
        "temporal_mismatch",
        "entity_collision",
    }
    assert len(rows) <= 3 * 2 * 251 + 3
    assert [layer["mark"]["type"] for layer in spec["spec"]["layer"]] == ["line", "rule"]
    assert sum(1 for r in rows if r.get("point") == "current") == 3


def test_downsample_keeps_ends_and_requested_rows() -> None:
    frame = pd.DataFrame({"x": np.linspace(0, 1, 10_001)})
    thin = charts.downsample(frame, "x", 50, keep=[0.123456])
    assert len(thin) <= 51
    assert thin["x"].iloc[0] == 0 and thin["x"].iloc[-1] == 1
    assert (np.abs(thin["x"] - 0.123456) < 1e-4).any()
    assert charts.downsample(frame.head(10), "x", 50).equals(frame.head(10))
