"""Every chart reads the same way (issue 17, item 13): rates on % axes, one colour per metric
across all charts, labels not clipped, a panel with no data that says why, and many families
drawn as the few that move most plus "others"."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import pytest

from review.charts import charts
from review.charts import style as chartstyle
from review.charts.pairs import pairs_heatmap
from review.charts.runs import confusion_chart, intervals_chart
from review.charts.violations import violations_chart
from review.evaluation import runmetrics
from review.policy.policy import Costs
from review.policy.selective import sweep, sweep_by_slice
from review.traces import interaction, monitoring

COSTS = Costs(false_refusal=1.0, unsupported_answer=5.0)


def _outcomes(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    score = rng.random(n).round(3)
    answerable = rng.random(n) < 0.7
    return pd.DataFrame(
        {
            "score": score,
            "answerable": answerable,
            "acceptable": answerable & (rng.random(n) < 0.5 + score / 2),
            "slice": np.array(["near_neighbour_distractor", "temporal_mismatch"])[
                rng.integers(0, 2, n)
            ],
        }
    )


def _weeks(n: int = 4) -> pd.DataFrame:
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"week": dt.date(2026, 11, 2) + dt.timedelta(weeks=i)}
        row["traces"] = 100
        for j, key in enumerate(monitoring.SIGNALS):
            row[key] = 0.05 * (j + 1) + 0.01 * i
        row |= {"negative_feedback": 3 + i, "ungrounded": 2, "missing_reason": 0}
        row |= {"reformulation_rate": 0.1, "reformulated": 1, "reformulation_logged": 10}
        row |= {"citation_interaction_rate": 0.2, "citation_opened": 2, "citation_logged": 10}
        rows.append(row)
    return pd.DataFrame(rows)


def _summary() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "metric": ["False-refusal rate", "Unsupported-answer rate", "Abstention recall"],
            "value": [0.2, 0.1, 0.8],
            "low": [0.1, 0.05, 0.6],
            "high": [0.35, 0.2, 0.9],
            "k": [2, 1, 8],
            "n": [10, 10, 10],
        }
    )


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _metric_specs() -> dict[str, dict[str, Any]]:
    data = sweep(_outcomes(), COSTS)
    by_slice = sweep_by_slice(_outcomes(), COSTS)
    weeks = _weeks()
    return {
        "sweep": charts.sweep_chart(data, {"current": 0.5}).to_dict(),
        "slices": charts.slice_small_multiples(by_slice, {"current": 0.5}).to_dict(),
        "intervals": intervals_chart(_summary()).to_dict(),
        "signals": monitoring.signals_chart(weeks).to_dict(),
        "counts": monitoring.counts_chart(weeks).to_dict(),
        "interaction": interaction.interaction_chart(
            weeks, ["reformulation_rate", "citation_interaction_rate"]
        ).to_dict(),
    }


def _colour_scales(spec: dict[str, Any]) -> list[tuple[list[str], list[str]]]:
    out = []
    for node in _walk(spec):
        colour = node.get("color")
        if isinstance(colour, dict) and isinstance(colour.get("scale"), dict):
            scale = colour["scale"]
            if "domain" in scale and "range" in scale:
                out.append((scale["domain"], scale["range"]))
    return out


def test_one_colour_per_metric_in_every_chart() -> None:
    seen: dict[str, set[str]] = {}
    for name, spec in _metric_specs().items():
        scales = _colour_scales(spec)
        assert scales, f"{name}: its metrics are coloured by the one palette"
        for domain, range_ in scales:
            assert len(domain) == len(range_)
            for label, colour in zip(domain, range_, strict=True):
                seen.setdefault(chartstyle.metric_key(label), set()).add(colour)
                assert colour == chartstyle.colour(label)
    assert all(len(c) == 1 for c in seen.values()), seen
    # the metrics that appear in several charts share their colour
    assert "false_refusal_rate" in seen and "unsupported_answer_rate" in seen
    assert seen["ungrounded_rate"] == {chartstyle.METRIC_COLOURS["ungrounded_rate"]}
    assert chartstyle.colour("Negative feedback") == chartstyle.colour("Negative feedback rate")
    assert chartstyle.colour("False-refusal rate") == chartstyle.colour("false_refusal_rate")
    # distinct metrics read as distinct colours
    assert len(set(chartstyle.METRIC_COLOURS.values())) == len(chartstyle.METRIC_COLOURS)


def test_rates_read_in_percent_on_every_rate_axis() -> None:
    specs = _metric_specs()
    specs["risk"] = charts.risk_coverage_chart(sweep(_outcomes(), COSTS)).to_dict()
    d = runmetrics.family_drift(_history())
    specs["drift"] = runmetrics.drift_chart(d, "decision_accuracy").to_dict()
    for name, spec in specs.items():
        if name == "counts":
            continue
        formats = [n["axis"].get("format") for n in _walk(spec) if isinstance(n.get("axis"), dict)]
        assert "%" in formats, f"{name}: a rate axis in %"


def test_titles_and_labels_are_not_clipped() -> None:
    specs = _metric_specs()
    for name in ("signals", "counts", "interaction", "sweep"):
        legends = [n["legend"] for n in _walk(specs[name]) if isinstance(n.get("legend"), dict)]
        assert legends and all(leg.get("labelLimit") == 0 for leg in legends), name
    y = specs["intervals"]["layer"][0]["encoding"]["y"]
    assert y["axis"]["labelLimit"] >= 300  # "Answers contradicting a required claim" fits
    rate_axes = [n["axis"] for n in _walk(specs["sweep"]) if isinstance(n.get("axis"), dict)]
    assert all(a.get("titlePadding", 0) >= 10 for a in rate_axes if a.get("format") == "%")


def _text_of(spec: dict[str, Any]) -> str:
    return " ".join(
        str(r.get("reason", "")) for rows in spec.get("datasets", {}).values() for r in rows
    )


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: charts.sweep_chart(sweep(_outcomes(), COSTS).iloc[:0]), "No finite threshold"),
        (
            lambda: charts.cost_chart(sweep(_outcomes(), COSTS).iloc[:0]),
            "has a known expected cost",
        ),
        (
            lambda: charts.risk_coverage_chart(sweep(_outcomes(), COSTS).iloc[:0]),
            "no curve",
        ),
        (
            lambda: charts.slice_small_multiples(sweep_by_slice(_outcomes(), COSTS).iloc[:0]),
            "No slice",
        ),
        (lambda: intervals_chart(_summary().iloc[:0]), "No rate of this run"),
        (lambda: monitoring.signals_chart(_weeks().iloc[:0]), "No trace in these weeks"),
        (lambda: monitoring.counts_chart(_weeks().iloc[:0]), "No trace in these weeks"),
        (
            lambda: violations_chart(
                pd.DataFrame({"week": [dt.date(2026, 11, 2)], "R1": [0]}), ["R1"]
            ),
            "breaks a wording rule",
        ),
        (
            lambda: pairs_heatmap(
                pd.DataFrame(columns=["value_a", "value_b", "pairs"]), ["answer"]
            ),
            "No case has labels from two annotators",
        ),
        (
            lambda: runmetrics.drift_chart(
                runmetrics.family_drift(_history()).iloc[:0], "abstention_recall"
            ),
            "No question family",
        ),
    ],
)
def test_a_chart_with_no_data_says_why(build: Any, words: str) -> None:
    spec = build().to_dict()
    marks = [n["mark"] for n in _walk(spec) if "mark" in n]
    assert any((m if isinstance(m, dict) else {"type": m}).get("type") == "text" for m in marks)
    assert words.lower() in _text_of(spec).lower()


def test_decisions_read_as_labels_in_the_heat_maps() -> None:
    labels = {"answer": "Answer", "abstain": "Abstain (the documents do not say)"}
    conf = pd.DataFrame(
        {"answer": [5, 1], "abstain": [2, 7]}, index=pd.Index(["answer", "abstain"], name="gold")
    )
    rows = next(iter(confusion_chart(conf, labels).to_dict()["datasets"].values()))
    assert {r["gold"] for r in rows} == set(labels.values())
    pairs = pd.DataFrame({"value_a": ["answer"], "value_b": ["abstain"], "pairs": [3]})
    spec = pairs_heatmap(pairs, ["answer", "abstain"], labels).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert rows[0]["value_a"] == "Answer"
    assert spec["layer"][0]["encoding"]["x"]["sort"] == list(labels.values())


def _history(families: int = 3) -> pd.DataFrame:
    """Three runs over ``families`` question families (evalruns.family_history's columns)."""
    rows = []
    for r, run in enumerate(["R1", "R2", "R3"]):
        for f in range(families):
            for rep in range(2):
                right = (f + r + rep) % 3 != 0
                rows.append(
                    {
                        "run_id": r + 1,
                        "run": run,
                        "created_at": pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(days=r),
                        "family": f"F{f:03d}",
                        "key": f"F{f:03d}-{rep}",
                        "repeat": 0,
                        "gold": "answer" if rep == 0 else "abstain",
                        "decision": ("answer" if rep == 0 else "abstain")
                        if right
                        else ("abstain" if rep == 0 else "answer"),
                        "infra": False,
                        "answerable": rep == 0,
                        "answered": (rep == 0) == right,
                    }
                )
    return pd.DataFrame(rows)


def test_drift_of_many_families_shows_the_few_that_move_most_and_the_others_as_one() -> None:
    drift = runmetrics.family_drift(_history(families=115))
    assert drift["family"].nunique() == 115
    lines = runmetrics.drift_lines(drift, "decision_accuracy", top=8)
    names = list(dict.fromkeys(lines["family"]))
    assert len(names) == 9 and names[-1] == "other 107 families (combined)"
    # the others' accuracy is weighted by each family's outputs, hand-summed here
    kept = set(names[:-1])
    rest = drift[~drift["family"].isin(kept)]
    for run, group in rest.groupby("run"):
        expected = (group["decision_accuracy"] * group["accuracy_n"]).sum() / group[
            "accuracy_n"
        ].sum()
        got = lines[(lines["run"] == run) & (lines["family"] == names[-1])]
        assert got["decision_accuracy"].iloc[0] == pytest.approx(expected)
    spec = runmetrics.drift_chart(drift, "decision_accuracy").to_dict()
    rows = spec["datasets"][spec["data"]["name"]] if "data" in spec else None
    drawn = rows or next(iter(spec["datasets"].values()))
    assert len({r["family"] for r in drawn}) == 9
    assert spec["height"] <= 400  # not one row of legend per family
    scale = spec["layer"][0]["encoding"]["color"]["scale"]
    assert scale["domain"][-1] == names[-1] and scale["range"][-1] == "#9e9e9e"  # others grey
    assert len(set(scale["range"])) == len(scale["range"]) == 9
    few = runmetrics.drift_lines(drift[drift["family"].isin(["F000", "F001"])], "flips")
    assert set(few["family"]) == {"F000", "F001"}


def test_the_exported_report_draws_charts_wide_with_legible_text() -> None:
    from review.monthly import report

    chart = charts.sweep_chart(sweep(_outcomes(), COSTS))
    spec = report.for_export(chart).to_dict()
    assert spec["width"] >= 700
    assert spec["config"]["axis"]["labelFontSize"] >= 12
    assert spec["config"]["legend"]["labelLimit"] == 0
    assert isinstance(report.for_export(chartstyle.no_data_chart("none")), alt.TopLevelMixin)
