"""Agreement statistics: against scikit-learn, Krippendorff's published examples, and a
direct (slow) coincidence-matrix reference; tables and queues as the labeling page shows them."""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.labels.agreement import (
    TABLE_COLUMNS,
    agreement_table,
    cohen_kappa,
    confusion_pairs,
    disagreements,
    krippendorff_alpha_nominal,
    raw_agreement,
    reason_code_presence,
    reason_code_tables,
)


def long(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """Reliability data (annotator -> values per item, None = not labelled) as a long table."""
    rows = [
        (item, who, value)
        for who, values in columns.items()
        for item, value in enumerate(values, start=1)
        if value is not None
    ]
    return pd.DataFrame(rows, columns=["item", "annotator", "value"])


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": nominal data, four
# observers, twelve units, missing values; published nominal alpha = 0.743.
KRIPP_4 = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}
# Same paper: binary data, two observers, ten units, no missing values; alpha = 0.095.
KRIPP_2 = {
    "Mary": [0, 1, 0, 0, 0, 0, 0, 0, 1, 0],
    "Dave": [1, 1, 1, 0, 0, 1, 0, 0, 0, 0],
}


def reference_alpha(df: pd.DataFrame) -> float | None:
    """Alpha straight from the definition: coincidence matrix, D_o and D_e, with loops."""
    by_unit: dict[Any, list[Any]] = {}
    for it, _who, value in df.itertuples(index=False):
        by_unit.setdefault(it, []).append(value)
    coincidence: dict[tuple[Any, Any], float] = {}
    for values in by_unit.values():
        m = len(values)
        if m < 2:
            continue
        for i, j in itertools.permutations(range(m), 2):
            key = (values[i], values[j])
            coincidence[key] = coincidence.get(key, 0.0) + 1 / (m - 1)
    n_c: dict[Any, float] = {}
    for (c, _k), w in coincidence.items():
        n_c[c] = n_c.get(c, 0.0) + w
    n = sum(n_c.values())
    if n == 0:
        return None
    d_o = sum(w for (c, k), w in coincidence.items() if c != k) / n
    d_e = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k) / (n * (n - 1))
    if d_e == 0:
        return None
    return 1 - d_o / d_e


def sklearn_kappa(a: list[Any], b: list[Any]) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(a, b))


# --- Krippendorff's alpha --------------------------------------------------------------------


def test_alpha_matches_the_published_four_observer_example_with_missing_labels() -> None:
    df = long(KRIPP_4)
    alpha = krippendorff_alpha_nominal(df)
    assert alpha is not None
    assert round(alpha, 3) == 0.743
    assert alpha == pytest.approx(reference_alpha(df))


def test_alpha_matches_the_published_two_observer_binary_example() -> None:
    alpha = krippendorff_alpha_nominal(long(KRIPP_2))
    assert alpha is not None
    assert round(alpha, 3) == 0.095
    assert alpha == pytest.approx(1 - 19 * 4 / (14 * 6))  # 1 - (n-1) o_01 / (n_0 n_1)


def test_alpha_drops_items_with_a_single_label() -> None:
    df = long(KRIPP_4)
    with_extra = pd.concat(
        [df, pd.DataFrame([(99, "A", 7), (100, "B", 1)], columns=df.columns)],
        ignore_index=True,
    )
    assert krippendorff_alpha_nominal(with_extra) == pytest.approx(krippendorff_alpha_nominal(df))


def test_alpha_is_undefined_not_invented_when_there_is_no_variation() -> None:
    same = long({"A": ["abstain"] * 4, "B": ["abstain"] * 4})
    assert krippendorff_alpha_nominal(same) is None
    nothing_pairable = long({"A": ["answer", None], "B": [None, "abstain"]})
    assert krippendorff_alpha_nominal(nothing_pairable) is None
    assert raw_agreement(nothing_pairable) is None
    empty = pd.DataFrame(columns=["item", "annotator", "value"])
    assert krippendorff_alpha_nominal(empty) is None


