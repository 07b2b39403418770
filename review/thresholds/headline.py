"""The headline a signer reads before signing a threshold change: coverage, false-refusal rate
and unsupported-answer rate of the policy in force and of the proposal, on the split the
proposal is reported on, each with its count, its Wilson interval and the policy's target,
and which release targets the proposal fails.

The rates are the ones the analysis computes (:mod:`review.policy.selective`, docs/metrics.md),
with the same denominators:

- coverage = answered cases / all cases;
- false-refusal rate = answerable cases refused / answerable cases;
- unsupported-answer rate = cases requiring abstention that got an answer / cases
  requiring abstention (the unanswerable ones), not over all cases.

A rate whose denominator is empty reads "undefined" with the reason. The pass/fail of a rate
against its target uses :func:`review.policy.selective.evaluate_targets`, the release gate's
own check; the policy sets no overall coverage target, and the headline says so rather than
comparing coverage with the target on the answer rate of answerable cases (a different
denominator)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pandas as pd

from review.core import readable
from review.core.readable import humanize, number, percent, percent_interval
from review.core.sampling import wilson_interval
from review.policy.policy import TARGET_METRICS, NoAnswerPolicy
from review.policy.selective import evaluate_targets
from review.thresholds.thresholds import Analysis

__all__ = [
    "HEADLINE_METRICS",
    "METRIC_LABELS",
    "Figure",
    "Headline",
    "HeadlineRow",
    "failing_targets",
    "figure",
    "frame",
    "headline",
    "target_text",
    "verdict",
]

#: The headline's rates: (metric, label, numerator count, denominator count, definition).
HEADLINE_METRICS: Final = (
    ("coverage", "Coverage", "answered", "n", "answered cases / all cases"),
    (
        "false_refusal_rate",
        "False-refusal rate",
        "false_refusals",
        "n_answerable",
        "answerable cases refused / answerable cases",
    ),
    (
        "unsupported_answer_rate",
        "Unsupported-answer rate",
        "unanswerable_answered",
        "n_unanswerable",
        "cases requiring abstention that were answered / cases requiring abstention",
    ),
)

_UNDEFINED_WHY: Final = {
    "n": "no case on this split",
    "n_answerable": "no answerable case on this split",
    "n_unanswerable": "no case requiring abstention on this split",
}

#: The overall target on each headline rate (coverage has none overall).
_TARGET_OF: Final = {
    metric: name
    for name, (metric, _) in TARGET_METRICS.items()
    if name in ("max_false_refusal_rate", "max_unsupported_answer_rate")
}


_COUNTS: Final = (
    "n",
    "answered",
    "n_answerable",
    "false_refusals",
    "n_unanswerable",
    "correct_refusals",
)


@dataclass(frozen=True)
class Figure:
    """One rate with its count and interval; ``value`` None when it is undefined."""

    value: float | None
    numerator: int
    denominator: int
    low: float | None
    high: float | None
    text: str


@dataclass(frozen=True)
class HeadlineRow:
    metric: str
    label: str
    definition: str
    current: Figure
    proposed: Figure | None
    target: str
    #: whether the figure meets the target (None: no target, or nothing proposed)
    current_ok: bool | None
    proposed_ok: bool | None


@dataclass(frozen=True)
class Headline:
    report_on: str
    n_report: int
    rows: tuple[HeadlineRow, ...]
    #: the release targets the proposal fails ("False-refusal rate, overall: 88%, target ≤ 10%")
    failing: tuple[str, ...] = ()
    targets_total: int = 0
    proposed: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)


def _counts(op: Mapping[str, Any]) -> dict[str, int]:
    """The counts behind the rates of an operating point (stored as floats)."""
    whole = {k: round(float(op[k])) for k in _COUNTS}
    # a refusal of a case requiring abstention is a correct refusal; the rest were answered
    whole["unanswerable_answered"] = whole["n_unanswerable"] - whole["correct_refusals"]
    return whole


def figure(numerator: int, denominator: int, why_undefined: str) -> Figure:
    """A rate as the headline reads it: "50% (33–67%) · 15 of 30", or undefined with why."""
    if denominator <= 0:
        return Figure(None, numerator, denominator, None, None, f"undefined: {why_undefined}")
    value = numerator / denominator
    bounds = wilson_interval(numerator, denominator)
    low, high = bounds if bounds is not None else (None, None)
    text = f"{percent_interval(value, low, high)} · {numerator:,} of {denominator:,}"
    return Figure(value, numerator, denominator, low, high, text)


def target_text(policy: NoAnswerPolicy, metric: str) -> str:
    """The policy's overall target on a headline rate, as people read it."""
    name = _TARGET_OF.get(metric)
    if name is None:
        return "none set in the policy"
    bound = float(getattr(policy.targets, name))
    return f"{'≥' if TARGET_METRICS[name][1] == 'min' else '≤'} {percent(bound)}"


