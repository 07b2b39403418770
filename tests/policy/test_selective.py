"""Risk-coverage analysis, threshold sweeps and release gates (their charts: tests/charts).

Selective risk is checked against scikit-learn's precision-recall curve and brute force on data
full of ties, against a hand-worked six-item example, and Wilson intervals against published
values. Refusing everything and answering everything must always fail the demo policy.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from sklearn.metrics import precision_recall_curve

from review.core.errors import InputError
from review.core.sampling import wilson_bounds
from review.policy.policy import Costs, NoAnswerPolicy, load_policy
from review.policy.selective import (
    SWEEP_COLUMNS,
    aurc,
    evaluate_targets,
    metrics_by_slice,
    operating_point,
    risk_coverage,
    sweep,
    sweep_by_slice,
)
from tests.helpers.paths import ROOT

COSTS = Costs(false_refusal=1.0, unsupported_answer=5.0)


@pytest.fixture(scope="module")
def policy() -> NoAnswerPolicy:
    return load_policy(ROOT / "policies" / "no-answer-policy.yaml")


# A hand-worked example: six items, two tied pairs ------------------------------------------------
#
#   score       0.9  0.8  0.8  0.6  0.4  0.4
#   answerable  yes  yes  yes  yes  no   no
#   acceptable  yes  yes  no   yes  no   no
#
# threshold  answered  errors  coverage  risk  false refusals  unsupported  abstention recall
#   inf         0        0       0       NaN        4             0              1
#   0.9         1        0      1/6      0          3             0              1
#   0.8         3        1      1/2     1/3         1             1              1
#   0.6         4        1      2/3     1/4         0             1              1
#   0.4         6        3       1      1/2         0             3              0
# AURC (step rule) = 1/6*0 + 1/3*1/3 + 1/6*1/4 + 1/3*1/2 = 23/72

HAND = pd.DataFrame(
    {
        "score": [0.8, 0.4, 0.9, 0.6, 0.8, 0.4],  # deliberately not sorted
        "answerable": [True, False, True, True, True, False],
        "acceptable": [False, False, True, True, True, False],
    }
)


def test_hand_worked_risk_coverage_curve() -> None:
    curve = risk_coverage(HAND["score"], HAND["acceptable"])
    assert list(curve.columns) == ["threshold", "answered", "coverage", "errors", "selective_risk"]
    assert curve["threshold"].tolist() == [math.inf, 0.9, 0.8, 0.6, 0.4]
    assert curve["answered"].tolist() == [0, 1, 3, 4, 6]
    assert curve["errors"].tolist() == [0, 0, 1, 1, 3]
    np.testing.assert_allclose(curve["coverage"], [0, 1 / 6, 1 / 2, 2 / 3, 1])
    assert math.isnan(curve["selective_risk"].iloc[0])
    np.testing.assert_allclose(curve["selective_risk"].iloc[1:], [0, 1 / 3, 1 / 4, 1 / 2])
    assert aurc(curve) == pytest.approx(23 / 72)


def test_hand_worked_sweep_and_costs() -> None:
    table = sweep(HAND, COSTS).set_index("threshold")
    assert list(table.reset_index().columns) == list(SWEEP_COLUMNS)
    row = table.loc[0.8]
    assert row["answered"] == 3 and row["false_refusals"] == 1 and row["unsupported_answers"] == 1
    assert row["answer_rate_answerable"] == pytest.approx(3 / 4)
    assert row["false_refusal_rate"] == pytest.approx(1 / 4)
    # note 002: no unanswerable item is answered at 0.8; the answerable one answered badly
    # counts in the share of unacceptable answers over all items
    assert row["unsupported_answer_rate"] == 0.0
    assert row["unacceptable_answer_share"] == pytest.approx(1 / 6)
    assert row["abstention_recall"] == 1.0
    assert row["refusal_rate"] == pytest.approx(1 / 2)
    assert row["expected_cost"] == pytest.approx((1 * 1 + 1 * 5) / 6)
    everything = table.loc[0.4]
    assert everything["abstention_recall"] == 0.0 and everything["false_refusal_rate"] == 0.0
    assert everything["unsupported_answer_rate"] == 1.0
    assert everything["expected_cost"] == pytest.approx(3 * 5 / 6)
    nothing = table.loc[math.inf]
    assert nothing["false_refusal_rate"] == 1.0 and nothing["abstention_recall"] == 1.0
    assert nothing["expected_cost"] == pytest.approx(4 / 6)
    assert math.isnan(nothing["selective_risk"]) and math.isnan(nothing["selective_risk_hi"])
    # correct outcomes can carry a cost too
    priced = sweep(HAND, Costs(false_refusal=1, unsupported_answer=5, correct_refusal=0.5))
    assert priced.set_index("threshold").loc[0.8, "expected_cost"] == pytest.approx(
        (1 + 5 + 2 * 0.5) / 6
    )


def test_operating_point_matches_the_sweep_row() -> None:
    point = operating_point(HAND, 0.8, COSTS)
    row = sweep(HAND, COSTS).set_index("threshold").loc[0.8]
    for key in SWEEP_COLUMNS[1:]:
        assert point[key] == pytest.approx(row[key], nan_ok=True), key
    assert (point["n"], point["n_answerable"], point["n_unanswerable"]) == (6, 4, 2)
    # a threshold between two scores answers the same items as the next score up
    assert operating_point(HAND, 0.7, COSTS)["answered"] == 3


def test_nothing_answered_has_undefined_risk_not_zero() -> None:
    point = operating_point(HAND, math.inf, COSTS)
    assert point["answered"] == 0 and point["coverage"] == 0
    assert math.isnan(point["selective_risk"])
    assert math.isnan(point["selective_risk_lo"]) and math.isnan(point["selective_risk_hi"])
    assert point["refusal_rate"] == 1.0
    curve = risk_coverage([0.2, 0.1], [True, False])
    assert math.isnan(curve["selective_risk"].iloc[0])
    assert not (curve["selective_risk"] == 0).iloc[0]


# Against scikit-learn and brute force ------------------------------------------------------------

tied_data = st.integers(min_value=2, max_value=80).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 6), min_size=n, max_size=n),  # few values: many ties
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(tied_data)
def test_selective_risk_is_one_minus_sklearn_precision(data: tuple[list[int], list[bool]]) -> None:
    raw, acceptable = data
    assume(any(acceptable))  # sklearn's curve needs one positive
    score = np.asarray(raw, dtype=float) / 4.0
    y = np.asarray(acceptable)
    curve = risk_coverage(score, y)
    by_threshold = curve.set_index("threshold")
    precision, _, thresholds = precision_recall_curve(y, score)
    assert len(thresholds) > 0
    for p, t in zip(precision[:-1], thresholds, strict=True):
        assert by_threshold.loc[t, "selective_risk"] == pytest.approx(1 - p)
    # and one row per distinct score, each equal to the brute-force error rate
    distinct = np.unique(score)[::-1]
    assert curve["threshold"].iloc[1:].tolist() == distinct.tolist()
    for t in distinct:
        answered = score >= t
        assert by_threshold.loc[t, "answered"] == answered.sum()
        assert by_threshold.loc[t, "selective_risk"] == pytest.approx(np.mean(~y[answered]))


outcome_rows = st.lists(
    st.tuples(st.integers(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=60
)


def _outcomes(rows: list[tuple[int, bool, bool]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "score": [r[0] / 5 for r in rows],
            "answerable": [r[1] for r in rows],
            "acceptable": [r[1] and r[2] for r in rows],
        }
    )


@settings(max_examples=150, deadline=None)
@given(outcome_rows)
def test_sweep_rows_equal_brute_force_counts(rows: list[tuple[int, bool, bool]]) -> None:
    frame = _outcomes(rows)
    table = sweep(frame, COSTS)
    s = frame["score"].to_numpy()
    ans = frame["answerable"].to_numpy()
    acc = frame["acceptable"].to_numpy()
    assert table["coverage"].is_monotonic_increasing
    for _, row in table.iterrows():
        answered = s >= row["threshold"]
        fr = int((ans & ~answered).sum())
        ua = int((answered & ~acc).sum())
        assert row["answered"] == answered.sum()
        assert row["false_refusals"] == fr and row["unsupported_answers"] == ua
        assert row["unacceptable_answer_share"] == pytest.approx(ua / len(s))
        # note 002: answers where abstention was required, over those cases
        if (~ans).any():
            assert row["unsupported_answer_rate"] == pytest.approx(
                (answered & ~ans).sum() / (~ans).sum()
            )
        else:
            assert math.isnan(row["unsupported_answer_rate"])
        if ans.any():
            assert row["false_refusal_rate"] == pytest.approx(fr / ans.sum())
        else:
            assert math.isnan(row["false_refusal_rate"])
        if (~ans).any():
            assert row["abstention_recall"] == pytest.approx(
                (~answered & ~ans).sum() / (~ans).sum()
            )
        assert row["expected_cost"] == pytest.approx((fr * 1 + ua * 5) / len(s))


# Zeros of both signs, negatives and ties; each row: score, answerable, acceptable if answerable,
# expects abstain if not answerable
signed_rows = st.lists(
    st.tuples(
        st.sampled_from([-0.5, -0.0, 0.0, 0.25, 0.5, 1.0]),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=60,
)
PRICED = Costs(false_refusal=1.0, unsupported_answer=5.0, correct_refusal=0.5, correct_answer=0.25)


def _last_of_each_score(score: np.ndarray) -> list[float]:
    """+inf, then each distinct score from the highest, as the last item holding it (in input
    order) has it: a tie of 0.0 and -0.0 keeps that item's sign."""
    distinct = sorted(set(score.tolist()), reverse=True)  # 0.0 and -0.0 are one value
    last = [max(i for i in range(len(score)) if score[i] == t) for t in distinct]
    return [math.inf, *(float(score[i]) for i in last)]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (
        a == b and math.copysign(1, a) == math.copysign(1, b)
    )


