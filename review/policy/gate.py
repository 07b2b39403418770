"""The decision gate: ordered checks over a request's signals, first match wins.

``decide`` handles one request (a live call, a form in the workbench); ``decide_frame`` replays
the policy over a table of logged traces with numpy, one ``np.select`` in the policy's gate
order, so a million rows need no Python loop.

Missing signals: ``top_score``, ``answerable``, ``ambiguous`` and ``ungrounded`` may be None
(NaN / NA in a frame), meaning the signal was not produced for this request. A missing signal
never fires its check: the score checks are skipped, as they are for a hybrid mode without
``threshold_on``. ``hits_after_filter`` is never optional.

The rules and what they return (decision, caveat, reason code, message key):

- restricted_topic: escalate, restricted_topic, E1
- no_hits: abstain, no_answer_bearing_evidence, R1
- low_score_refuse: abstain, support_below_threshold, R1
- not_answerable: abstain, no_answer_bearing_evidence, R2
- ambiguous: clarify, ambiguous_question, F1
- ungrounded: abstain, required_claim_not_covered, R3
- low_score_caveat: answer with caveat, support_below_threshold, C1
- answer: answer, no reason code, no message
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from review.core.errors import InputError
from review.policy.policy import GATE_RULES, ModeThresholds, NoAnswerPolicy

RULE_DECISION: Final[dict[str, str]] = {
    "restricted_topic": "escalate",
    "no_hits": "abstain",
    "low_score_refuse": "abstain",
    "not_answerable": "abstain",
    "ambiguous": "clarify",
    "ungrounded": "abstain",
    "low_score_caveat": "answer",
    "answer": "answer",
}
RULE_REASON_CODE: Final[dict[str, str | None]] = {
    "restricted_topic": "restricted_topic",
    "no_hits": "no_answer_bearing_evidence",
    "low_score_refuse": "support_below_threshold",
    "not_answerable": "no_answer_bearing_evidence",
    "ambiguous": "ambiguous_question",
    "ungrounded": "required_claim_not_covered",
    "low_score_caveat": "support_below_threshold",
    "answer": None,
}
RULE_MESSAGE_KEY: Final[dict[str, str | None]] = {
    "restricted_topic": "E1",
    "no_hits": "R1",
    "low_score_refuse": "R1",
    "not_answerable": "R2",
    "ambiguous": "F1",
    "ungrounded": "R3",
    "low_score_caveat": "C1",
    "answer": None,
}
DECISIONS: Final = ("answer", "abstain", "clarify", "escalate")

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Signals:
    """What the pipeline knew about one request when the gate ran."""

    ranking_mode: str
    hits_after_filter: int
    top_score: float | None = None  # for hybrid: the score of the mode named by threshold_on
    answerable: bool | None = None  # the model's answerable flag
    ambiguous: bool | None = None  # the model's ambiguity flag
    ungrounded: bool | None = None  # the groundedness check's verdict
    topics: tuple[str, ...] = ()  # topic keys from the topic classifier


@dataclass(frozen=True)
class GateResult:
    decision: str  # answer, abstain, clarify or escalate
    rule: str  # the rule that fired (one of GATE_RULES); log it with every decision
    caveat: bool = False  # True: answer, but with the caveat message (C1)

    @property
    def reason_code(self) -> str | None:
        return RULE_REASON_CODE[self.rule]

    @property
    def message_key(self) -> str | None:
        return RULE_MESSAGE_KEY[self.rule]


def _fires(rule: str, s: Signals, th: ModeThresholds, restricted: frozenset[str]) -> bool:
    if rule == "restricted_topic":
        # same reading as decide_frame: each entry may hold comma-separated keys
        entries = [s.topics] if isinstance(s.topics, str) else s.topics
        return any(part.strip() in restricted for t in entries for part in t.split(","))
    if rule == "no_hits":
        return s.hits_after_filter < th.min_hits_after_filter
    if rule == "low_score_refuse":
        return th.is_below(s.top_score, th.refuse_below)
    if rule == "not_answerable":
        return s.answerable is False
    if rule == "ambiguous":
        return s.ambiguous is True
    if rule == "ungrounded":
        return s.ungrounded is True
    if rule == "low_score_caveat":
        return th.is_below(s.top_score, th.caveat_below)
    return rule == "answer"


def decide(policy: NoAnswerPolicy, signals: Signals) -> GateResult:
    """Apply the policy's checks in its gate order; the first that fires decides."""
    hits = signals.hits_after_filter
    if isinstance(hits, bool) or not isinstance(hits, int) or hits < 0:
        raise InputError(f"hits_after_filter: expected a whole number >= 0, got {hits!r}")
    th = policy.thresholds_for(signals.ranking_mode)
    restricted = frozenset(policy.restricted_topics)
    for rule in policy.gate_order:
        if _fires(rule, signals, th, restricted):
            return GateResult(RULE_DECISION[rule], rule, caveat=rule == "low_score_caveat")
    raise AssertionError("the validated gate order always ends with 'answer'")  # pragma: no cover


