"""The Runs page's tables read as percentages with intervals and counts, decision states and
groups by their taxonomy labels (issue 17, item 12)."""

from __future__ import annotations

import math

import pandas as pd

from review.core.taxonomy import Taxonomy
from review.evaluation import display


def test_the_summary_reads_rates_with_interval_and_count_and_the_crag_score_as_a_number() -> None:
    summary = pd.DataFrame(
        [
            {"metric": "False-refusal rate", "value": 5 / 13, "k": 5, "n": 13, "low": 0.177,
             "high": 0.641, "over": "cases expecting answer", "note": ""},
            {"metric": "Abstention recall", "value": math.nan, "k": 0, "n": 0, "low": math.nan,
             "high": math.nan, "over": "cases expecting abstain",
             "note": "undefined: no cases expecting abstain"},
            {"metric": "CRAG score", "value": 0.3409090909090909, "k": 15, "n": 44,
             "low": math.nan, "high": math.nan, "over": "cases", "note": ""},
        ]
    )  # fmt: skip
    rows = display.summary_rows(summary)
    values = dict(zip(rows["metric"], rows["value (95% interval)"], strict=True))
    assert values["False-refusal rate"] == "38% (18–64%), 5 of 13"
    assert values["Abstention recall"] == "undefined"
    assert values["CRAG score"] == "0.341 over 44 cases"
    assert "nan" not in rows.to_string().lower()


def test_decision_states_and_groups_read_as_labels(tax: Taxonomy) -> None:
    key = next(iter(tax.decisions))
    recall = pd.DataFrame(
        [{"expected": key, "recall": 0.5, "k": 1, "n": 2, "low": 0.09, "high": 0.91, "note": ""}]
    )
    table = display.recall_table(recall, tax)
    assert table["expected"].iloc[0] == tax.decisions[key].label
    assert table["recall (95% interval)"].iloc[0] == "50% (9–91%), 1 of 2"
    slice_key = next(iter(tax.slices))
    groups = pd.DataFrame({"slices": [slice_key], "cases": [3], "False-refusal rate": [0.25]})
    shown = display.group_table(groups, "slices", tax)
    assert shown["slices"].iloc[0] == tax.slices[slice_key].label
    assert shown["False-refusal rate"].iloc[0] == 0.25  # stays a number, shown in % on the page
    family = pd.DataFrame({"family": ["F1"], "cases": [3]})
    assert display.group_table(family, "family", tax).equals(family)