@settings(max_examples=200, deadline=None)
@given(signed_rows, st.booleans())
@example([(0.5, True, True, False)], False)  # one item
@example([(0.25, True, False, False)] * 5 + [(0.25, False, False, True)] * 3, True)  # all tied
@example([(0.0, True, True, False), (-0.0, False, False, True), (0.0, True, False, False)], True)
@example([(-0.0, True, True, False), (0.0, False, False, True), (-0.0, False, False, False)], False)
def test_sweep_and_curve_equal_the_straightforward_count_at_each_threshold(
    rows: list[tuple[float, bool, bool, bool]], says_abstain: bool
) -> None:
    """The one sort and cumulative sums of the sweep and the risk-coverage curve against the
    items counted at each threshold one by one (operating_point), equal to the last bit."""
    frame = pd.DataFrame(
        {
            "score": [r[0] for r in rows],
            "answerable": [r[1] for r in rows],
            "acceptable": [r[1] and r[2] for r in rows],
        }
    )
    if says_abstain:
        frame["expects_abstain"] = [not r[1] and r[3] for r in rows]
    score = frame["score"].to_numpy()
    acceptable = frame["acceptable"].to_numpy()
    thresholds = _last_of_each_score(score)

    table = sweep(frame, PRICED)
    assert list(table.columns) == list(SWEEP_COLUMNS)
    assert all(_same(a, b) for a, b in zip(table["threshold"], thresholds, strict=True))
    for name in ("answered", "false_refusals", "unsupported_answers", "correct_refusals"):
        assert table[name].dtype == np.int64, name
    assert table["correct_answers"].dtype == np.int64
    for row in table.to_dict("records"):
        point = operating_point(frame, row["threshold"], PRICED)
        for key in SWEEP_COLUMNS[1:]:
            assert _same(float(row[key]), point[key]), (row["threshold"], key)

    curve = risk_coverage(frame["score"], frame["acceptable"])
    assert all(_same(a, b) for a, b in zip(curve["threshold"], thresholds, strict=True))
    for row in curve.to_dict("records"):
        answered = score >= row["threshold"]
        count, errors = int(answered.sum()), int((answered & ~acceptable).sum())
        assert (row["answered"], row["errors"]) == (count, errors)
        assert row["coverage"] == count / len(score)
        assert _same(row["selective_risk"], errors / count if count else math.nan)