# Vectorised replay ------------------------------------------------------------------------


def _below(score: FloatArray, t: FloatArray, higher: BoolArray, inclusive: BoolArray) -> BoolArray:
    """Element-wise "score on the worse side of t"; NaN score or NaN t never counts."""
    worse_high = np.where(inclusive, score <= t, score < t)
    worse_low = np.where(inclusive, score >= t, score > t)
    return np.asarray(np.where(higher, worse_high, worse_low), dtype=bool)


def _flags(frame: pd.DataFrame, column: str) -> tuple[BoolArray, BoolArray]:
    """(is True, is False) for an optional nullable boolean column."""
    n = len(frame)
    if column not in frame.columns:
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    try:
        values = frame[column].astype("boolean")
    except (TypeError, ValueError) as exc:
        raise InputError(f"column {column!r}: expected true/false or empty ({exc})") from None
    is_true = values.to_numpy(dtype=bool, na_value=False)
    is_false = (~values).to_numpy(dtype=bool, na_value=False)
    return is_true, is_false


def _restricted_rows(frame: pd.DataFrame, restricted: list[str]) -> BoolArray:
    """Rows whose ``topics`` (list/tuple of keys, or a comma-separated string) hit the list."""
    n = len(frame)
    if "topics" not in frame.columns or not restricted or n == 0:
        return np.zeros(n, dtype=bool)
    exploded = frame["topics"].reset_index(drop=True).explode()
    try:
        codes, uniques = pd.factorize(exploded.astype(object), use_na_sentinel=True)
    except TypeError as exc:
        raise InputError(f"column 'topics': expected lists of topic keys ({exc})") from None
    # Topic values repeat a lot: judge each distinct value once, then index by code.
    wanted = set(restricted)
    flags = np.zeros(len(uniques) + 1, dtype=bool)  # the extra last slot serves code -1 (NA)
    for i, value in enumerate(uniques):
        if not isinstance(value, str):
            raise InputError(
                "column 'topics': expected lists of topic keys or comma-separated text, got "
                f"{value!r}"
            )
        flags[i] = any(part.strip() in wanted for part in value.split(","))
    rows = exploded.index.to_numpy()[flags[codes]]
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def decide_frame(policy: NoAnswerPolicy, frame: pd.DataFrame) -> pd.DataFrame:
    """The gate over a table of signals, one output row per input row (same index).

    Columns read: ``ranking_mode`` and ``hits_after_filter`` (required); ``top_score``,
    ``answerable``, ``ambiguous``, ``ungrounded`` (optional; NaN/None/NA = missing) and
    ``topics`` (optional; list/tuple of keys or comma-separated text). Returns categorical
    ``decision`` and ``rule`` columns and a boolean ``caveat`` column; ``decide`` on any row
    gives the same result.
    """
    missing = [c for c in ("ranking_mode", "hits_after_filter") if c not in frame.columns]
    if missing:
        raise InputError(f"signals table: missing column(s) {', '.join(missing)}")
    n = len(frame)
    mode_names = list(policy.ranking_modes)
    codes = pd.Index(mode_names).get_indexer(frame["ranking_mode"].astype(object))
    if n and (codes < 0).any():
        bad = frame["ranking_mode"][codes < 0]
        shown = ", ".join(sorted({repr(v) for v in bad.head(1000)})[:5])
        raise InputError(
            f"column 'ranking_mode': {len(bad)} row(s) name a mode the policy does not define "
            f"({shown}); defined: {', '.join(mode_names)}"
        )
    ths = [policy.thresholds_for(m) for m in mode_names]

    def per_mode(values: list[float]) -> FloatArray:
        return np.asarray(np.asarray(values, dtype=np.float64)[codes], dtype=np.float64)

    nan = float("nan")
    min_hits = per_mode([float(t.min_hits_after_filter) for t in ths])
    refuse = per_mode([nan if t.refuse_below is None else t.refuse_below for t in ths])
    caveat = per_mode([nan if t.caveat_below is None else t.caveat_below for t in ths])
    higher = np.asarray([t.higher_is_better for t in ths], dtype=bool)[codes]
    inclusive = np.asarray([t.inclusive for t in ths], dtype=bool)[codes]

    try:
        hits = pd.to_numeric(frame["hits_after_filter"]).to_numpy(dtype=np.float64, na_value=nan)
    except (TypeError, ValueError) as exc:
        raise InputError(f"column 'hits_after_filter': expected whole numbers ({exc})") from None
    if np.isnan(hits).any() or (hits < 0).any():
        raise InputError("column 'hits_after_filter': every row needs a whole number >= 0")
    if "top_score" in frame.columns:
        try:
            score = pd.to_numeric(frame["top_score"]).to_numpy(dtype=np.float64, na_value=nan)
        except (TypeError, ValueError) as exc:
            raise InputError(f"column 'top_score': expected numbers or empty ({exc})") from None
    else:
        score = np.full(n, nan)

    _, not_answerable = _flags(frame, "answerable")
    ambiguous, _ = _flags(frame, "ambiguous")
    ungrounded, _ = _flags(frame, "ungrounded")
    fires: dict[str, BoolArray] = {
        "restricted_topic": _restricted_rows(frame, policy.restricted_topics),
        "no_hits": hits < min_hits,
        "low_score_refuse": _below(score, refuse, higher, inclusive),
        "not_answerable": not_answerable,
        "ambiguous": ambiguous,
        "ungrounded": ungrounded,
        "low_score_caveat": _below(score, caveat, higher, inclusive),
        "answer": np.ones(n, dtype=bool),
    }
    rule_code = np.select(
        [fires[r] for r in policy.gate_order],
        [GATE_RULES.index(r) for r in policy.gate_order],
        default=GATE_RULES.index("answer"),
    ).astype(np.int8)
    decision_of_rule = np.asarray([DECISIONS.index(RULE_DECISION[r]) for r in GATE_RULES])
    return pd.DataFrame(
        {
            "decision": pd.Categorical.from_codes(
                decision_of_rule[rule_code], categories=list(DECISIONS)
            ),
            "rule": pd.Categorical.from_codes(rule_code, categories=list(GATE_RULES)),
            "caveat": rule_code == GATE_RULES.index("low_score_caveat"),
        },
        index=frame.index,
    )


