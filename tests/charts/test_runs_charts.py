"""The Runs page's charts: rates on their intervals (not the CRAG score), the confusion map."""

from __future__ import annotations

import pandas as pd

from review.charts.runs import confusion_chart, intervals_chart


def test_rates_with_intervals_leave_out_the_crag_score_and_undefined_rates() -> None:
    summary = pd.DataFrame(
        {
            "metric": ["abstention recall", "false-refusal rate", "CRAG score"],
            "value": [0.8, None, 0.2],
            "low": [0.6, None, None],
            "high": [0.9, None, None],
            "k": [8, 0, None],
            "n": [10, 0, None],
        }
    )
    spec = intervals_chart(summary).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["metric"] for r in rows] == ["abstention recall"]
    rule, point = spec["layer"]
    assert rule["encoding"]["x2"]["field"] == "high" and point["mark"]["type"] == "point"


def test_confusion_map_has_a_cell_per_pair_with_its_count() -> None:
    conf = pd.DataFrame(
        {"answer": [5, 1], "abstain": [2, 7]}, index=pd.Index(["answer", "abstain"], name="gold")
    )
    spec = confusion_chart(conf).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {(r["gold"], r["observed"]): r["cases"] for r in rows} == {
        ("answer", "answer"): 5,
        ("abstain", "answer"): 1,
        ("answer", "abstain"): 2,
        ("abstain", "abstain"): 7,
    }
