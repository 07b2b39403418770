"""Chart builders for the threshold pages: pure functions from DataFrames to Altair charts.

Inputs are the frames of ``review.policy.selective`` (``risk_coverage``, ``sweep``,
``sweep_by_slice``). Curves are thinned to at most ``MAX_POINTS`` rows per line before
plotting, always keeping the rows nearest the marked operating points, so a chart of a million
logged traces stays small. The undefined "answer nothing" row (threshold +inf, risk NaN) is
never drawn. Thresholds are in confidence form (answered when score >= threshold).

Every chart reads the same way (review.charts.style): rates on axes in %, one colour per
metric, titles and labels clear of each other, and a chart with nothing to draw says why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import altair as alt
import numpy as np
import pandas as pd

from review.charts.style import colour, colour_scale, no_data_chart, percent_axis
from review.core import readable
from review.core.errors import InputError
from review.core.sampling import Z95, wilson_bounds

MAX_POINTS: Final = 500
POINT_COLOURS: Final = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")
#: How each column of a curve reads in a tooltip (its name never shows).
FIELD_TITLES: Final[dict[str, str]] = {
    "coverage": "coverage",
    "selective_risk": "selective risk",
    "selective_risk_lo": "selective risk, 95% low",
    "selective_risk_hi": "selective risk, 95% high",
    "threshold": "threshold",
    "expected_cost": "expected cost per item",
}
METRIC_LABELS: Final[dict[str, str]] = {
    "coverage": "Coverage (answered)",
    "false_refusal_rate": "False-refusal rate",
    "unsupported_answer_rate": "Unsupported-answer rate",
    "abstention_recall": "Abstention recall",
    "selective_risk": "Selective risk",
    "answer_rate_answerable": "Answer rate (answerable)",
    "expected_cost": "Expected cost per item",
}


def downsample(
    frame: pd.DataFrame, x: str, max_points: int = MAX_POINTS, keep: Iterable[float] = ()
) -> pd.DataFrame:
    """At most ``max_points`` evenly spaced rows (first and last kept), plus the row nearest
    each value in ``keep`` (so marked operating points stay on the line)."""
    if max_points < 2:
        raise InputError("downsample: max_points must be at least 2")
    n = len(frame)
    if n <= max_points:
        return frame
    xs = frame[x].to_numpy(dtype=np.float64)
    picked = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    extra = [
        int(np.nanargmin(np.abs(xs - value)))
        for value in keep
        if math.isfinite(value) and not np.isnan(xs).all()
    ]
    return frame.iloc[np.union1d(picked, np.asarray(extra, dtype=np.int64))]


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            f"{what}: missing {readable.plural(len(missing), 'column')} {', '.join(missing)}"
        )


def _finite_thresholds(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[np.isfinite(frame["threshold"].to_numpy(dtype=np.float64))]


def _colour_scale(names: Sequence[str]) -> alt.Scale:
    return alt.Scale(domain=list(names), range=list(POINT_COLOURS[: max(1, len(names))]))


def risk_coverage_chart(
    curve: pd.DataFrame,
    points: Mapping[str, tuple[float, float]] | None = None,
    *,
    z: float = Z95,
) -> alt.LayerChart:
    """Selective risk against coverage, with its Wilson band and named operating points.

    ``curve``: a ``risk_coverage`` or ``sweep`` frame. ``points``: name -> (coverage, risk), e.g.
    ``{"current": (0.71, 0.04), "proposed": (0.78, 0.06)}``; points with no risk are skipped.
    """
    _require(curve, ("coverage", "selective_risk"), "risk-coverage curve")
    points = dict(points or {})
    data = curve[curve["selective_risk"].notna()].copy()
    if "selective_risk_lo" not in data.columns:
        if {"errors", "answered"} <= set(data.columns):
            lo, hi = wilson_bounds(data["errors"], data["answered"], z)
        else:
            lo = hi = np.full(len(data), np.nan)
        data["selective_risk_lo"], data["selective_risk_hi"] = lo, hi
    columns = ["coverage", "selective_risk", "selective_risk_lo", "selective_risk_hi"]
    if "threshold" in data.columns:
        columns.append("threshold")
    if data.empty:
        return alt.LayerChart(
            layer=[no_data_chart("No answered item has a known risk: there is no curve to draw.")],
            title="Risk against coverage",
        )
    data = downsample(data, "coverage", keep=[c for c, _ in points.values()])[columns]

    x = alt.X(
        "coverage:Q",
        scale=alt.Scale(domain=[0, 1]),
        axis=percent_axis("Coverage (share answered)"),
    )
    y_axis = percent_axis("Selective risk (unacceptable among answered)")
    risk = colour("selective_risk")
    band = (
        alt.Chart(data)
        .mark_area(opacity=0.2, color=risk)
        .encode(
            x=x,
            y=alt.Y("selective_risk_lo:Q", axis=y_axis),
            y2=alt.Y2("selective_risk_hi:Q"),
        )
    )
    tooltip = [
        alt.Tooltip(c, title=FIELD_TITLES[c], format=".3f" if c == "threshold" else ".1%")
        for c in columns
    ]
    line = (
        alt.Chart(data)
        .mark_line(color=risk)
        .encode(x=x, y=alt.Y("selective_risk:Q", axis=y_axis), tooltip=tooltip)
    )
    layers: list[alt.Chart] = [band, line]
    marks = pd.DataFrame(
        [
            {"point": name, "coverage": float(c), "selective_risk": float(r)}
            for name, (c, r) in points.items()
            if math.isfinite(c) and math.isfinite(r)
        ],
        columns=["point", "coverage", "selective_risk"],
    )
    if not marks.empty:
        by_point = alt.Color("point:N", title="Operating point", scale=_colour_scale(list(points)))
        base = alt.Chart(marks).encode(x=alt.X("coverage:Q"), y=alt.Y("selective_risk:Q"))
        layers.append(
            base.mark_point(size=90, filled=True).encode(
                color=by_point,
                tooltip=[
                    alt.Tooltip("point:N", title="operating point"),
                    alt.Tooltip("coverage:Q", title=FIELD_TITLES["coverage"], format=".1%"),
                    alt.Tooltip(
                        "selective_risk:Q", title=FIELD_TITLES["selective_risk"], format=".1%"
                    ),
                ],
            )
        )
        # points at the same place get one label ("current = proposed"), never two overprinted
        at = marks.groupby(["coverage", "selective_risk"], sort=False)["point"]
        labels = at.agg(" = ".join).reset_index().rename(columns={"point": "label"})
        layers.append(
            alt.Chart(labels)
            .mark_text(align="left", dx=8, dy=-8)
            .encode(x=alt.X("coverage:Q"), y=alt.Y("selective_risk:Q"), text=alt.Text("label:N"))
        )
    return alt.LayerChart(layer=layers, title="Risk against coverage")


def _threshold_rules(points: Mapping[str, float]) -> alt.Chart | None:
    marks = pd.DataFrame(
        [{"point": k, "threshold": float(v)} for k, v in points.items() if math.isfinite(v)],
        columns=["point", "threshold"],
    )
    if marks.empty:
        return None
    by_point = alt.Color("point:N", title="Operating point", scale=_colour_scale(list(points)))
    rules: alt.Chart = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[4, 3], size=2)
        .encode(
            x=alt.X("threshold:Q"),
            color=by_point,
            tooltip=[
                alt.Tooltip("point:N", title="operating point"),
                alt.Tooltip("threshold:Q", title="threshold"),
            ],
        )
    )
    return rules


def cost_chart(sweep: pd.DataFrame, points: Mapping[str, float] | None = None) -> alt.LayerChart:
    """Expected cost per item against the threshold; ``points``: name -> threshold."""
    _require(sweep, ("threshold", "expected_cost"), "sweep")
    points = dict(points or {})
    cols = [c for c in ("threshold", "expected_cost", "coverage") if c in sweep.columns]
    data = downsample(_finite_thresholds(sweep), "threshold", keep=points.values())[cols]
    if data["expected_cost"].notna().sum() == 0:
        reason = "No threshold has a known expected cost: there is nothing to draw."
        return alt.LayerChart(
            layer=[no_data_chart(reason)], title="Expected cost of each threshold"
        )
    line = (
        alt.Chart(data)
        .mark_line(color=colour("expected_cost"))
        .encode(
            x=alt.X("threshold:Q", title="Threshold (answered when score >= threshold)"),
            y=alt.Y(
                "expected_cost:Q", title="Expected cost per item", axis=alt.Axis(titlePadding=10)
            ),
            tooltip=[alt.Tooltip(c, title=FIELD_TITLES[c], format=".3f") for c in cols],
        )
    )
    rules = _threshold_rules(points)
    layers = [line] if rules is None else [line, rules]
    return alt.LayerChart(layer=layers, title="Expected cost of each threshold")


def _metric_colour(metrics: Sequence[str]) -> alt.Color:
    """Colour by metric label, each metric in its colour of the one palette."""
    labels = [METRIC_LABELS.get(m, m) for m in metrics]
    return alt.Color(
        "metric:N",
        title="Metric",
        scale=colour_scale(labels),
        legend=alt.Legend(orient="bottom", labelLimit=0, columns=2),
    )


def _long(frame: pd.DataFrame, metrics: Sequence[str], ids: Sequence[str]) -> pd.DataFrame:
    long = frame.melt(id_vars=list(ids), value_vars=list(metrics), var_name="metric")
    long["metric"] = long["metric"].map(lambda m: METRIC_LABELS.get(m, m))
    return long


def sweep_chart(
    sweep: pd.DataFrame,
    points: Mapping[str, float] | None = None,
    metrics: Sequence[str] = (
        "coverage",
        "false_refusal_rate",
        "unsupported_answer_rate",
        "abstention_recall",
    ),
) -> alt.LayerChart:
    """The rates of both failure sides against the threshold, with ``points`` (name ->
    threshold) as vertical rules."""
    _require(sweep, ("threshold", *metrics), "sweep")
    points = dict(points or {})
    data = downsample(_finite_thresholds(sweep), "threshold", keep=points.values())
    title = "Both failure sides as the threshold moves"
    if data.empty:
        reason = "No finite threshold in the sweep: there is nothing to draw."
        return alt.LayerChart(layer=[no_data_chart(reason)], title=title)
    long = _long(data[["threshold", *metrics]], metrics, ["threshold"])
    lines = (
        alt.Chart(long)
        .mark_line()
        .encode(
            x=alt.X("threshold:Q", title="Threshold (answered when score >= threshold)"),
            y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), axis=percent_axis("Rate")),
            color=_metric_colour(metrics),
            tooltip=[
                alt.Tooltip("metric:N", title="metric"),
                alt.Tooltip("threshold:Q", title="threshold", format=".3f"),
                alt.Tooltip("value:Q", title="rate", format=".1%"),
            ],
        )
    )
    rules = _threshold_rules(points)
    layers = [lines] if rules is None else [lines, rules.encode(color=alt.ColorValue("#555555"))]
    if rules is not None:
        at: dict[float, list[str]] = {}  # points on the same threshold share one label
        for k, v in points.items():
            if math.isfinite(v):
                at.setdefault(float(v), []).append(k)
        labels = pd.DataFrame(
            [{"point": " = ".join(names), "threshold": v} for v, names in at.items()]
        )
        layers.append(
            alt.Chart(labels)
            .mark_text(align="left", dx=4, baseline="top", y=4)
            .encode(x=alt.X("threshold:Q"), text=alt.Text("point:N"))
        )
    return alt.LayerChart(layer=layers, title=title)


def slice_small_multiples(
    sweep_by_slice: pd.DataFrame,
    points: Mapping[str, float] | None = None,
    metrics: Sequence[str] = ("false_refusal_rate", "unsupported_answer_rate"),
    columns: int = 3,
) -> alt.FacetChart | alt.LayerChart:
    """One small chart per slice: the chosen rates against the threshold, same axes for all,
    with ``points`` (name -> threshold) drawn in every panel."""
    _require(sweep_by_slice, ("slice", "threshold", *metrics), "per-slice sweep")
    points = dict(points or {})
    finite = _finite_thresholds(sweep_by_slice)
    if finite.empty:
        return alt.LayerChart(
            layer=[no_data_chart("No slice has a finite threshold: there is nothing to draw.")],
            title="Per-slice rates as the threshold moves",
        )
    slices = sorted(finite["slice"].astype(str).unique())
    per_slice = max(20, min(250, 3000 // max(1, len(slices) * len(metrics))))
    thinned = [
        downsample(group, "threshold", per_slice, keep=points.values())
        for _, group in finite.groupby("slice", sort=True)
    ]
    frame = pd.concat(thinned) if thinned else finite
    long = _long(frame[["slice", "threshold", *metrics]], metrics, ["slice", "threshold"])
    long["point"] = None
    rule_rows = pd.DataFrame(
        [
            {"slice": s, "threshold": float(t), "metric": None, "value": np.nan, "point": name}
            for s in slices
            for name, t in points.items()
            if math.isfinite(t)
        ],
        columns=long.columns,
    )
    data = pd.concat([long, rule_rows], ignore_index=True) if len(rule_rows) else long
    x = alt.X("threshold:Q", title="Threshold")
    lines = (
        alt.Chart()
        .mark_line()
        .encode(
            x=x,
            y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), axis=percent_axis("Rate")),
            color=_metric_colour(metrics),
        )
        .transform_filter("!isValid(datum.point)")
    )
    layers: list[alt.Chart] = [lines]
    if len(rule_rows):
        layers.append(
            alt.Chart()
            .mark_rule(strokeDash=[4, 3], color="#555555")
            .encode(
                x=x,
                tooltip=[
                    alt.Tooltip("point:N", title="operating point"),
                    alt.Tooltip("threshold:Q", title="threshold"),
                ],
            )
            .transform_filter("isValid(datum.point)")
        )
    panel = alt.LayerChart(layer=layers, data=data, width=180, height=120)
    facets: alt.FacetChart = panel.facet(
        facet=alt.Facet("slice:N", title="Slice", header=alt.Header(labelLimit=180)),
        columns=columns,
    ).properties(title="Per-slice rates as the threshold moves")
    return facets
