"""Sampling maths: allocation, ranks that SQL reproduces, fingerprints, weighted estimates,
stratified splits. Hand-worked numbers, published Wilson intervals, and the databases themselves
(SQLite always, PostgreSQL when its binaries are installed)."""

from __future__ import annotations

import math
import sqlite3
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from review.core.errors import InputError
from review.core.sampling import (
    PRIME,
    allocate,
    assign_splits,
    draw_sample,
    population_fingerprint,
    population_summary,
    population_summary_sql,
    sample_rank,
    sample_rank_sql,
    weighted_estimate,
    wilson_bounds,
    wilson_interval,
)

# --- allocation ------------------------------------------------------------------------------


def test_proportional_allocation_rounds_by_largest_remainder() -> None:
    # quotas 13.07, 6.54, 0.39 -> floors 13, 6, 0; the one seat left goes to b (0.54)
    assert allocate({"a": 100, "b": 50, "c": 3}, 20) == {"a": 13, "b": 7, "c": 0}


def test_equal_allocation_gives_small_strata_everything_and_shares_the_rest() -> None:
    # c holds only 3 of its 6.67 share; the other 17 split 9/8 (tie -> larger stratum)
    assert allocate({"a": 100, "b": 50, "c": 3}, 20, "equal") == {"a": 9, "b": 8, "c": 3}
    assert allocate({"a": 10, "b": 10, "c": 10}, 10, "equal") == {"a": 4, "b": 3, "c": 3}


def test_asking_for_more_than_the_population_takes_everything() -> None:
    sizes = {"a": 100, "b": 5, "c": 0}
    for method in ("proportional", "equal"):
        assert allocate(sizes, 500, method) == sizes


def test_result_does_not_depend_on_the_order_strata_are_listed() -> None:
    one = allocate({"x": 7, "y": 7, "z": 7}, 10)
    two = allocate({"z": 7, "y": 7, "x": 7}, 10)
    assert one == two and list(two) == ["z", "y", "x"]


def test_explicit_sizes_are_checked_against_the_population_and_the_total() -> None:
    sizes = {"false_refusal": 40, "ungrounded": 12}
    assert allocate(sizes, 20, "explicit", {"false_refusal": 10, "ungrounded": 10}) == {
        "false_refusal": 10,
        "ungrounded": 10,
    }
    with pytest.raises(InputError, match="'ungrounded': asks for 15 but the population holds"):
        allocate(sizes, 20, "explicit", {"false_refusal": 5, "ungrounded": 15})
    with pytest.raises(InputError, match="add up to 12, not to the sample size 20"):
        allocate(sizes, 20, "explicit", {"false_refusal": 2, "ungrounded": 10})
    with pytest.raises(InputError, match="unknown strata 'other'"):
        allocate(sizes, 20, "explicit", {"other": 20})
    with pytest.raises(InputError, match="give the sample size"):
        allocate(sizes, 20, "explicit")


def test_bad_allocation_requests_are_refused() -> None:
    with pytest.raises(InputError, match="sample size"):
        allocate({"a": 1}, -1)
    with pytest.raises(InputError, match="stratum 'a'"):
        allocate({"a": -3}, 1)
    with pytest.raises(InputError, match="unknown allocation method"):
        allocate({"a": 1}, 1, "random")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="only used with method 'explicit'"):
        allocate({"a": 1}, 1, "equal", {"a": 1})


strata_sizes = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3), st.integers(0, 500), min_size=1, max_size=8
)


@settings(max_examples=300, deadline=None)
@given(strata_sizes, st.integers(0, 3000), st.sampled_from(["proportional", "equal"]))
def test_allocation_sums_to_the_sample_and_fits_every_stratum(
    sizes: dict[str, int], total: int, method: str
) -> None:
    got = allocate(sizes, total, method)  # type: ignore[arg-type]
    population = sum(sizes.values())
    assert sum(got.values()) == min(total, population)
    assert all(0 <= got[k] <= sizes[k] for k in sizes)
    if method == "proportional" and population:
        target = min(total, population)
        for k, size in sizes.items():
            assert abs(got[k] - Fraction(target * size, population)) < 1
    if method == "equal":
        not_full = [got[k] for k in sizes if got[k] < sizes[k]]
        if not_full:
            assert max(not_full) - min(not_full) <= 1
            # a stratum only gives less than it holds when the others are not larger
            assert all(got[k] <= max(not_full) for k in sizes)


