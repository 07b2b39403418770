"""Fleiss' kappa: against statsmodels' ``fleiss_kappa`` on generated tables, against the
published example of Fleiss (1971) and a hand-worked one, the generalisation to unequal label
counts against its definition item by item, and "undefined" with the reason, never 0 or 1."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from review.core.errors import InputError
from review.labels.agreement import fleiss_sums, reason_code_fleiss
from review.labels.fleiss import (
    ALL_PAIRABLE,
    FLEISS_COLUMNS,
    FLEISS_EXACT,
    FLEISS_GENERALISED,
    fleiss_from_sums,
    fleiss_kappa_counts,
    fleiss_table,
)

# Fleiss (1971), Table 1: 30 patients, each diagnosed by 6 psychiatrists (of 43) into one of
# five categories (1 depression, 2 personality disorder, 3 schizophrenia, 4 neurosis,
# 5 other); the paper reports kappa = .430. One row per patient: the six diagnoses.
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5],
    [2, 2, 2, 4, 4, 4], [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4],
    [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5], [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4],
    [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5], [3, 3, 3, 3, 3, 5],
    [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4],
    [1, 4, 4, 4, 4, 5], [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
]  # fmt: skip

# The worked example of the Wikipedia article "Fleiss' kappa": 10 items, 14 raters, 5
# categories; P = 0.378, P_e = 0.213, kappa = 0.210.
WIKIPEDIA = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]  # fmt: skip


def counts_of(rows: list[list[int]], k: int) -> np.ndarray:
    """Items x categories counts from one list of labels (category 1..k) per item."""
    return np.array([[row.count(c) for c in range(1, k + 1)] for row in rows])


def long_of(rows: list[list[Any]]) -> pd.DataFrame:
    """A long label table: item i's j-th label given by annotator j."""
    return pd.DataFrame(
        [(i, f"rater {j}", v) for i, row in enumerate(rows) for j, v in enumerate(row)],
        columns=["item", "annotator", "value"],
    )


def test_the_published_example_of_fleiss_1971() -> None:
    f = fleiss_kappa_counts(counts_of(FLEISS_1971, 5))
    assert f.kappa is not None and round(f.kappa, 3) == 0.430
    assert f.kappa == pytest.approx(sm_fleiss_kappa(counts_of(FLEISS_1971, 5)), abs=1e-12)
    assert (f.items, f.left_out, f.counts, f.note) == (30, 0, (6,), "")
    assert f.method == FLEISS_EXACT
    # the same figure from the long table the Agreement page starts from
    assert fleiss_from_sums(fleiss_sums(long_of(FLEISS_1971))).kappa == f.kappa


def test_the_wikipedia_worked_example() -> None:
    f = fleiss_kappa_counts(WIKIPEDIA)
    assert f.observed is not None and f.chance is not None and f.kappa is not None
    assert (round(f.observed, 3), round(f.chance, 3), round(f.kappa, 3)) == (0.378, 0.213, 0.210)


def test_hand_worked_unequal_label_counts() -> None:
    # item 1: a a (P_1 = 1); item 2: a b b (P_2 = 2/6); item 3: one label, left out.
    # P = 2/3; shares per item averaged: a (1 + 1/3)/2 = 2/3, b (0 + 2/3)/2 = 1/3;
    # P_e = 5/9; kappa = (2/3 - 5/9) / (4/9) = 1/4
    f = fleiss_from_sums(fleiss_sums(long_of([["a", "a"], ["a", "b", "b"], ["b"]])))
    assert f.kappa == pytest.approx(0.25, abs=1e-15)
    assert f.observed == pytest.approx(2 / 3) and f.chance == pytest.approx(5 / 9)
    assert (f.items, f.left_out, f.counts) == (2, 1, (2, 3))
    assert f.method == FLEISS_GENERALISED


def direct(rows: list[list[int]]) -> float | None:
    """The generalisation, item by item, as the module doc defines it (the reference)."""
    used = [r for r in rows if sum(r) >= 2]
    if len(used) < 2:
        return None
    observed = sum(
        Fraction(sum(c * (c - 1) for c in r), sum(r) * (sum(r) - 1)) for r in used
    ) / len(used)
    shares = [sum(Fraction(r[j], sum(r)) for r in used) / len(used) for j in range(len(rows[0]))]
    chance = sum(p * p for p in shares)
    if chance == 1:
        return None
    return float((observed - chance) / (1 - chance))


@st.composite
def equal_tables(draw: st.DrawFn) -> list[list[int]]:
    k = draw(st.integers(2, 5))
    m = draw(st.integers(2, 8))
    n = draw(st.integers(2, 25))
    rows = []
    for _ in range(n):
        labels = draw(st.lists(st.integers(0, k - 1), min_size=m, max_size=m))
        rows.append([labels.count(j) for j in range(k)])
    return rows