def _meets(policy: NoAnswerPolicy, metric: str, op: Mapping[str, Any]) -> bool | None:
    name = _TARGET_OF.get(metric)
    if name is None:
        return None
    return next(r.passed for r in evaluate_targets(policy, op, {}) if r.name == name)


#: What each target metric reads as.
METRIC_LABELS: Final = {
    "coverage": "Coverage",
    "answer_rate_answerable": "Answer rate on answerable cases",
    "false_refusal_rate": "False-refusal rate",
    "unsupported_answer_rate": "Unsupported-answer rate",
    "abstention_recall": "Abstention recall",
    "selective_risk": "Selective risk",
}


#: how a failing target that cannot be measured reads (see :func:`failing_targets`)
UNMEASURED = "undefined (nothing to measure)"


def unmeasured_note(failing: Sequence[str]) -> str:
    """The note " (3 of them cannot be measured: ...)" when some failing targets fail only as
    nothing could be measured (a slice with no outcome on the split), else "". On a data set
    that covers few slices, "fails 8 of 8" read as eight bad figures when four were none."""
    n = sum(UNMEASURED in f for f in failing)
    if not n:
        return ""
    them = "it" if n == 1 and len(failing) == 1 else f"{n} of them"
    return (
        f" ({them} cannot be measured: no outcome in that slice on the split, and a target "
        "that cannot be measured fails)"
    )


def failing_targets(analysis: Analysis) -> list[str]:
    """The release targets the proposal fails on the report split, in words ("False-refusal
    rate, overall: 88%, target ≤ 10%"); a target that cannot be measured fails (the release
    gate's rule)."""
    if analysis.targets.empty:
        return []
    out = []
    for row in analysis.targets.itertuples(index=False):
        if bool(row.passed):
            continue
        value = percent(row.value, missing=UNMEASURED)
        comparison, bound = str(row.rule).split(" ", 1)
        sign = "≥" if comparison == ">=" else "≤"
        scope = str(row.scope)
        where = f"slice {humanize(scope.removeprefix('slice:'))}" if scope != "overall" else scope
        label = METRIC_LABELS.get(str(row.metric), humanize(str(row.metric)))
        out.append(f"{label}, {where}: {value}, target {sign} {percent(float(bound))}")
    return out


def _op(analysis: Analysis, which: str) -> dict[str, Any] | None:
    ops = analysis.ops
    if ops.empty:
        return None
    rows = ops[(ops["policy"] == which) & (ops["split"] == analysis.report_on)]
    return None if rows.empty else dict(rows.iloc[0])


def headline(analysis: Analysis, policy: NoAnswerPolicy, *, proposed: bool = True) -> Headline:
    """The headline of ``analysis`` (current vs proposed on its report split) against the
    targets of ``policy`` (the proposed one). ``proposed=False``: nothing is proposed, only
    the figures in force are shown and no target verdict on a proposal is given."""
    current = _op(analysis, "current")
    if current is None:
        return Headline(
            analysis.report_on,
            analysis.n_report,
            (),
            notes=(f"No outcome on the {analysis.report_on} split: nothing to show.",),
            proposed=proposed,
        )
    new = _op(analysis, "proposed") if proposed else None
    cur_counts = _counts(current)
    new_counts = _counts(new) if new is not None else None
    rows = []
    for metric, label, num, den, definition in HEADLINE_METRICS:
        why = _UNDEFINED_WHY[den]
        cur = figure(cur_counts[num], cur_counts[den], why)
        prop = figure(new_counts[num], new_counts[den], why) if new_counts else None
        rows.append(
            HeadlineRow(
                metric,
                label,
                definition,
                cur,
                prop,
                target_text(policy, metric),
                _meets(policy, metric, current) if proposed else None,
                _meets(policy, metric, new) if new is not None else None,
            )
        )
    failing = tuple(failing_targets(analysis)) if proposed else ()
    return Headline(
        analysis.report_on,
        analysis.n_report,
        tuple(rows),
        failing,
        len(analysis.targets) if proposed else 0,
        proposed,
    )


def frame(h: Headline) -> pd.DataFrame:
    """The headline as a table (for reports and exports): one row per rate."""
    return pd.DataFrame(
        [
            {
                "rate": r.label,
                "in force": r.current.text,
                "proposed": r.proposed.text if r.proposed else "nothing proposed",
                "target": r.target,
                "definition": r.definition,
            }
            for r in h.rows
        ]
    )


def verdict(h: Headline) -> str:
    """One sentence on the proposal's release targets."""
    if not h.proposed:
        return "Nothing is proposed: these are the figures of the policy in force."
    if not h.targets_total:
        return f"No outcome on the {h.report_on} split: the targets cannot be checked."
    if h.failing:
        return (
            f"The proposal fails {len(h.failing)} of "
            f"{readable.count(h.targets_total, 'release target')} on "
            f"the {h.report_on} split ({number(h.n_report)} outcomes)"
            f"{unmeasured_note(h.failing)}."
        )
    return f"The proposal meets every release target on the {h.report_on} split."
