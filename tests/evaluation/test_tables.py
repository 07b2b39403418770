"""The Runs page's tables: the list of runs and drift by family (runs oldest first)."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from review.evaluation import evalruns, runmetrics


def test_drift_table_puts_runs_oldest_first() -> None:
    drift = pd.DataFrame(
        {
            "family": ["F1", "F1", "F2", "F2"],
            "run": ["new", "old", "new", "old"],
            "order": [2, 1, 2, 1],
            "decision_accuracy": [0.9, 0.5, 1.0, 0.75],
        }
    )
    table = runmetrics.drift_table(drift, "decision_accuracy")
    assert list(table.columns) == ["family", "old", "new"]
    assert table.set_index("family").loc["F2"].tolist() == [0.75, 1.0]


def test_runs_table_names_every_column() -> None:
    at = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    rows = [evalruns.RunRow(1, "r1", "v1", "import", at, "ines", 12, 6, 1, "")]
    frame = evalruns.runs_frame(rows)
    assert frame.iloc[0].to_dict() == {
        "run": "r1",
        "system version": "v1",
        "source": "import",
        "outputs": 12,
        "cases": 6,
        "infrastructure failures": 1,
        "created": "2025-06-01 00:00 UTC",
        "by": "ines",
    }
    mailed = [evalruns.RunRow(1, "r1", "v1", "import", at, "ines.duarte@x.example", 12, 6, 1, "")]
    named = evalruns.runs_frame(mailed, {"ines.duarte@x.example": "Inês Duarte"})
    assert named["by"].iloc[0] == "Inês Duarte"