# --- ranks, in Python and in SQL -------------------------------------------------------------


def exact_sql_value(seed: int, row_id: int) -> int:
    """Evaluate the SQL expression with Python's unbounded integers (same precedence rules)."""
    expr = sample_rank_sql(seed, "id").replace("CAST(id AS BIGINT)", str(row_id))
    assert set(expr) <= set("0123456789()*%+ ")
    return int(eval(expr))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**40), st.lists(st.integers(0, 2**62), min_size=1, max_size=20))
def test_numpy_ranks_equal_the_formula_in_exact_arithmetic(seed: int, ids: list[int]) -> None:
    ranks = sample_rank(seed, np.array(ids, dtype=np.int64))
    assert ranks.tolist() == [exact_sql_value(seed, i) for i in ids]
    assert ((ranks >= 0) & (ranks < PRIME)).all()


def test_sqlite_computes_the_same_ranks_and_draws_the_same_sample() -> None:
    rng = np.random.default_rng(3)
    ids = np.unique(np.concatenate([rng.integers(0, 2**31, 3000), [0, 1, PRIME - 1, PRIME, 2**40]]))
    strata = np.array(["false_refusal", "ungrounded", "supported"], dtype=object)[ids % 3]
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE traces (id INTEGER PRIMARY KEY, stratum TEXT)")
    con.executemany(
        "INSERT INTO traces VALUES (?, ?)",
        [(int(i), str(s)) for i, s in zip(ids, strata, strict=True)],
    )
    rank_sql = sample_rank_sql(2025, "id")
    in_sql = [r for (r,) in con.execute(f"SELECT {rank_sql} FROM traces ORDER BY id")]
    assert in_sql == sample_rank(2025, ids).tolist()

    allocation = {"false_refusal": 25, "ungrounded": 10, "supported": 0}
    drawn_sql = {
        row_id
        for (row_id,) in con.execute(
            f"""SELECT id FROM (
                  SELECT id, stratum, ROW_NUMBER() OVER (
                      PARTITION BY stratum ORDER BY {rank_sql}, id) AS pos
                  FROM traces) AS ranked
                WHERE (stratum = 'false_refusal' AND pos <= 25)
                   OR (stratum = 'ungrounded' AND pos <= 10)"""
        )
    }
    drawn = draw_sample(2025, ids, strata, allocation)
    assert set(drawn.tolist()) == drawn_sql and len(drawn) == 35


@pytest.mark.postgres
def test_postgresql_computes_the_same_ranks_and_fingerprint(pg_url: str) -> None:
    ids = [0, 1, 7, 99, 12345, 2_000_000_000, 2_147_483_647]  # int4 column: the cast matters
    eng = create_engine(pg_url)
    try:
        with eng.begin() as c:
            c.execute(text("CREATE TABLE traces (id integer PRIMARY KEY, stratum text)"))
            c.execute(
                text("INSERT INTO traces VALUES (:i, :s)"),
                [{"i": i, "s": "a" if i % 2 else "b"} for i in ids],
            )
            got = c.execute(text(f"SELECT {sample_rank_sql(7, 'id')} FROM traces ORDER BY id"))
            assert [int(r) for (r,) in got] == sample_rank(7, np.array(ids)).tolist()
            rows = c.execute(
                text(f"SELECT stratum, {population_summary_sql('id')} FROM traces GROUP BY 1")
            ).all()
    finally:
        eng.dispose()
    summary = pd.DataFrame(
        rows, columns=["stratum", "count", "min_id", "max_id", "id_sum", "rank_sum"]
    )
    strata = ["a" if i % 2 else "b" for i in ids]
    assert population_fingerprint(summary) == population_fingerprint(
        population_summary(np.array(ids), strata)
    )


def test_distinct_ids_get_distinct_ranks() -> None:
    ids = np.arange(1_000_000, dtype=np.int64)
    assert len(np.unique(sample_rank(11, ids))) == len(ids)