# Bridging the gate and the risk-coverage analysis -------------------------------------------
#
# review.policy.selective treats "answered" as ``confidence >= t`` with higher = more confident.
# These helpers turn a mode's raw scores and thresholds into that form and back, honouring
# the mode's score direction and inequality exactly (including a score equal to the threshold).


def confidence(policy: NoAnswerPolicy, mode: str, scores: npt.ArrayLike) -> FloatArray:
    """Raw scores of ``mode`` as confidences (negated when lower scores are better)."""
    th = policy.thresholds_for(mode)
    raw = np.asarray(scores, dtype=np.float64)
    return raw if th.higher_is_better else -raw


def confidence_threshold(
    policy: NoAnswerPolicy, mode: str, which: Literal["refuse", "caveat"] = "refuse"
) -> float | None:
    """The confidence ``t`` with: score passes the mode's threshold  <=>  confidence >= t."""
    th = policy.thresholds_for(mode)
    raw = th.refuse_below if which == "refuse" else th.caveat_below
    if raw is None:
        return None
    c = raw if th.higher_is_better else -raw
    return float(np.nextafter(c, np.inf)) if th.inclusive else float(c)


def policy_threshold(policy: NoAnswerPolicy, mode: str, confidence_t: float) -> float:
    """Inverse of :func:`confidence_threshold`: the raw threshold to write into the policy."""
    th = policy.thresholds_for(mode)
    c = float(np.nextafter(confidence_t, -np.inf)) if th.inclusive else float(confidence_t)
    return c if th.higher_is_better else -c
