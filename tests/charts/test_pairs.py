"""The decision-pairs heat map: one cell per pair of values, counts as colour and label."""

from __future__ import annotations

import pandas as pd
import pytest

from review.charts.pairs import pairs_heatmap


def test_cells_and_labels_over_the_decisions_in_taxonomy_order() -> None:
    pairs = pd.DataFrame(
        {"value_a": ["answer", "abstain"], "value_b": ["abstain", "abstain"], "pairs": [3, 5]}
    )
    spec = pairs_heatmap(pairs, ["answer", "abstain", "clarify"]).to_dict()
    rect, text = spec["layer"]
    assert rect["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    assert rect["encoding"]["x"]["sort"] == ["answer", "abstain", "clarify"]
    assert (
        rect["encoding"]["color"]["field"] == "pairs"
        and text["encoding"]["text"]["field"] == "pairs"
    )
    rows = next(iter(spec["datasets"].values()))
    assert sorted(r["pairs"] for r in rows) == [3, 5]


def test_a_frame_without_counts_is_refused() -> None:
    with pytest.raises(ValueError, match="missing columns"):
        pairs_heatmap(pd.DataFrame({"value_a": [], "value_b": []}), ["answer"])