@settings(max_examples=200, deadline=None)
@given(equal_tables())
def test_equal_label_counts_match_statsmodels(rows: list[list[int]]) -> None:
    f = fleiss_kappa_counts(rows)
    column = np.asarray(rows).sum(axis=0)
    if np.count_nonzero(column) == 1:  # one value only: P_e = 1
        assert f.kappa is None and "one value" in f.note
        return
    assert f.kappa == pytest.approx(sm_fleiss_kappa(np.asarray(rows)), rel=1e-9, abs=1e-12)
    assert f.method == FLEISS_EXACT and f.items == len(rows) and f.left_out == 0


@st.composite
def unequal_tables(draw: st.DrawFn) -> list[list[int]]:
    k = draw(st.integers(2, 4))
    n = draw(st.integers(1, 20))
    # rows with 0 or 1 label are left out (and those with one label counted as left out)
    return [[draw(st.integers(0, 4)) for _ in range(k)] for _ in range(n)]


@settings(max_examples=200, deadline=None)
@given(unequal_tables())
def test_unequal_label_counts_follow_the_definition_item_by_item(rows: list[list[int]]) -> None:
    f = fleiss_kappa_counts(rows)
    want = direct(rows)
    if want is None:
        assert f.kappa is None and f.note
    else:
        assert f.kappa == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert f.items == sum(1 for r in rows if sum(r) >= 2)
    assert f.left_out == sum(1 for r in rows if sum(r) == 1)


def test_undefined_figures_say_why_and_are_never_a_number() -> None:
    nothing = fleiss_kappa_counts([[1, 0], [0, 1]])  # one label each: nothing pairable
    assert nothing.kappa is None and nothing.items == 0 and nothing.left_out == 2
    assert "two annotators" in nothing.note
    one = fleiss_kappa_counts([[1, 1], [1, 0]])  # one item with two labels
    assert one.kappa is None and one.items == 1 and one.left_out == 1
    assert "only one item" in one.note
    same = fleiss_kappa_counts([[3, 0], [3, 0]])  # one value only: P_e = 1
    assert same.kappa is None and same.observed == 1.0 and same.chance == 1.0
    assert "one value" in same.note and "chance agreement 1" in same.note
    with pytest.raises(InputError, match="counts"):
        fleiss_kappa_counts([[1, -1]])


def test_inconsistent_sums_are_refused() -> None:
    with pytest.raises(InputError, match="add up to 3, not 4"):
        fleiss_from_sums([(2, 2, {"a": 3}, 5)])


def test_the_table_shows_each_label_count_beside_the_overall_row() -> None:
    rows = [["a", "a"], ["a", "b"], ["a", "b", "b"], ["b", "b", "b"], ["a"]]
    t = fleiss_table("decision", fleiss_sums(long_of(rows)))
    assert list(t.columns) == FLEISS_COLUMNS
    assert list(t["labels_per_case"]) == [ALL_PAIRABLE, "2", "3"]
    assert list(t["n_items"]) == [4, 2, 2]
    assert list(t["n_left_out"]) == [1, 3, 3]
    assert list(t["method"]) == [FLEISS_GENERALISED, FLEISS_EXACT, FLEISS_EXACT]
    # each label count alone is Fleiss (1971) exactly: statsmodels on those items
    assert t["fleiss_kappa"].iloc[1] == pytest.approx(sm_fleiss_kappa([[2, 0], [1, 1]]))
    assert t["fleiss_kappa"].iloc[2] == pytest.approx(sm_fleiss_kappa([[1, 2], [0, 3]]))
    # one label count: one row, no split
    same_m = fleiss_table("decision", fleiss_sums(long_of(rows[:2])))
    assert list(same_m["labels_per_case"]) == [ALL_PAIRABLE]
    assert same_m["fleiss_kappa"].iloc[0] == pytest.approx(-1 / 3)  # (1/2 - 5/8) / (3/8)
    assert same_m["fleiss_kappa"].iloc[0] == pytest.approx(sm_fleiss_kappa([[2, 0], [1, 1]]))


def test_reason_codes_are_present_or_absent() -> None:
    reasons = pd.DataFrame(
        {
            "item": [1, 1, 2, 2, 3, 3],
            "annotator": ["x", "y", "x", "y", "x", "y"],
            "reason_code": ["evidence_stale", None, "evidence_stale", "evidence_stale", None, None],
        }
    )
    t = reason_code_fleiss(reasons, codes=["evidence_stale", "false_premise"])
    assert list(t["field"]) == ["evidence_stale", "false_premise"]
    # evidence_stale: items (T,F), (T,T), (F,F) -> statsmodels on the present/absent counts
    assert t["fleiss_kappa"].iloc[0] == pytest.approx(sm_fleiss_kappa([[1, 1], [0, 2], [2, 0]]))
    assert math.isnan(t["fleiss_kappa"].iloc[1])  # never given: every label is "absent"
    assert "one value" in t["note"].iloc[1]