def test_a_missing_or_infinite_score_is_refused_where_it_is() -> None:
    for bad in (float("nan"), float("inf")):
        frame = HAND.assign(score=[0.8, 0.4, bad, 0.6, bad, 0.4])
        with pytest.raises(
            InputError,
            match=r"^outcomes\.score: 2 values are missing or not finite \(first at position 2",
        ):
            sweep(frame, COSTS)
        with pytest.raises(InputError, match=r"^score: 2 values are .* \(first at position 2\)"):
            risk_coverage(frame["score"].to_numpy(), frame["acceptable"])
        with pytest.raises(InputError, match=r"^score: 2 values are .* \(first at position 2\)"):
            risk_coverage(frame["score"].astype(object), frame["acceptable"])


def test_aurc_without_ties_is_the_mean_risk_over_items() -> None:
    rng = np.random.default_rng(3)
    score = rng.permutation(200).astype(float)
    ok = rng.random(200) < 0.7
    order = np.argsort(-score)
    running = np.cumsum(~ok[order]) / np.arange(1, 201)
    assert aurc(risk_coverage(score, ok)) == pytest.approx(running.mean())
    # a score that ranks every acceptable item first beats one that ranks them last
    best = aurc(risk_coverage(ok.astype(float), ok))
    worst = aurc(risk_coverage((~ok).astype(float), ok))
    assert best < aurc(risk_coverage(score, ok)) < worst