def test_a_seeded_sample_is_spread_evenly_and_other_seeds_draw_other_rows() -> None:
    ids = np.arange(100_000)
    picked = {}
    for seed in (1, 2):
        order = np.lexsort((ids, sample_rank(seed, ids)))
        picked[seed] = ids[order[:10_000]]
        per_decile = np.bincount(picked[seed] // 10_000, minlength=10)
        assert per_decile.min() > 900 and per_decile.max() < 1100
    overlap = len(np.intersect1d(picked[1], picked[2]))
    assert 700 < overlap < 1300  # about 10% of 10,000, as for independent draws
    again = np.lexsort((ids, sample_rank(1, ids)))[:10_000]
    assert (ids[again] == picked[1]).all()


def test_rank_inputs_are_checked() -> None:
    with pytest.raises(InputError, match=">= 0"):
        sample_rank(1, np.array([3, -1]))
    with pytest.raises(InputError, match="whole numbers"):
        sample_rank(1, np.array([1.5]))
    with pytest.raises(InputError, match="not a plain SQL identifier"):
        sample_rank_sql(1, "id); DROP TABLE traces; --")
    assert sample_rank_sql(1, "traces.id").count("traces.id") == 9
    with pytest.raises(InputError, match="holds only 2 rows"):
        draw_sample(1, [1, 2, 3], ["a", "a", "b"], {"a": 3})


# --- population fingerprint ------------------------------------------------------------------


def fp(ids: list[int], strata: list[str]) -> str:
    return population_fingerprint(population_summary(np.array(ids), strata))


def test_fingerprint_is_stable_for_the_same_population() -> None:
    ids, strata = [4, 9, 1, 16], ["x", "y", "x", "y"]
    assert fp(ids, strata) == fp(ids[::-1], strata[::-1])
    summary = population_summary(np.array(ids), strata)
    as_records = summary.iloc[::-1].to_dict("records")
    assert population_fingerprint(as_records) == fp(ids, strata)
    # a stratum with no rows is the same population
    empty = pd.DataFrame([["z", 0, 0, 0, 0, 0]], columns=summary.columns)
    assert population_fingerprint(pd.concat([summary, empty])) == fp(ids, strata)


def test_fingerprint_detects_changes_to_the_population() -> None:
    base = fp([1, 4, 7, 10], ["s"] * 4)
    assert fp([1, 4, 7], ["s"] * 3) != base  # a row removed
    assert fp([1, 4, 7, 10, 12], ["s"] * 5) != base  # a row added
    assert fp([1, 4, 7, 10], ["s", "s", "t", "s"]) != base  # a row moved to another stratum
    # same count, min, max and id sum (1+5+6+10 == 1+4+7+10): caught by the rank sum
    assert fp([1, 5, 6, 10], ["s"] * 4) != base


def test_fingerprint_refuses_a_malformed_summary() -> None:
    with pytest.raises(InputError, match="missing column"):
        population_fingerprint(pd.DataFrame({"stratum": ["a"], "count": [3]}))
    bad = population_summary(np.array([1, 2]), ["a", "a"]).assign(id_sum=2.5)
    with pytest.raises(InputError, match=r"row 1 \(id_sum\): not a whole number"):
        population_fingerprint(bad)


# --- estimates -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    # Newcombe (1998), Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score)
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_published_values(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(k, n)
    assert got is not None
    assert round(got[0], 4) == lo and round(got[1], 4) == hi


def test_wilson_interval_of_nothing_is_undefined() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(InputError):
        wilson_interval(5, 3)


def strata_frame(rows: list[tuple[str, int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["stratum", "population", "sample", "successes"])


def test_stratified_estimate_hand_worked() -> None:
    # A: N=800, n=40, k=4 (p=0.1, W=0.8); B: N=200, n=20, k=10 (p=0.5, W=0.2)
    # p = 0.8*0.1 + 0.2*0.5 = 0.18
    # Cochran: s_h^2 = n_h/(n_h-1) p_h(1-p_h); var = sum W_h^2 (1 - n_h/N_h) s_h^2 / n_h
    var = (
        0.64 * (1 - 40 / 800) * (40 / 39 * 0.09) / 40
        + 0.04 * (1 - 20 / 200) * (20 / 19 * 0.25) / 20
    )
    est = weighted_estimate(strata_frame([("A", 800, 40, 4), ("B", 200, 20, 10)]))
    assert est.estimate == pytest.approx(0.18)
    assert est.std_error == pytest.approx(math.sqrt(var))
    # Wilson on the effective sample size p(1-p)/var
    n_eff = 0.18 * 0.82 / var
    assert n_eff == pytest.approx(78.65, abs=0.01)
    lo, hi = wilson_bounds(0.18 * n_eff, n_eff, 1.959963984540054)
    assert est.lo == pytest.approx(float(lo)) and est.hi == pytest.approx(float(hi))
    assert est.as_tuple() == (est.estimate, est.lo, est.hi)
    # the unweighted rate over-counts the small, error-heavy stratum
    assert est.raw.rate == pytest.approx(14 / 60)
    assert (est.raw.lo, est.raw.hi) == wilson_interval(14, 60)
    assert est.population == 1000 and est.sample == 60 and est.unsampled_share == 0
    assert est.single_item_strata == ()


def test_fully_audited_strata_carry_no_sampling_error() -> None:
    est = weighted_estimate(strata_frame([("A", 30, 30, 3), ("B", 10, 10, 5)]))
    assert est.estimate == pytest.approx(0.8 * 0 + 0.75 * 0.1 + 0.25 * 0.5)
    assert est.std_error == 0 and est.lo == est.hi == est.estimate


def test_proportional_sample_estimate_equals_the_raw_rate() -> None:
    est = weighted_estimate(strata_frame([("A", 500, 50, 5), ("B", 300, 30, 12)]))
    assert est.estimate == pytest.approx(est.raw.rate)


def test_interval_stays_in_zero_one_and_honest_at_zero_and_n() -> None:
    est = weighted_estimate(strata_frame([("A", 1000, 3, 0), ("B", 1000, 3, 1)]))
    assert est.lo is not None and est.hi is not None and 0 <= est.lo < est.hi < 1
    # 0 of 44 audited: not a 0.0-0.0 interval, but [0, Wilson's upper bound for 0 of 44]
    none = weighted_estimate(strata_frame([("A", 1000, 30, 0), ("B", 500, 14, 0)]))
    assert none.estimate == 0 and none.lo == 0
    assert none.hi == pytest.approx(1.959963984540054**2 / (44 + 1.959963984540054**2))
    every = weighted_estimate(strata_frame([("A", 1000, 30, 30), ("B", 500, 14, 14)]))
    assert every.hi == 1 and every.lo is not None and every.lo < 0.95


def test_a_stratum_with_one_audited_item_is_flagged_and_not_certain() -> None:
    # the case of the issue: an estimate of 2.7% from one failing item in a small stratum
    # and clean larger strata used to show a zero-width interval
    strata = [("A", 3000, 40, 0), ("B", 2000, 30, 0), ("C", 140, 1, 1)]
    est = weighted_estimate(strata_frame(strata))
    assert est.estimate == pytest.approx(140 / 5140)
    assert est.single_item_strata == ("C",)
    w = 140 / 5140
    assert est.std_error == pytest.approx(math.sqrt(w**2 * (1 - 1 / 140) * 0.25))
    assert est.lo is not None and est.hi is not None and est.hi - est.lo > 0.01


def test_wilson_defaults_to_the_exact_quantile() -> None:
    lo, hi = wilson_bounds(3, 10)
    exact = wilson_interval(3, 10, 0.95)
    assert exact is not None and (float(lo), float(hi)) == exact


def test_unsampled_stratum_is_reported_not_hidden() -> None:
    est = weighted_estimate(strata_frame([("A", 900, 30, 3), ("B", 100, 0, 0)]))
    assert est.unsampled_share == pytest.approx(0.1)
    assert est.estimate == pytest.approx(0.1)
    nothing = weighted_estimate(strata_frame([("A", 900, 0, 0)]))
    assert nothing.estimate is None and nothing.raw.rate is None


def test_impossible_audit_counts_are_refused_with_the_stratum() -> None:
    with pytest.raises(InputError, match="'B': sample 30 is larger than its population 20"):
        weighted_estimate(strata_frame([("A", 100, 10, 1), ("B", 20, 30, 1)]))
    with pytest.raises(InputError, match="'A': successes 11 exceed the sample 10"):
        weighted_estimate(strata_frame([("A", 100, 10, 11)]))
    with pytest.raises(InputError, match="'A': population must be a whole number"):
        weighted_estimate(strata_frame([("A", -5, 0, 0)]))
    with pytest.raises(InputError, match="missing column"):
        weighted_estimate(pd.DataFrame({"stratum": ["A"]}))


# --- splits ----------------------------------------------------------------------------------


def cases(n_a: int, n_b: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"item": np.arange(n_a + n_b), "stratum": ["near_miss"] * n_a + ["in_scope"] * n_b}
    )


def test_splits_follow_the_fractions_within_each_stratum() -> None:
    df = cases(25, 75)
    split = assign_splits(df, seed=1)
    counts = pd.crosstab(df["stratum"], split)
    # 25 -> 10, 7.5, 7.5 -> 10/8/7 (tie to the split listed first); 75 -> 30/23/22
    assert counts.loc["near_miss"].to_dict() == {"train": 10, "validation": 8, "test": 7}
    assert counts.loc["in_scope"].to_dict() == {"train": 30, "validation": 23, "test": 22}
    assert split.name == "split" and split.index.equals(df.index)


def test_splits_are_reproducible_and_change_with_the_seed() -> None:
    df = cases(40, 60)
    one, again, other = (
        assign_splits(df, seed=9),
        assign_splits(df, seed=9),
        assign_splits(df, seed=10),
    )
    assert one.equals(again)
    assert not one.equals(other)
    assert pd.crosstab(df["stratum"], one).equals(pd.crosstab(df["stratum"], other))
    shuffled = df.sample(frac=1, random_state=0)
    assert assign_splits(shuffled, seed=9).sort_index().equals(one)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=60),
    st.integers(0, 10**6),
    st.sampled_from([{"train": 0.4, "validation": 0.3, "test": 0.3}, {"dev": 0.5, "test": 0.5}]),
)
def test_every_stratum_gets_its_largest_remainder_share(
    strata: list[str], seed: int, fractions: dict[str, float]
) -> None:
    df = pd.DataFrame({"item": range(len(strata)), "stratum": strata})
    split = assign_splits(df, fractions, seed)
    for _name, group in split.groupby(df["stratum"]):
        n = len(group)
        for name, f in fractions.items():
            assert abs(int((group == name).sum()) - f * n) < 1


def test_text_ids_and_several_stratum_columns() -> None:
    df = pd.DataFrame(
        {
            "item": [f"CASE-{i:03d}" for i in range(40)],
            "category": ["near_miss", "in_scope"] * 20,
            "slice": ["temporal_mismatch"] * 20 + ["entity_collision"] * 20,
        }
    )
    split = assign_splits(df, {"validation": 0.5, "test": 0.5}, 3, strata=["category", "slice"])
    counts = pd.crosstab([df["category"], df["slice"]], split)
    assert (counts == 5).all().all()
    assert split.equals(
        assign_splits(df, {"validation": 0.5, "test": 0.5}, 3, strata=["category", "slice"])
    )


def test_without_strata_the_whole_set_follows_the_fractions() -> None:
    df = pd.DataFrame({"item": range(10)})
    split = assign_splits(df, {"train": 0.5, "test": 0.5}, 1, strata=())
    assert split.value_counts().to_dict() == {"train": 5, "test": 5}


def test_new_cases_fill_the_splits_without_moving_existing_ones() -> None:
    df = cases(20, 0)
    first = assign_splits(df, seed=5)
    grown = cases(30, 0)
    existing = pd.Series(list(first) + [None] * 10, index=grown.index)
    second = assign_splits(grown, seed=5, existing=existing)
    assert second.iloc[:20].equals(first.rename("split"))
    assert second.value_counts().to_dict() == {"train": 12, "validation": 9, "test": 9}
    # existing assignments far from the fractions: new items go where the deficit is
    lopsided = pd.Series(["train"] * 10 + [None] * 10, index=df.index)
    filled = assign_splits(df, seed=5, existing=lopsided)
    assert (filled.iloc[:10] == "train").all()
    assert filled.iloc[10:].value_counts().to_dict() == {"validation": 5, "test": 5}


def test_bad_split_requests_are_refused() -> None:
    df = cases(3, 3)
    with pytest.raises(InputError, match="add up to 1"):
        assign_splits(df, {"train": 0.5, "test": 0.4})
    with pytest.raises(InputError, match="'test': must be a number"):
        assign_splits(df, {"train": 1.5, "test": -0.5})
    with pytest.raises(InputError, match="appears more than once"):
        assign_splits(pd.DataFrame({"item": [1, 1], "stratum": ["a", "a"]}))
    with pytest.raises(InputError, match="missing column"):
        assign_splits(df.drop(columns="stratum"))
    with pytest.raises(InputError, match="unknown split"):
        assign_splits(df, existing=pd.Series(["holdout"] + [None] * 5, index=df.index))
