"""The decision gate (docs/threshold-gate.md): ordered checks over a request's signals, first
match wins.

``decide`` handles one request (a live call, a form in the workbench); ``decide_frame`` replays
the policy over a table of logged traces with numpy, one ``np.select`` in the policy's gate
order, so a million rows need no Python loop.

Fail closed. A check needs its signals: ``topics`` for restricted_topic (when the policy lists
restricted topics), ``ranking_mode`` and ``hits_after_filter`` for no_hits, ``top_score`` for
the two score checks (when the mode has that threshold), ``answerable``, ``ambiguous`` and
``ungrounded`` for their checks (unless the policy says the assistant does not produce that
signal). When the gate reaches a check whose signal is missing, NaN, infinite or out of range
(a score outside its mode's range, a negative hit count, a ranking mode the policy does not
define), it does not guess: it returns the non-answer the policy names for that signal
(``missing_signal``; abstain by default) with rule and reason code ``signal_missing`` and the
signals it lacked. A check earlier in the order still decides first: a request with no hits
abstains with ``no_hits`` whether or not it has a score.

The rules and what they return (decision, caveat, reason code, message key):

- restricted_topic: escalate, restricted_topic, E1
- no_hits: abstain, no_answer_bearing_evidence, R1
- low_score_refuse: abstain, support_below_threshold, R1
- not_answerable: abstain, no_answer_bearing_evidence, R2
- ambiguous: clarify, ambiguous_question, F1
- ungrounded: abstain, required_claim_not_covered, R3
- low_score_caveat: answer with caveat, support_below_threshold, C1
- answer: answer, no reason code, no message
- signal_missing: abstain (R1) or escalate (E1) as the policy says, signal_missing
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from review.core.errors import InputError
from review.policy.policy import (
    GATE_RULES,
    SIGNAL_MISSING,
    SIGNALS,
    ModeThresholds,
    NoAnswerPolicy,
)

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
    SIGNAL_MISSING: SIGNAL_MISSING,
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
#: The signals each check reads, in the order they are looked at.
RULE_SIGNALS: Final[dict[str, tuple[str, ...]]] = {
    "restricted_topic": ("topics",),
    "no_hits": ("ranking_mode", "hits_after_filter"),
    "low_score_refuse": ("ranking_mode", "top_score"),
    "not_answerable": ("answerable",),
    "ambiguous": ("ambiguous",),
    "ungrounded": ("ungrounded",),
    "low_score_caveat": ("ranking_mode", "top_score"),
    "answer": (),
}
_FLAG_OF_RULE: Final = {
    "not_answerable": "answerable",
    "ambiguous": "ambiguous",
    "ungrounded": "ungrounded",
}
DECISIONS: Final = ("answer", "abstain", "clarify", "escalate")
#: Every rule a result may name: the orderable checks, then signal_missing.
RESULT_RULES: Final = (*GATE_RULES, SIGNAL_MISSING)

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Signals:
    """What the pipeline knew about one request when the gate ran (None: not logged)."""

    ranking_mode: str | None
    hits_after_filter: int | None
    top_score: float | None = None  # for hybrid: the score of the mode named by threshold_on
    answerable: bool | None = None  # the model's answerable flag
    ambiguous: bool | None = None  # the model's ambiguity flag
    ungrounded: bool | None = None  # the groundedness check's verdict
    topics: tuple[str, ...] | None = None  # topic keys from the topic classifier; () = none


@dataclass(frozen=True)
class GateResult:
    decision: str  # answer, abstain, clarify or escalate
    rule: str  # the rule that fired (one of RESULT_RULES); log it with every decision
    caveat: bool = False  # True: answer, but with the caveat message (C1)
    missing: tuple[str, ...] = ()  # signal_missing: the signals the gate lacked, first first
    detail: str = ""  # signal_missing: what was wrong with each ("top_score: NaN")
    #: signal_missing: (signal, what was wrong) for each signal lacked, first first
    problems: tuple[tuple[str, str], ...] = ()

    @property
    def reason_code(self) -> str | None:
        return RULE_REASON_CODE[self.rule]

    @property
    def message_key(self) -> str | None:
        if self.rule == SIGNAL_MISSING:
            return "E1" if self.decision == "escalate" else "R1"
        return RULE_MESSAGE_KEY[self.rule]


def _hits_problem(hits: object) -> str | None:
    if hits is None:
        return "not logged"
    if isinstance(hits, bool) or not isinstance(hits, int | float):
        return f"not a whole number ({hits!r})"
    if isinstance(hits, float) and not math.isfinite(hits):
        return "NaN" if math.isnan(hits) else "infinite"
    if hits < 0 or hits != int(hits):
        return f"{hits!r} is not a whole number >= 0"
    return None


def _flag_problem(value: object) -> str | None:
    if value is None:
        return "not logged"
    if not isinstance(value, bool):
        return f"not true or false ({value!r})"
    return None


def _topic_keys(topics: tuple[str, ...] | str) -> list[str]:
    # same reading as decide_frame: each entry may hold comma-separated keys
    entries = [topics] if isinstance(topics, str) else list(topics)
    return [part.strip() for t in entries for part in str(t).split(",")]


def _problem(
    signal: str, s: Signals, th: ModeThresholds | None, policy: NoAnswerPolicy, rule: str
) -> str | None:
    """Why ``rule`` cannot read ``signal`` from ``s`` (None: it can, or does not need it)."""
    if signal == "topics":
        if not policy.restricted_topics:
            return None
        return "not logged" if s.topics is None else None
    if signal == "ranking_mode":
        if th is None:
            shown = "not logged" if s.ranking_mode is None else repr(s.ranking_mode)
            return f"{shown} is not a mode the policy defines"
        return None
    if signal == "hits_after_filter":
        return _hits_problem(s.hits_after_filter)
    if signal == "top_score":
        assert th is not None
        threshold = th.refuse_below if rule == "low_score_refuse" else th.caveat_below
        return None if threshold is None else th.score_problem(s.top_score)
    if not policy.produces(signal):
        return None
    value: object = getattr(s, signal)
    return _flag_problem(value)


def _fires(rule: str, s: Signals, th: ModeThresholds | None, restricted: frozenset[str]) -> bool:
    """Whether ``rule`` fires; only called once every signal it reads is usable."""
    if rule == "restricted_topic":
        return s.topics is not None and any(k in restricted for k in _topic_keys(s.topics))
    if rule == "no_hits":
        assert th is not None and s.hits_after_filter is not None
        return s.hits_after_filter < th.min_hits_after_filter
    if rule == "low_score_refuse":
        assert th is not None
        return th.is_below(s.top_score, th.refuse_below)
    if rule == "not_answerable":
        return s.answerable is False
    if rule == "ambiguous":
        return s.ambiguous is True
    if rule == "ungrounded":
        return s.ungrounded is True
    if rule == "low_score_caveat":
        assert th is not None
        return th.is_below(s.top_score, th.caveat_below)
    return rule == "answer"


def _thresholds(policy: NoAnswerPolicy, mode: object) -> ModeThresholds | None:
    if not isinstance(mode, str) or mode not in policy.ranking_modes:
        return None
    return policy.thresholds_for(mode)


def decide(policy: NoAnswerPolicy, signals: Signals) -> GateResult:
    """Apply the policy's checks in its gate order; the first that fires decides, and a check
    whose signal is unusable decides ``signal_missing`` (see the module)."""
    th = _thresholds(policy, signals.ranking_mode)
    restricted = frozenset(policy.restricted_topics)
    for i, rule in enumerate(policy.gate_order):
        for signal in RULE_SIGNALS[rule]:
            problem = _problem(signal, signals, th, policy, rule)
            if problem is not None:
                return _missing_result(policy, signals, th, policy.gate_order[i:])
        if _fires(rule, signals, th, restricted):
            return GateResult(RULE_DECISION[rule], rule, caveat=rule == "low_score_caveat")
    raise AssertionError("the validated gate order always ends with 'answer'")  # pragma: no cover


def _missing_result(
    policy: NoAnswerPolicy, s: Signals, th: ModeThresholds | None, rules: list[str]
) -> GateResult:
    """The fail-closed result: every signal the remaining checks lack, the first deciding."""
    found: dict[str, str] = {}
    for rule in rules:
        for signal in RULE_SIGNALS[rule]:
            if signal in found or (th is None and signal == "top_score"):
                continue
            problem = _problem(signal, s, th, policy, rule)
            if problem is not None:
                found[signal] = problem
    first = next(iter(found))
    return GateResult(
        policy.on_missing(first),
        SIGNAL_MISSING,
        missing=tuple(found),
        detail="; ".join(f"{k}: {v}" for k, v in found.items()),
        problems=tuple(found.items()),
    )


# Vectorised replay ------------------------------------------------------------------------


def _below(score: FloatArray, t: FloatArray, higher: BoolArray, inclusive: BoolArray) -> BoolArray:
    """Element-wise "score on the worse side of t"; NaN score or NaN t never counts."""
    worse_high = np.where(inclusive, score <= t, score < t)
    worse_low = np.where(inclusive, score >= t, score > t)
    return np.asarray(np.where(higher, worse_high, worse_low), dtype=bool)


def _flags(frame: pd.DataFrame, column: str) -> tuple[BoolArray, BoolArray]:
    """(is True, is False) for an optional nullable boolean column; neither = not logged."""
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


def _is_na(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _judge_topics(value: object, wanted: set[str]) -> bool:
    """Whether one logged ``topics`` value (a list/tuple of keys, or comma-separated text)
    names a key of ``wanted``; anything else is a malformed table."""
    if isinstance(value, str):
        return any(part.strip() in wanted for part in value.split(","))
    if isinstance(value, list | tuple):
        value = [item for item in value if not _is_na(item)]  # a missing key names nothing
        for item in value:
            if not isinstance(item, str):
                raise InputError(
                    "column 'topics': expected lists of topic keys or comma-separated text, "
                    f"got {item!r}"
                )
        return any(part.strip() in wanted for item in value for part in item.split(","))
    raise InputError(
        f"column 'topics': expected lists of topic keys or comma-separated text, got {value!r}"
    )


def _restricted_rows(frame: pd.DataFrame, restricted: list[str]) -> tuple[BoolArray, BoolArray]:
    """(rows whose ``topics`` hit the list, rows with no ``topics`` logged).

    ``topics`` holds a list/tuple of keys or comma-separated text; an empty list or text
    means "classified, no topic", None/NaN means "not classified"."""
    n = len(frame)
    if "topics" not in frame.columns:
        return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    column = frame["topics"].reset_index(drop=True)
    # None, NaN, NA and NaT are "not classified"; a list, tuple or text is classified
    unlogged = np.asarray(column.isna().to_numpy(), dtype=bool)
    if not restricted or n == 0:
        return np.zeros(n, dtype=bool), unlogged
    wanted = set(restricted)
    # Topic values repeat a lot (a replay reads a million traces with a few hundred distinct
    # values): judge each distinct value once, then index by code. Lists are not hashable;
    # they are judged as tuples.
    values = column.astype(object)
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:  # lists are not hashable: judge them as tuples
        values = pd.Series([tuple(v) if isinstance(v, list) else v for v in values], dtype=object)
        try:
            codes, uniques = pd.factorize(values, use_na_sentinel=True)
        except TypeError as exc:
            raise InputError(f"column 'topics': expected lists of topic keys ({exc})") from None
    flags = np.zeros(len(uniques) + 1, dtype=bool)  # the extra last slot serves code -1 (NA)
    for i, value in enumerate(uniques):
        flags[i] = _judge_topics(value, wanted)
    return np.asarray(flags[codes], dtype=bool), unlogged


def _numbers(frame: pd.DataFrame, column: str, what: str) -> FloatArray:
    n = len(frame)
    if column not in frame.columns:
        return np.full(n, np.nan)
    try:
        values = pd.to_numeric(frame[column])
        return np.asarray(values.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"column {column!r}: expected {what} or empty ({exc})") from None


def decide_frame(policy: NoAnswerPolicy, frame: pd.DataFrame) -> pd.DataFrame:
    """The gate over a table of signals, one output row per input row (same index).

    Columns read (each optional; an absent column is a signal nobody logged): ``ranking_mode``,
    ``hits_after_filter``, ``top_score``, ``answerable``, ``ambiguous``, ``ungrounded``
    (NaN/None/NA = not logged) and ``topics`` (list/tuple of keys or comma-separated text).
    Returns categorical ``decision``, ``rule`` and ``missing_signal`` (the first signal a
    signal_missing row lacked, else NaN) columns and a boolean ``caveat`` column; ``decide`` on
    any row gives the same decision, rule and first missing signal. A column of the wrong type
    (text where numbers belong) is an InputError: the table, not a row, is malformed.
    """
    n = len(frame)
    mode_names = list(policy.ranking_modes)
    if "ranking_mode" in frame.columns:
        codes = pd.Index(mode_names).get_indexer(frame["ranking_mode"].astype(object))
    else:
        codes = np.full(n, -1)
    mode_missing = np.asarray(codes < 0, dtype=bool)
    safe = np.where(mode_missing, 0, codes)
    ths = [policy.thresholds_for(m) for m in mode_names]

    def per_mode(values: list[float]) -> FloatArray:
        return np.asarray(np.asarray(values, dtype=np.float64)[safe], dtype=np.float64)

    nan = float("nan")
    min_hits = per_mode([float(t.min_hits_after_filter) for t in ths])
    refuse = per_mode([nan if t.refuse_below is None else t.refuse_below for t in ths])
    caveat = per_mode([nan if t.caveat_below is None else t.caveat_below for t in ths])
    low = per_mode([t.score_min for t in ths])
    high = per_mode([t.score_max for t in ths])
    higher = np.asarray([t.higher_is_better for t in ths], dtype=bool)[safe]
    inclusive = np.asarray([t.inclusive for t in ths], dtype=bool)[safe]

    hits = _numbers(frame, "hits_after_filter", "whole numbers")
    with np.errstate(invalid="ignore"):
        hits_bad = ~np.isfinite(hits) | (hits < 0) | (hits != np.floor(hits))
    score = _numbers(frame, "top_score", "numbers")
    with np.errstate(invalid="ignore"):
        score_bad = ~np.isfinite(score) | (score < low) | (score > high)

    restricted_hit, topics_unlogged = _restricted_rows(frame, policy.restricted_topics)
    flag_true: dict[str, BoolArray] = {}
    flag_unlogged: dict[str, BoolArray] = {}
    for signal in _FLAG_OF_RULE.values():
        is_true, is_false = _flags(frame, signal)
        flag_true[signal] = is_true if signal != "answerable" else is_false
        unlogged = ~(is_true | is_false)
        flag_unlogged[signal] = unlogged if policy.produces(signal) else np.zeros(n, dtype=bool)

    fires: dict[str, BoolArray] = {
        "restricted_topic": restricted_hit,
        "no_hits": hits < min_hits,
        "low_score_refuse": _below(score, refuse, higher, inclusive),
        "not_answerable": flag_true["answerable"],
        "ambiguous": flag_true["ambiguous"],
        "ungrounded": flag_true["ungrounded"],
        "low_score_caveat": _below(score, caveat, higher, inclusive),
        "answer": np.ones(n, dtype=bool),
    }
    none = np.zeros(n, dtype=bool)
    unusable: dict[str, dict[str, BoolArray]] = {
        "restricted_topic": {
            "topics": topics_unlogged if policy.restricted_topics else none,
        },
        "no_hits": {"ranking_mode": mode_missing, "hits_after_filter": hits_bad},
        "low_score_refuse": {
            "ranking_mode": mode_missing,
            "top_score": ~np.isnan(refuse) & score_bad,
        },
        "not_answerable": {"answerable": flag_unlogged["answerable"]},
        "ambiguous": {"ambiguous": flag_unlogged["ambiguous"]},
        "ungrounded": {"ungrounded": flag_unlogged["ungrounded"]},
        "low_score_caveat": {
            "ranking_mode": mode_missing,
            "top_score": ~np.isnan(caveat) & score_bad,
        },
        "answer": {},
    }
    g = len(GATE_RULES)
    conditions: list[BoolArray] = []
    choices: list[int] = []
    for rule in policy.gate_order:
        for signal, bad in unusable[rule].items():
            conditions.append(bad)
            choices.append(g + SIGNALS.index(signal))
        conditions.append(fires[rule])
        choices.append(GATE_RULES.index(rule))
    code = np.select(conditions, choices, default=GATE_RULES.index("answer")).astype(np.int64)
    is_missing = code >= g
    signal_code = np.where(is_missing, code - g, -1)
    decision_of = np.asarray(
        [DECISIONS.index(RULE_DECISION[r]) for r in GATE_RULES]
        + [DECISIONS.index(policy.on_missing(sig)) for sig in SIGNALS]
    )
    return pd.DataFrame(
        {
            "decision": pd.Categorical.from_codes(decision_of[code], categories=list(DECISIONS)),
            "rule": pd.Categorical.from_codes(
                np.where(is_missing, g, code), categories=list(RESULT_RULES)
            ),
            "caveat": code == GATE_RULES.index("low_score_caveat"),
            "missing_signal": pd.Categorical.from_codes(signal_code, categories=list(SIGNALS)),
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