# Wilson intervals --------------------------------------------------------------------------------


def test_wilson_matches_published_values() -> None:
    lo, hi = wilson_bounds([0, 5, 10], [10, 10, 10])
    assert lo[0] == 0.0 and hi[0] == pytest.approx(0.2775, abs=1e-4)
    assert (lo[1], hi[1]) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert lo[2] == pytest.approx(0.7225, abs=1e-4) and hi[2] == 1.0
    # 81 of 263, worked by hand from the score-interval formula: about (0.2553, 0.3662)
    lo1, hi1 = wilson_bounds(81, 263)
    assert float(lo1) == pytest.approx(0.2553, abs=1e-3)
    assert float(hi1) == pytest.approx(0.3662, abs=1e-3)


def test_wilson_is_vectorised_and_undefined_for_no_trials() -> None:
    k = np.array([[0, 1], [2, 0]])
    n = np.array([[0, 4], [9, 3]])
    lo, hi = wilson_bounds(k, n)
    assert lo.shape == (2, 2) and hi.shape == (2, 2)
    assert math.isnan(lo[0, 0]) and math.isnan(hi[0, 0])
    assert np.all(lo[~np.isnan(lo)] <= (k / np.where(n == 0, 1, n))[~np.isnan(lo)])
    lo99, hi99 = wilson_bounds(5, 10, z=2.576)
    lo95, hi95 = wilson_bounds(5, 10)
    assert lo99 < lo95 and hi99 > hi95
    with pytest.raises(InputError, match="0 <= k <= n"):
        wilson_bounds(5, 4)
    with pytest.raises(InputError, match="z must be"):
        wilson_bounds(1, 4, z=0)


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_observed_rate(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = wilson_bounds(k, n)
    if n == 0:
        assert math.isnan(float(lo)) and math.isnan(float(hi))
    else:
        assert 0.0 <= float(lo) <= k / n <= float(hi) <= 1.0


# Bad input ---------------------------------------------------------------------------------------


def test_bad_input_is_refused_with_a_reason() -> None:
    with pytest.raises(InputError, match="not finite"):
        risk_coverage([0.1, float("nan")], [True, False])
    with pytest.raises(InputError, match="3 items but acceptable has 2"):
        risk_coverage([0.1, 0.2, 0.3], [True, False])
    with pytest.raises(InputError, match="no items"):
        risk_coverage([], [])
    with pytest.raises(InputError, match="acceptable"):
        risk_coverage([0.1, 0.2], ["yes", "no"])
    with pytest.raises(InputError, match="missing column"):
        sweep(HAND.drop(columns="answerable"), COSTS)
    contradiction = HAND.assign(acceptable=[True] * 6)
    with pytest.raises(InputError, match=r"2 items are marked acceptable.*not answerable"):
        sweep(contradiction, COSTS)
    with pytest.raises(InputError, match="no true/false"):
        sweep(HAND.assign(answerable=[True, None, True, True, True, False]), COSTS)
    with pytest.raises(InputError, match="threshold must be a number"):
        operating_point(HAND, float("nan"), COSTS)


# Scale -------------------------------------------------------------------------------------------


def test_a_million_rows_with_ties() -> None:
    rng = np.random.default_rng(11)
    n = 1_000_000
    score = rng.integers(0, 5_000, n) / 5_000.0
    answerable = rng.random(n) < 0.7
    acceptable = answerable & (rng.random(n) < score)
    curve = risk_coverage(score, acceptable)
    assert len(curve) == len(np.unique(score)) + 1
    assert curve["coverage"].iloc[-1] == 1.0 and curve["answered"].iloc[-1] == n
    assert curve["coverage"].is_monotonic_increasing
    assert curve["selective_risk"].iloc[-1] == pytest.approx(np.mean(~acceptable))
    table = sweep(
        pd.DataFrame({"score": score, "answerable": answerable, "acceptable": acceptable}), COSTS
    )
    assert len(table) == len(curve)
    np.testing.assert_allclose(table["selective_risk"].iloc[1:], curve["selective_risk"].iloc[1:])
    assert table["false_refusal_rate"].is_monotonic_decreasing
    assert table["abstention_recall"].is_monotonic_decreasing


# Release gate ------------------------------------------------------------------------------------

SLICE_KEYS = ["near_neighbour_distractor", "temporal_mismatch", "access_filtered_answer", None]


def _with_slices(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return frame.assign(slice=[SLICE_KEYS[i] for i in rng.integers(0, 4, len(frame))])


@settings(max_examples=100, deadline=None)
@given(outcome_rows)
def test_refusing_or_answering_everything_never_passes(
    policy: NoAnswerPolicy, rows: list[tuple[int, bool, bool]]
) -> None:
    frame = _with_slices(_outcomes(rows), len(rows))
    for threshold in (math.inf, -math.inf):
        overall = operating_point(frame, threshold, policy.costs)
        per_slice = metrics_by_slice(frame, threshold, policy.costs)
        results = evaluate_targets(policy, overall, per_slice)
        assert not all(r.passed for r in results)
        failed = {r.name for r in results if not r.passed and r.scope == "overall"}
        if threshold == math.inf:
            assert "min_answer_rate_answerable" in failed
        else:
            assert "min_abstention_recall" in failed


def test_a_good_operating_point_passes_every_gate(policy: NoAnswerPolicy) -> None:
    # 30 answerable (27 answered correctly above 0.6, 3 refused), 10 unanswerable, all refused
    frame = pd.DataFrame(
        {
            "score": [0.9] * 27 + [0.3] * 3 + [0.2] * 10,
            "answerable": [True] * 30 + [False] * 10,
            "acceptable": [True] * 30 + [False] * 10,
            "slice": (["near_neighbour_distractor"] * 15 + [["temporal_mismatch"]] * 15)
            + [
                ["near_neighbour_distractor", "access_filtered_answer"],
                "temporal_mismatch",
                "adversarial_instruction",
            ]
            * 3
            + ["temporal_mismatch"],
        }
    )
    overall = operating_point(frame, 0.6, policy.costs)
    assert overall["answer_rate_answerable"] == pytest.approx(0.9)  # 27/30 meets 0.90 exactly
    results = evaluate_targets(policy, overall, metrics_by_slice(frame, 0.6, policy.costs))
    assert all(r.passed for r in results), [r for r in results if not r.passed]
    scopes = {r.scope for r in results}
    assert scopes == {
        "overall",
        "slice:access_filtered_answer",
        "slice:adversarial_instruction",
        "slice:near_neighbour_distractor",
        "slice:temporal_mismatch",
    }
    recall = next(r for r in results if r.name == "min_abstention_recall" and r.scope == "overall")
    assert (recall.comparison, recall.metric, recall.value) == (">=", "abstention_recall", 1.0)


def test_unmeasurable_gates_fail(policy: NoAnswerPolicy) -> None:
    frame = HAND.assign(slice="near_neighbour_distractor")
    overall = operating_point(frame, 0.8, policy.costs)
    results = evaluate_targets(policy, overall, metrics_by_slice(frame, 0.8, policy.costs))
    missing = [r for r in results if r.scope == "slice:access_filtered_answer"]
    assert missing and all(math.isnan(r.value) and not r.passed for r in missing)
    only_answerable = HAND[HAND["answerable"]]
    point = operating_point(only_answerable, 0.8, policy.costs)
    recall = evaluate_targets(policy, point, {})[2]
    assert recall.name == "min_abstention_recall" and math.isnan(recall.value)
    assert not recall.passed
    with pytest.raises(InputError, match="missing 'abstention_recall'"):
        evaluate_targets(policy, {"answer_rate_answerable": 1.0, "false_refusal_rate": 0.0}, {})


def test_items_count_in_every_slice_they_carry() -> None:
    frame = HAND.assign(
        slice=[
            ["temporal_mismatch", "entity_collision"],
            None,
            "temporal_mismatch",
            [],
            None,
            "entity_collision",
        ]
    )
    table = sweep_by_slice(frame, COSTS)
    assert list(table.columns) == ["slice", *SWEEP_COLUMNS]
    sizes = table.groupby("slice")["answered"].max().to_dict()
    assert sizes == {"entity_collision": 2, "temporal_mismatch": 2}
    per = metrics_by_slice(frame, 0.8, COSTS)
    assert per["temporal_mismatch"]["n"] == 2 and per["temporal_mismatch"]["answered"] == 2
    # the unacceptable 0.8 item is answered; the 0.4 item is below the threshold
    assert per["entity_collision"]["unsupported_answers"] == 1
    with pytest.raises(InputError, match="'slice'"):
        sweep_by_slice(HAND, COSTS)


# Charts ------------------------------------------------------------------------------------------


def test_abstention_recall_counts_only_items_expecting_abstain() -> None:
    """Note 000: a threshold refusal is an abstention; an item expecting clarify or escalate
    is unanswerable but in neither count of abstention recall."""
    frame = HAND.assign(expects_abstain=[False, True, False, False, False, False])
    table = sweep(frame, COSTS).set_index("threshold")
    # only the item at 0.4 expects abstain: recalled until everything is answered
    assert table.loc[0.6, "abstention_recall"] == 1.0
    assert table.loc[0.4, "abstention_recall"] == 0.0
    point = operating_point(frame, 0.5, COSTS)
    assert point["abstention_recall"] == 1.0
    with pytest.raises(InputError, match="expecting abstain cannot be answerable"):
        sweep(HAND.assign(expects_abstain=True), COSTS)