def test_perfect_agreement_with_variation_gives_alpha_one() -> None:
    df = long({"A": ["answer", "abstain", "clarify"], "B": ["answer", "abstain", "clarify"]})
    assert krippendorff_alpha_nominal(df) == pytest.approx(1.0)
    assert raw_agreement(df) == 1.0


labels_strategy = st.lists(
    st.lists(st.one_of(st.none(), st.sampled_from("xyz")), min_size=3, max_size=3),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(labels_strategy)
def test_alpha_equals_the_definition_on_random_reliability_data(rows: list[list[Any]]) -> None:
    df = long({who: [r[i] for r in rows] for i, who in enumerate(["a1", "a2", "a3"])})
    expected = reference_alpha(df)
    got = krippendorff_alpha_nominal(df)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(labels_strategy)
def test_alpha_does_not_depend_on_the_names_of_values_or_annotators(
    rows: list[list[Any]],
) -> None:
    df = long({who: [r[i] for r in rows] for i, who in enumerate(["a1", "a2", "a3"])})
    renamed = df.assign(
        value=df["value"].map({"x": "clarify", "y": "answer", "z": "abstain"}),
        annotator=df["annotator"].map({"a1": "zoe", "a2": "ann", "a3": "max"}),
    )
    a, b = krippendorff_alpha_nominal(df), krippendorff_alpha_nominal(renamed)
    assert (a is None and b is None) or a == pytest.approx(b)


# --- Cohen's kappa ---------------------------------------------------------------------------


def test_kappa_hand_worked_two_by_two() -> None:
    # 50 items: both yes 20, A yes / B no 5, A no / B yes 10, both no 15.
    # p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, b) == pytest.approx(sklearn_kappa(a, b))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["answer", "abstain", "clarify", "partial", "escalate"]),
            st.sampled_from(["answer", "abstain", "clarify", "partial", "escalate"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_kappa_matches_sklearn_wherever_sklearn_defines_it(pairs: list[tuple[str, str]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    ours, theirs = cohen_kappa(a, b), sklearn_kappa(a, b)
    if math.isnan(theirs):
        assert ours is None
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)
        assert cohen_kappa(b, a) == pytest.approx(ours)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_kappa_on_reason_code_booleans_matches_sklearn(pairs: list[tuple[bool, bool]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    ours, theirs = cohen_kappa(a, b), sklearn_kappa(a, b)
    assert (ours is None) == math.isnan(theirs)
    if ours is not None:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_kappa_is_undefined_when_both_raters_use_one_and_the_same_value() -> None:
    assert cohen_kappa(["abstain"] * 5, ["abstain"] * 5) is None
    assert cohen_kappa([], []) is None
    # constant but different: defined (and zero), as in scikit-learn
    assert cohen_kappa(["answer"] * 3, ["abstain"] * 3) == 0.0


def test_kappa_skips_positions_where_either_label_is_missing() -> None:
    a = ["answer", None, "abstain", "answer", float("nan")]
    b = ["answer", "abstain", "abstain", "abstain", "answer"]
    kept_a, kept_b = ["answer", "abstain", "answer"], ["answer", "abstain", "abstain"]
    assert cohen_kappa(a, b) == pytest.approx(sklearn_kappa(kept_a, kept_b))


def test_kappa_refuses_lists_of_different_length() -> None:
    with pytest.raises(InputError, match="different lengths"):
        cohen_kappa(["answer", "abstain"], ["answer"])


# --- tables for the labeling page ----------------------------------------------------------


def test_agreement_table_has_one_row_per_pair_and_an_overall_alpha_row() -> None:
    df = long(KRIPP_4)
    table = agreement_table(df, "decision")
    assert list(table.columns) == TABLE_COLUMNS
    pairs = table[table["scope"] == "pair"]
    assert list(zip(pairs["annotator_a"], pairs["annotator_b"], strict=True)) == [
        ("A", "B"),
        ("A", "C"),
        ("A", "D"),
        ("B", "C"),
        ("B", "D"),
        ("C", "D"),
    ]
    # each pair row agrees with sklearn on the items both annotators labelled
    wide = df.pivot(index="item", columns="annotator", values="value")
    for row in pairs.itertuples():
        both = wide[[row.annotator_a, row.annotator_b]].dropna()
        assert row.n_items == len(both)
        assert row.raw_agreement == pytest.approx(
            (both[row.annotator_a] == both[row.annotator_b]).mean()
        )
        expected = sklearn_kappa(list(both[row.annotator_a]), list(both[row.annotator_b]))
        assert row.cohen_kappa == pytest.approx(expected)
    overall = table[table["scope"] == "all"].iloc[0]
    assert overall["n_items"] == 11  # unit 12 has one label only
    assert overall["n_annotators"] == 4
    assert round(overall["krippendorff_alpha"], 3) == 0.743
    assert overall["raw_agreement"] == pytest.approx(raw_agreement(df))
    assert (table["field"] == "decision").all()


def test_raw_agreement_averages_agreeing_pairs_per_item() -> None:
    # item 1: 3 of 3 pairs agree; item 2: 1 of 3 pairs agree; item 3: 0 of 1 pair
    df = long(
        {
            "A": ["answer", "answer", "abstain"],
            "B": ["answer", "answer", "clarify"],
            "C": ["answer", "abstain", None],
        }
    )
    assert raw_agreement(df) == pytest.approx((1 + 1 / 3 + 0) / 3)


def test_table_explains_undefined_statistics_instead_of_showing_a_number() -> None:
    table = agreement_table(long({"A": ["abstain"] * 3, "B": ["abstain"] * 3}), "decision")
    pair, overall = table.iloc[0], table.iloc[1]
    assert math.isnan(pair["cohen_kappa"]) and "undefined" in pair["note"]
    assert pair["raw_agreement"] == 1.0
    assert math.isnan(overall["krippendorff_alpha"]) and "no variation" in overall["note"]
    lonely = agreement_table(long({"A": ["answer", None], "B": [None, "abstain"]}), "decision")
    assert list(lonely["scope"]) == ["all"]
    assert lonely.iloc[0]["n_items"] == 0 and "no item" in lonely.iloc[0]["note"]


def test_second_label_by_the_same_annotator_is_refused_with_the_item() -> None:
    df = pd.DataFrame(
        [(7, "ann", "answer"), (7, "ann", "abstain"), (7, "bob", "answer")],
        columns=["item", "annotator", "value"],
    )
    with pytest.raises(InputError, match="item 7 by 'ann'"):
        agreement_table(df, "decision")


def test_missing_columns_are_named() -> None:
    df = pd.DataFrame({"item": [1], "who": ["ann"], "value": ["answer"]})
    with pytest.raises(InputError, match="'annotator'"):
        krippendorff_alpha_nominal(df)
    assert krippendorff_alpha_nominal(df, annotator="who") is None


# --- reason codes as present/absent --------------------------------------------------------


def test_reason_codes_count_a_label_without_codes_as_absent(tax: Taxonomy) -> None:
    codes = list(tax.reason_codes)
    reasons = pd.DataFrame(
        [
            (1, "ann", "evidence_stale"),
            (1, "bob", "evidence_stale"),
            (2, "ann", "conflicting_evidence"),
            (2, "bob", None),  # bob labelled item 2 with no reason code
            (3, "ann", "false_premise"),
            (3, "bob", "false_premise"),
        ],
        columns=["item", "annotator", "reason_code"],
    )
    presence = reason_code_presence(reasons, codes=codes)
    assert len(presence) == 6 * len(codes)  # 6 submitted labels x every taxonomy code
    conflicting = presence[presence["code"] == "conflicting_evidence"]
    assert conflicting.set_index(["item", "annotator"])["value"].to_dict() == {
        (1, "ann"): False,
        (1, "bob"): False,
        (2, "ann"): True,
        (2, "bob"): False,
        (3, "ann"): False,
        (3, "bob"): False,
    }
    tables = reason_code_tables(reasons, codes=codes)
    assert set(tables["field"]) == set(codes)
    stale = tables[(tables["field"] == "evidence_stale") & (tables["scope"] == "pair")].iloc[0]
    # ann: T F F, bob: T F F -> perfect agreement
    assert stale["raw_agreement"] == 1.0 and stale["cohen_kappa"] == pytest.approx(1.0)
    conf = tables[(tables["field"] == "conflicting_evidence") & (tables["scope"] == "pair")]
    assert conf.iloc[0]["cohen_kappa"] == pytest.approx(
        sklearn_kappa([False, True, False], [False, False, False])
    )
    unused = tables[(tables["field"] == "restricted_topic") & (tables["scope"] == "pair")]
    assert math.isnan(unused.iloc[0]["cohen_kappa"]) and "False" in unused.iloc[0]["note"]


def test_reason_codes_use_the_list_of_submitted_labels_when_given() -> None:
    reasons = pd.DataFrame(
        [(1, "ann", "evidence_stale")], columns=["item", "annotator", "reason_code"]
    )
    labeled = pd.DataFrame([(1, "ann"), (1, "bob")], columns=["item", "annotator"])
    presence = reason_code_presence(reasons, labeled)
    assert presence["value"].tolist() == [True, False]
    stray = pd.DataFrame(
        [(5, "cy", "evidence_stale")], columns=["item", "annotator", "reason_code"]
    )
    with pytest.raises(InputError, match="not submitted"):
        reason_code_presence(stray, labeled)


def test_unknown_reason_code_is_refused(tax: Taxonomy) -> None:
    reasons = pd.DataFrame([(1, "ann", "vibes")], columns=["item", "annotator", "reason_code"])
    with pytest.raises(InputError, match="'vibes'"):
        reason_code_tables(reasons, codes=list(tax.reason_codes))


# --- confusion heatmap and adjudication queue ------------------------------------------------


def test_confusion_pairs_count_every_annotator_pair_once() -> None:
    df = long(KRIPP_4)
    pairs = confusion_pairs(df)
    n_pairs = sum(math.comb(int(m), 2) for m in df.groupby("item").size())
    assert pairs["pairs"].sum() == n_pairs
    # unit 6 (values 1, 2, 3, 4) contributes one pair to each off-diagonal cell among them
    cell = pairs.set_index(["value_a", "value_b"])["pairs"]
    assert cell[(5, 5)] == 3  # unit 10: three observers all said 5
    assert cell[(1, 4)] == 1
    assert (pairs["value_a"] <= pairs["value_b"]).all()


def test_confusion_grid_with_taxonomy_order_lists_zeros_and_can_mirror(tax: Taxonomy) -> None:
    decisions = list(tax.decisions)
    df = long({"A": ["answer", "abstain", "abstain"], "B": ["abstain", "abstain", "clarify"]})
    half = confusion_pairs(df, decisions)
    assert len(half) == len(decisions) * (len(decisions) + 1) // 2
    cell = half.set_index(["value_a", "value_b"])["pairs"]
    assert cell[("answer", "abstain")] == 1  # taxonomy order puts answer first
    assert cell[("abstain", "abstain")] == 1
    assert cell[("abstain", "clarify")] == 1
    assert half["pairs"].sum() == 3
    full = confusion_pairs(df, decisions, mirror=True)
    grid = full.pivot(index="value_a", columns="value_b", values="pairs")
    assert (grid.to_numpy() == grid.to_numpy().T).all()
    with pytest.raises(InputError, match="'maybe'"):
        confusion_pairs(long({"A": ["maybe"], "B": ["answer"]}), decisions)


def test_disagreements_list_the_items_to_adjudicate() -> None:
    assert disagreements(long(KRIPP_4)) == [2, 6, 8]
    assert disagreements(long(KRIPP_2)) == [1, 3, 6, 9]
    assert disagreements(long({"A": ["answer", "answer"], "B": ["answer", None]})) == []


def test_large_label_table_is_handled_in_one_pass() -> None:
    rng = np.random.default_rng(7)
    n_items = 200_000
    truth = rng.integers(0, 5, n_items)
    frames = []
    for who in ("ann", "bob", "cy"):
        noisy = np.where(rng.random(n_items) < 0.2, rng.integers(0, 5, n_items), truth)
        frames.append(pd.DataFrame({"item": np.arange(n_items), "annotator": who, "value": noisy}))
    df = pd.concat(frames, ignore_index=True)
    table = agreement_table(df, "decision")
    assert len(table) == 4
    pair = table.iloc[0]
    a = df[df["annotator"] == "ann"]["value"].to_numpy()
    b = df[df["annotator"] == "bob"]["value"].to_numpy()
    assert pair["cohen_kappa"] == pytest.approx(sklearn_kappa(list(a), list(b)))
    assert 0.5 < table.iloc[3]["krippendorff_alpha"] < 0.8


def test_reason_codes_from_one_row_per_label_with_a_list_of_codes(tax: Taxonomy) -> None:
    # the shape a labels query returns: one row per (case, annotator), codes as a list;
    # exploding it leaves an empty row for a label without codes, which counts as "absent"
    labels = pd.DataFrame(
        {
            "case_id": [1, 1, 2, 2],
            "annotator": ["ann", "bob", "ann", "bob"],
            "reason_codes": [["evidence_stale", "false_premise"], ["evidence_stale"], [], []],
        }
    )
    exploded = labels.explode("reason_codes").rename(columns={"reason_codes": "reason_code"})
    tables = reason_code_tables(exploded, codes=list(tax.reason_codes), item="case_id")
    pair = tables[tables["scope"] == "pair"].set_index("field")
    assert pair.loc["evidence_stale", "raw_agreement"] == 1.0
    assert pair.loc["false_premise", "raw_agreement"] == 0.5  # ann T F, bob F F
    assert (pair["n_items"] == 2).all()


def test_agreement_report_filters_and_groups_like_the_table_it_is_built_from() -> None:
    from review.labels.agreement import agreement_report

    labels = pd.DataFrame(
        {
            "case_id": [1, 1, 2, 2, 3, 3, 4, 4],
            "annotator": ["a", "b"] * 4,
            "decision": [
                "answer",
                "answer",
                "abstain",
                "answer",
                "abstain",
                "abstain",
                "clarify",
                "abstain",
            ],
            "reason_codes": [(), (), ("x",), (), ("x", "y"), ("x",), ("y",), ("y",)],
            "case_category": ["in", "in", "in", "in", "near", "near", "near", "near"],
            "slices": [("s1",), ("s1",), ("s1", "s2"), ("s1", "s2"), ("s2",), ("s2",), (), ()],
        }
    )
    report = agreement_report(labels, ["answer", "abstain", "clarify"], ["x", "y"])
    assert report is not None
    assert (report.cases, report.annotators, report.labels) == (4, 2, 8)
    whole = report.decision[report.decision["scope"] == "all"].iloc[0]
    assert whole["raw_agreement"] == pytest.approx(0.5)  # cases 1 and 3 agree
    assert set(report.reasons["field"]) == {"x", "y"}
    x = report.reasons[(report.reasons["field"] == "x") & (report.reasons["scope"] == "all")].iloc[
        0
    ]
    assert x["raw_agreement"] == pytest.approx(0.75)  # x: case 2 differs (present/absent)
    by_slice = report.groups.set_index("group")
    assert list(by_slice.index) == ["s1", "s2"]
    assert by_slice.loc["s1", "raw agreement"] == pytest.approx(0.5)  # cases 1, 2
    assert by_slice.loc["s2", "raw agreement"] == pytest.approx(0.5)  # cases 2, 3
    by_cat = agreement_report(
        labels, ["answer", "abstain", "clarify"], ["x", "y"], group_by="category"
    )
    assert by_cat is not None
    assert list(by_cat.groups["group"]) == ["in", "near"]
    only = agreement_report(
        labels, ["answer", "abstain", "clarify"], ["x", "y"], slice_="s2", category="near"
    )
    assert only is not None and (only.cases, only.labels) == (1, 2)
    assert agreement_report(labels, ["answer"], ["x", "y"], slice_="nowhere") is None
