"""Selective prediction: what each answer/refuse threshold would cost, on both failure sides.

Conventions used throughout:

- ``score``: higher means more confident that the assistant should answer. An item is answered
  at threshold ``t`` when ``score >= t`` (ties are answered or refused together). Scores of a
  lower-is-better mode are negated first (``review.policy.gate.confidence``).
- ``acceptable``: answering this item would be acceptable (a supported, correct answer).
- ``answerable``: a gold answer exists (the expected decision answers). An item that is not
  answerable can never be acceptable to answer; such input is refused.

Every curve has one row per distinct score, ordered from the strictest threshold to the most
lenient, plus a first row for "answer nothing" (threshold +inf). All rows come from one sort
and cumulative sums, O(n log n), with numpy only. When nothing is answered the selective risk is
undefined (NaN), never 0.

Rates and their denominators (the same in the sweep, the operating points and the release gate):

- coverage = answer_rate = answered / all items; refusal_rate = 1 - coverage
- selective_risk = unacceptable answered / answered (Wilson interval in *_lo / *_hi)
- answer_rate_answerable = answerable answered / answerable items
- false_refusal_rate = answerable refused / answerable items
- abstention_recall = refused items expecting abstain / items expecting abstain
  (``expects_abstain``; when the outcomes do not say, every unanswerable item). A threshold
  refusal is an abstention, so an item expecting clarify or escalate is in neither count.
- unsupported_answer_rate = unanswerable items answered / unanswerable items (the
  cases that require abstention), not over all items.
- unacceptable_answer_share = unacceptable answered / ALL items (the share of questions that
  got an answer that was not acceptable; what the expected cost counts).
- expected_cost = (false refusals * cost.false_refusal + unsupported answers *
  cost.unsupported_answer + correct refusals * cost.correct_refusal + correct answers *
  cost.correct_answer) / all items. A false refusal is an answerable item refused, a correct
  refusal an unanswerable item refused, a correct answer an acceptable item answered.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from review.core import readable
from review.core.errors import InputError
from review.core.sampling import wilson_bounds
from review.policy.policy import OVERALL_TARGETS, TARGET_METRICS, NoAnswerPolicy

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

# Bounds are compared with this slack so that 27/30 passes a bound of 0.9.
TOLERANCE: Final = 1e-9

SWEEP_COLUMNS: Final = (
    "threshold",
    "answered",
    "coverage",
    "answer_rate",
    "refusal_rate",
    "selective_risk",
    "selective_risk_lo",
    "selective_risk_hi",
    "answer_rate_answerable",
    "false_refusal_rate",
    "unsupported_answer_rate",
    "abstention_recall",
    "unacceptable_answer_share",
    "expected_cost",
    "false_refusals",
    "unsupported_answers",
    "correct_refusals",
    "correct_answers",
)


class CostModel(Protocol):
    """Anything with the four costs, e.g. ``review.policy.policy.Costs``."""

    @property
    def false_refusal(self) -> float: ...
    @property
    def unsupported_answer(self) -> float: ...
    @property
    def correct_refusal(self) -> float: ...
    @property
    def correct_answer(self) -> float: ...


# Input checks --------------------------------------------------------------------------------


def _scores(values: npt.ArrayLike | pd.Series, name: str = "score") -> FloatArray:
    raw = values.to_numpy() if isinstance(values, pd.Series) else np.asarray(values)
    if raw.dtype == np.float64:  # already numbers: to_numeric would return them unchanged
        arr = raw.ravel()
    else:
        try:
            arr = np.asarray(
                pd.to_numeric(pd.Series(raw.ravel())).to_numpy(dtype=np.float64, na_value=np.nan),
                dtype=np.float64,
            )
        except (TypeError, ValueError) as exc:
            raise InputError(f"{name}: expected numbers ({exc})") from None
    if not np.isfinite(arr.sum()):  # one pass when every value is finite (the usual case)
        bad = ~np.isfinite(arr)
        if bad.any():
            first = int(bad.argmax())
            raise InputError(
                f"{name}: {readable.count(int(bad.sum()), 'value')} "
                f"{readable.plural(int(bad.sum()), 'is', 'are')} missing or not finite (first at "
                "position "
                f"{first}); every item needs a score"
            )
    return arr


def _booleans(values: npt.ArrayLike | pd.Series, name: str) -> BoolArray:
    if isinstance(values, pd.Series | np.ndarray) and values.dtype == np.bool_:
        return np.asarray(values, dtype=np.bool_).ravel()  # no value can be missing
    series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values).ravel())
    try:
        b = series.astype("boolean")
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: expected true/false values ({exc})") from None
    missing = b.isna()
    if bool(missing.any()):
        raise InputError(
            f"{name}: {readable.count(int(missing.sum()), 'item')} "
            f"{readable.plural(int(missing.sum()), 'has', 'have')} no true/false value"
        )
    return np.asarray(b.to_numpy(dtype=bool), dtype=np.bool_)


def _pair(score: npt.ArrayLike, acceptable: npt.ArrayLike) -> tuple[FloatArray, BoolArray]:
    s = _scores(score)
    ok = _booleans(acceptable, "acceptable")
    if len(s) != len(ok):
        raise InputError(f"score has {len(s)} items but acceptable has {len(ok)}")
    if len(s) == 0:
        raise InputError("no items to analyse")
    return s, ok


class _Runs:
    """The items from the highest score to the lowest, cut into runs of equal scores; every
    curve has one row per run, after a first row for "answer nothing".

    Every figure is a count up to the end of a run, the same whatever the order inside the run,
    so the sort need not be stable (an unstable argsort is several times faster). The one value
    that tells tied items apart is the sign of a zero: the run of 0.0 and -0.0 takes the sign of
    its last item in the input, as the stable order would have.
    """

    def __init__(self, score: FloatArray) -> None:
        self.order = np.argsort(score)[::-1]
        s_sorted = np.take(score, self.order)
        last = np.empty(len(score), dtype=np.bool_)
        np.not_equal(s_sorted[1:], s_sorted[:-1], out=last[:-1])
        last[-1] = True
        self.ends = np.flatnonzero(last).astype(np.int64, copy=False)
        self.thresholds = self._from(np.inf, s_sorted, np.float64)
        zero = np.flatnonzero(self.thresholds == 0.0)
        if zero.size:
            self.thresholds[zero[0]] = score[np.flatnonzero(score == 0.0)[-1]]

    def _from(self, first: float, values: npt.NDArray[np.generic], dtype: type) -> npt.NDArray[Any]:
        """``first``, then ``values`` at the end of each run."""
        out: npt.NDArray[Any] = np.empty(len(self.ends) + 1, dtype=dtype)
        out[0] = first
        np.take(values, self.ends, out=out[1:], mode="clip")  # clip: no buffered copy
        return out

    def answered(self) -> IntArray:
        """How many items each row answers: 0, then every item up to the end of each run."""
        out = np.empty(len(self.ends) + 1, dtype=np.int64)
        out[0] = 0
        np.add(self.ends, 1, out=out[1:])
        return out

    def counts(self, flags: BoolArray) -> IntArray:
        """How many flagged items each row answers."""
        return self._from(0, np.cumsum(np.take(flags, self.order), dtype=np.int64), np.int64)


def _ratio(num: npt.NDArray[np.float64] | IntArray, den: FloatArray | float) -> FloatArray:
    """num / den as float64, NaN where den is 0 (nothing to divide by)."""
    if np.ndim(den) == 0:  # one denominator for every row
        d = float(den)
        return np.divide(num, d, dtype=np.float64) if d > 0 else np.full(np.shape(num), np.nan)
    num = np.asarray(num, dtype=np.float64)
    den_arr = np.broadcast_to(np.asarray(den, dtype=np.float64), num.shape)
    out = np.full(num.shape, np.nan)
    np.divide(num, den_arr, out=out, where=den_arr > 0)
    return out


# Risk-coverage -------------------------------------------------------------------------------


def risk_coverage(score: npt.ArrayLike, acceptable: npt.ArrayLike) -> pd.DataFrame:
    """One row per distinct score (plus "answer nothing"): threshold, answered, coverage, errors,
    selective_risk. Rows go from threshold +inf (coverage 0, risk NaN) to the lowest score
    (coverage 1)."""
    s, ok = _pair(score, acceptable)
    runs = _Runs(s)
    answered = runs.answered()
    errors = runs.counts(~ok)
    answered_f = answered.astype(np.float64)
    return pd.DataFrame(
        {
            "threshold": runs.thresholds,
            "answered": answered,
            "coverage": answered_f / len(s),
            "errors": errors,
            "selective_risk": _ratio(errors.astype(np.float64), answered_f),
        },
        copy=False,  # every column is a new array of its own: no need to copy them again
    )


def aurc(curve: pd.DataFrame) -> float:
    """Area under the risk-coverage curve, right-endpoint step rule.

    AURC = sum over points with a defined risk of (coverage - previous coverage) * risk, the
    points taken in order of coverage, starting from coverage 0. Each tie group's risk covers
    the coverage its items add, and the undefined "answer nothing" point adds no area. With no
    tied scores this is the usual mean of the selective risk after each of the n items. Give
    it the full curve: a downsampled one only approximates the area.
    """
    for col in ("coverage", "selective_risk"):
        if col not in curve.columns:
            raise InputError(f"risk-coverage curve: missing column {col!r}")
    if curve.empty:
        return float("nan")
    c = curve["coverage"].to_numpy(dtype=np.float64)
    r = curve["selective_risk"].to_numpy(dtype=np.float64)
    order = np.argsort(c, kind="stable")
    c, r = c[order], r[order]
    widths = np.diff(c, prepend=0.0)
    defined = ~np.isnan(r)
    return float(np.sum(widths[defined] * r[defined]))


# Sweep and operating points --------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcomes:
    score: FloatArray
    answerable: BoolArray
    acceptable: BoolArray
    expects_abstain: BoolArray


def _outcomes(frame: pd.DataFrame) -> _Outcomes:
    missing = [c for c in ("score", "answerable", "acceptable") if c not in frame.columns]
    if missing:
        raise InputError(
            f"outcomes: missing {readable.plural(len(missing), 'column')} {', '.join(missing)}"
        )
    if frame.empty:
        raise InputError("outcomes: no items to analyse")
    score = _scores(frame["score"], "outcomes.score")
    answerable = _booleans(frame["answerable"], "outcomes.answerable")
    acceptable = _booleans(frame["acceptable"], "outcomes.acceptable")
    contradiction = acceptable & ~answerable
    if contradiction.any():
        first = frame.index[int(contradiction.argmax())]
        raise InputError(
            f"outcomes: {readable.count(int(contradiction.sum()), 'item')} "
            f"{readable.plural(int(contradiction.sum()), 'is', 'are')} marked acceptable to answer "
            "but "
            f"not answerable (first: row {first!r}); an item without a gold answer cannot be "
            "acceptable to answer"
        )
    if "expects_abstain" in frame.columns:
        expects_abstain = _booleans(frame["expects_abstain"], "outcomes.expects_abstain")
        if (expects_abstain & answerable).any():
            raise InputError("outcomes: an item expecting abstain cannot be answerable")
    else:
        expects_abstain = ~answerable
    return _Outcomes(score, answerable, acceptable, expects_abstain)


def _metrics(
    n: int,
    n_answerable: int,
    answered: IntArray,
    correct_answers: IntArray,
    answered_answerable: IntArray,
    costs: CostModel,
    n_abstain: int,
    answered_abstain: IntArray,
) -> dict[str, npt.NDArray[np.float64] | IntArray]:
    """All rates from the counts; arrays so one code path serves sweeps and single points.

    The five counts are int64 (``answered`` and ``correct_answers`` the arrays given), the rates
    float64, no two sharing an array. Each is written once, from the counts, and a temporary
    is let go as soon as it is used: on a million rows the memory touched is the time taken.
    """
    n_unanswerable = n - n_answerable
    answered_f = answered.astype(np.float64)
    unsupported = answered - correct_answers
    unsupported_f = unsupported.astype(np.float64)
    lo, hi = wilson_bounds(unsupported_f, answered_f)
    selective_risk = _ratio(unsupported_f, answered_f)
    coverage = np.divide(answered_f, n, out=answered_f)
    answered_unanswerable = answered - answered_answerable
    unsupported_answer_rate = _ratio(answered_unanswerable, n_unanswerable)
    correct_refusals = np.subtract(n_unanswerable, answered_unanswerable, out=answered_unanswerable)
    false_refusals = n_answerable - answered_answerable
    # (false refusals * c + unsupported * c + correct refusals * c + correct answers * c) / n,
    # added in that order, the first three in float64 (the last as int64 * c, as before)
    cost = np.multiply(false_refusals, costs.false_refusal, dtype=np.float64)
    scratch = np.multiply(unsupported_f, costs.unsupported_answer)
    cost += scratch
    np.multiply(correct_refusals, costs.correct_refusal, out=scratch, dtype=np.float64)
    cost += scratch
    np.multiply(correct_answers, costs.correct_answer, out=scratch)
    cost += scratch
    del scratch
    cost /= n
    return {
        "answered": answered,
        "coverage": coverage,
        "answer_rate": coverage.copy(),
        "refusal_rate": 1.0 - coverage,
        "selective_risk": selective_risk,
        "selective_risk_lo": lo,
        "selective_risk_hi": hi,
        "answer_rate_answerable": _ratio(answered_answerable, n_answerable),
        "false_refusal_rate": _ratio(false_refusals, n_answerable),
        "unsupported_answer_rate": unsupported_answer_rate,
        "abstention_recall": _ratio(n_abstain - answered_abstain, n_abstain),
        "unacceptable_answer_share": np.divide(unsupported_f, n, out=unsupported_f),
        "expected_cost": cost,
        "false_refusals": false_refusals,
        "unsupported_answers": unsupported,
        "correct_refusals": correct_refusals,
        "correct_answers": correct_answers,
    }


def sweep(outcomes: pd.DataFrame, costs: CostModel) -> pd.DataFrame:
    """Every distinct threshold (plus "answer nothing") with the metrics listed in the module
    docstring; columns SWEEP_COLUMNS, rows from threshold +inf down to the lowest score."""
    o = _outcomes(outcomes)
    n = len(o.score)
    runs = _Runs(o.score)
    counts = (
        runs.answered(),
        runs.counts(o.acceptable),
        runs.counts(o.answerable),
        runs.counts(o.expects_abstain),
    )
    thresholds = runs.thresholds
    del runs  # the order and the run ends: let them go before the columns are computed
    answered, correct_answers, answered_answerable, answered_abstain = counts
    metrics = _metrics(
        n,
        int(o.answerable.sum()),
        answered,
        correct_answers,
        answered_answerable,
        costs,
        int(o.expects_abstain.sum()),
        answered_abstain,
    )
    columns = {"threshold": thresholds, **metrics}
    # every column is a new array of its own: built once, in order, without copying them again
    return pd.DataFrame({c: columns[c] for c in SWEEP_COLUMNS}, copy=False)


def operating_point(outcomes: pd.DataFrame, threshold: float, costs: CostModel) -> dict[str, float]:
    """The sweep's metrics at one threshold (answered: score >= threshold), plus counts.

    ``threshold=inf`` answers nothing, ``-inf`` answers everything.
    """
    if threshold is None or math.isnan(threshold):
        raise InputError("operating point: the threshold must be a number (use inf to refuse all)")
    o = _outcomes(outcomes)
    n = len(o.score)
    answered_mask = o.score >= threshold
    metrics = _metrics(
        n,
        int(o.answerable.sum()),
        np.asarray([answered_mask.sum()], dtype=np.int64),
        np.asarray([(answered_mask & o.acceptable).sum()], dtype=np.int64),
        np.asarray([(answered_mask & o.answerable).sum()], dtype=np.int64),
        costs,
        int(o.expects_abstain.sum()),
        np.asarray([(answered_mask & o.expects_abstain).sum()], dtype=np.int64),
    )
    point: dict[str, float] = {"threshold": float(threshold), "n": float(n)}
    point["n_answerable"] = float(o.answerable.sum())
    point["n_unanswerable"] = float(n - o.answerable.sum())
    point.update({k: float(v[0]) for k, v in metrics.items()})
    return point


def _slice_rows(outcomes: pd.DataFrame) -> pd.DataFrame:
    """One row per (item, slice): lists of slices are expanded, rows with no slice dropped."""
    if "slice" not in outcomes.columns:
        raise InputError("outcomes: a 'slice' column is needed for per-slice results")
    rows = outcomes.explode("slice")
    return rows[rows["slice"].notna()]


def sweep_by_slice(outcomes: pd.DataFrame, costs: CostModel) -> pd.DataFrame:
    """:func:`sweep` per slice, stacked with a leading ``slice`` column.

    ``slice`` holds one slice key per row, a list of keys (an item in several slices), or
    nothing; items count in every slice they carry.
    """
    rows = _slice_rows(outcomes)
    parts = [
        sweep(group, costs).assign(slice=str(key))
        for key, group in rows.groupby("slice", sort=True)
    ]
    if not parts:
        return pd.DataFrame(columns=["slice", *SWEEP_COLUMNS])
    out = pd.concat(parts, ignore_index=True)
    return out[["slice", *SWEEP_COLUMNS]]


def metrics_by_slice(
    outcomes: pd.DataFrame, threshold: float, costs: CostModel
) -> dict[str, dict[str, float]]:
    """:func:`operating_point` per slice key (see :func:`sweep_by_slice` for the column)."""
    rows = _slice_rows(outcomes)
    return {
        str(key): operating_point(group, threshold, costs)
        for key, group in rows.groupby("slice", sort=True)
    }


# Release gate --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetResult:
    name: str  # target key, e.g. "min_abstention_recall"
    scope: str  # "overall" or "slice:<slice key>"
    bound: float
    value: float  # NaN when it cannot be measured (no items of the needed kind): fails
    passed: bool

    @property
    def metric(self) -> str:
        return TARGET_METRICS[self.name][0]

    @property
    def comparison(self) -> str:
        return ">=" if TARGET_METRICS[self.name][1] == "min" else "<="


def _check(
    name: str, scope: str, bound: float, metrics: Mapping[str, float] | None
) -> TargetResult:
    metric, kind = TARGET_METRICS[name]
    if metrics is None:
        value = float("nan")
    else:
        if metric not in metrics:
            raise InputError(f"metrics for {scope}: missing {metric!r} (needed by {name})")
        value = float(metrics[metric])
    if math.isnan(value):
        passed = False
    elif kind == "min":
        passed = value >= bound - TOLERANCE
    else:
        passed = value <= bound + TOLERANCE
    return TargetResult(name, scope, float(bound), value, passed)


def evaluate_targets(
    policy: NoAnswerPolicy,
    metrics_overall: Mapping[str, float],
    metrics_by_slice: Mapping[str, Mapping[str, float]],
) -> list[TargetResult]:
    """Check an operating point against the policy's release targets.

    The four overall targets always apply, so answering everything (abstention recall 0) and
    refusing everything (answer rate 0) both fail: the policy file refuses bounds that would let
    either pass. A metric that cannot be measured (NaN, or a gated slice with no items) fails.
    """
    results = [
        _check(name, "overall", getattr(policy.targets, name), metrics_overall)
        for name in OVERALL_TARGETS
    ]
    for key, gates in policy.targets.slice_gates.items():
        slice_metrics = metrics_by_slice.get(key)
        for name, bound in gates.items():
            results.append(_check(name, f"slice:{key}", bound, slice_metrics))
    return results
