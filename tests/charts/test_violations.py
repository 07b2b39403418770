"""Weekly wording violations: one bar segment per rule and week, weeks without one drawn none."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from review.charts.violations import violations_chart


def test_only_rules_that_were_broken_are_drawn() -> None:
    weekly = pd.DataFrame(
        {
            "week": [dt.date(2025, 6, 2), dt.date(2025, 6, 9)],
            "universal_negative": [2, 0],
            "blames_user": [0, 0],
            "offending": [2, 0],
        }
    )
    spec = violations_chart(weekly, ["universal_negative", "blames_user"]).to_dict()
    rows = next(iter(spec["datasets"].values()))
    # a rule without a title reads humanised, never as its id
    assert [(r["rule"], r["traces"]) for r in rows] == [("Universal negative", 2)]
    assert spec["mark"]["type"] == "bar" and spec["encoding"]["color"]["field"] == "rule"


def test_rules_read_as_their_titles_in_legend_and_tooltip() -> None:
    weekly = pd.DataFrame({"week": [dt.date(2025, 6, 2)], "blames_user": [3], "offending": [3]})
    spec = violations_chart(weekly, ["blames_user"], {"blames_user": "Blames the user"}).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["rule"] for r in rows] == ["Blames the user"]
    assert [t.get("title") for t in spec["encoding"]["tooltip"]][1:] == ["Rule", "Refusals"]
