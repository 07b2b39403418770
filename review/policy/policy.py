"""The no-answer policy (policies/no-answer-policy.yaml): thresholds, gate order, targets, costs.

The file is what product owners and compliance sign. It holds, per ranking mode, the minimum
number of hits that must survive authorization filtering and the two score thresholds of the
gate (``refuse_below`` and ``caveat_below``), the order of the gate's checks, the release targets
that every proposed change is measured against, the cost of each kind of mistake, and a change
record.

Reading a threshold: a score "falls below" a threshold when it is on the worse side of it. For
``higher_is_better`` scores that means ``score < threshold`` (``inequality: strict``) or
``score <= threshold`` (``inequality: inclusive``); for ``lower_is_better`` scores (distances)
it means ``score > threshold`` or ``score >= threshold``.

Every score lies in its mode's documented range (bm25 from 0 with no upper bound, cosine
similarity from -1 to 1, the semantic reranker from 0 to 4): a threshold outside it is refused,
and a logged score outside it counts as not logged.

Fail closed: ``missing_signal`` names the non-answer (abstain or escalate) the gate gives when
a check needs a signal the request did not log, or logged as NaN, infinite or out of range.
Optional signals the assistant does not produce at all are listed under ``not_produced``: their
absence does not block (a value that is logged still counts). Without the section every signal
is required and a missing one abstains. ``evidence_gate`` holds the thresholds of the evidence
gate (docs/evidence-gate.md; see :mod:`review.policy.evidence`), with its optional age limits
per claim kind or source category (``freshness``, see :mod:`review.policy.freshness`).

Hybrid (RRF) fused scores are built from ranks, are tiny and shift with the number of fused
queries, so the file refuses thresholds on them: the hybrid mode may name another mode's score
with ``threshold_on`` (normally ``semantic_reranker``), whose thresholds then apply.

Validation is strict (unknown keys, duplicate keys, wrong types and inconsistent values are
refused) and every problem names the file, the key path and the problem, one per line.
"""

# Long module: the policy file's model, its validation (each rule's message) and the edits
# that propose a change (thresholds, slices) read and write the same fields.

from __future__ import annotations

import datetime as dt
import hashlib
import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from review.core import readable
from review.core.errors import InputError, PolicyFileError
from review.core.taxonomy import KEY_RE, policies_dir, taxonomy
from review.core.yamlstrict import format_validation_error, load_yaml_text
from review.policy.freshness import (
    FreshnessLimit,
    FreshnessRule,
    freshness_limit,
    freshness_problems,
)

RANKING_MODES: Final = ("bm25", "vector", "semantic_reranker", "hybrid")
GATE_RULES: Final = (
    "restricted_topic",
    "no_hits",
    "low_score_refuse",
    "not_answerable",
    "ambiguous",
    "ungrounded",
    "low_score_caveat",
    "answer",
)
#: What the gate returns, instead of one of GATE_RULES, when a check's input is missing.
SIGNAL_MISSING: Final = "signal_missing"
#: The inputs of the threshold gate, in the order the gate needs them.
SIGNALS: Final = (
    "topics",
    "ranking_mode",
    "hits_after_filter",
    "top_score",
    "answerable",
    "ambiguous",
    "ungrounded",
)
#: How each signal reads on a screen or in a report ("top score", never ``top_score``); the
#: keys stay in what programs read (stored results, JSON and CSV exports).
SIGNAL_LABELS: Final[dict[str, str]] = {
    "topics": "topics",
    "ranking_mode": "ranking mode",
    "hits_after_filter": "hit count after filtering",
    "top_score": "top score",
    "answerable": "answerable flag",
    "ambiguous": "ambiguous flag",
    "ungrounded": "ungrounded flag",
}


def signal_label(name: str) -> str:
    """A gate signal as people read it ("top score"); a name it does not know as given."""
    return SIGNAL_LABELS.get(name, name)


def problem_words(problem: str) -> str:
    """What was wrong with a signal as people read it: a NaN or infinite value is missing
    ("missing (NaN)"); the other problems already read as words ("not logged")."""
    return f"missing ({problem})" if problem in ("NaN", "infinite") else problem


#: Signals an assistant may declare it does not produce (the ``ambiguous`` flag is
#: not in the default answer schema, the groundedness check is an option, and a retrieval-only
#: gate has no ``answerable`` flag); their checks are then off.
OPTIONAL_SIGNALS: Final = ("answerable", "ambiguous", "ungrounded")
#: The documented range of each scored mode's scores (None: no upper bound).
DOCUMENTED_RANGES: Final[dict[str, tuple[float, float | None]]] = {
    "bm25": (0.0, None),
    "vector": (-1.0, 1.0),
    "semantic_reranker": (0.0, 4.0),
}
#: Sections added after policies were first signed: left out of the canonical form when a
#: file does not set them, so the signatures of older versions stay valid.
LATER_SECTIONS: Final = ("missing_signal", "evidence_gate", "partial_answers", "release")

# Rules that stop an answer; a caveat is an answer, so it must come after all of them.
BLOCKING_RULES: Final = ("no_hits", "low_score_refuse", "not_answerable", "ambiguous", "ungrounded")

# Release-target keys: name -> (metric key in the metrics dicts of review.policy.selective,
# bound kind)
TARGET_METRICS: Final[dict[str, tuple[str, Literal["min", "max"]]]] = {
    "min_answer_rate_answerable": ("answer_rate_answerable", "min"),
    "max_false_refusal_rate": ("false_refusal_rate", "max"),
    "min_abstention_recall": ("abstention_recall", "min"),
    "max_unsupported_answer_rate": ("unsupported_answer_rate", "max"),
    "min_coverage": ("coverage", "min"),
    "max_selective_risk": ("selective_risk", "max"),
}
OVERALL_TARGETS: Final = (
    "min_answer_rate_answerable",
    "max_false_refusal_rate",
    "min_abstention_recall",
    "max_unsupported_answer_rate",
)

ScoreDirection = Literal["higher_is_better", "lower_is_better"]
Inequality = Literal["strict", "inclusive"]
Threshold = Annotated[float, Field(allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=3, max_length=500)]
NonAnswer = Literal["abstain", "escalate"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _date_from_text(value: Any) -> Any:
    # strict=False on the date fields would also turn integers into dates (Unix time); only
    # ISO text (YAML timestamps arrive as text) or a date object is a date here.
    if value is None or isinstance(value, (str, dt.date)):
        return value
    raise ValueError("write the date as YYYY-MM-DD")


class ModePolicy(_Strict):
    """Thresholds of one ranking mode."""

    scale: Text = Field(description="What the scores of this mode look like (range, bands)")
    min_hits_after_filter: int = Field(ge=0)
    refuse_below: Threshold | None = None
    caveat_below: Threshold | None = None
    score_direction: ScoreDirection | None = None
    inequality: Inequality | None = None
    threshold_on: Literal["bm25", "vector", "semantic_reranker"] | None = None

    def range_of(self, mode: str) -> tuple[float, float | None]:
        """The range the mode's scores are documented to take (None: no upper bound)."""
        return DOCUMENTED_RANGES.get(mode, (-math.inf, None))


class MissingSignalPolicy(_Strict):
    """What the gate does when a check's input is missing, NaN, infinite or out of range."""

    decision: NonAnswer
    per_signal: dict[str, NonAnswer] = Field(default_factory=dict)
    not_produced: list[str] = Field(default_factory=list)


class EvidenceGatePolicy(_Strict):
    """Thresholds of the evidence gate; every key is required, none has a default
    in code, except ``freshness``: the optional age limits per claim kind or source category
    (:mod:`review.policy.freshness`), without which ``max_age_days`` applies to every claim."""

    min_support: Rate = Field(description="support_score a passage needs to support a claim")
    required_coverage: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = Field(
        description="share of the required claims that must be supported"
    )
    max_age_days: int | None = Field(
        ge=0, description="oldest effective date allowed, in days before as_of (null: no limit)"
    )
    superseded: Literal["stale", "current"] = Field(
        description="stale: a superseded passage never supports an answer"
    )
    max_contradictions: int = Field(ge=0, description="unresolved contradictions tolerated")
    on_missing_signal: NonAnswer
    freshness: list[FreshnessRule] = Field(
        default_factory=list, description="age limits per claim kind or source category"
    )

    def limit_for(self, claim_kind: str | None, category: str | None) -> FreshnessLimit:
        """The age limit for a passage of ``category`` supporting a claim of ``claim_kind``."""
        return freshness_limit(self.freshness, self.max_age_days, claim_kind, category)


class Targets(_Strict):
    """Release gates; both sides are constrained so neither extreme can pass."""

    min_answer_rate_answerable: Rate
    max_false_refusal_rate: Rate
    min_abstention_recall: Rate
    max_unsupported_answer_rate: Rate
    slice_gates: dict[str, dict[str, Rate]] = Field(default_factory=dict)


class ReleasePolicy(_Strict):
    """Bounds of the release-table rows (docs/release-gate.md) that ``targets`` does not name;
    checked by the release gate overall and on every slice that has a slice gate."""

    min_supported_answer_rate: Rate = Field(
        default=0.9, description="acceptable answers on cases expecting answer"
    )
    min_reason_code_accuracy: Rate = Field(
        default=0.9, description="non-answers with a right reason code, of all non-answers"
    )
    min_citation_validity: Rate = Field(
        default=1.0, description="answers whose every citation was sent and supports them"
    )
    max_boundary_drift: Rate = Field(
        default=0.05,
        description="move of the false-refusal or unsupported-answer rate from a baseline run",
    )


class Costs(_Strict):
    """What each outcome costs (any unit, per item); errors must cost something."""

    false_refusal: float = Field(gt=0, allow_inf_nan=False)
    unsupported_answer: float = Field(gt=0, allow_inf_nan=False)
    correct_refusal: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    correct_answer: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class ChangeEntry(_Strict):
    version: int = Field(ge=1)
    date: dt.date = Field(strict=False)
    author: str = Field(min_length=1, max_length=200)
    summary: Text

    _text_date = field_validator("date", mode="before")(_date_from_text)


@dataclass(frozen=True)
class ModeThresholds:
    """The thresholds that apply to one ranking mode, with hybrid's ``threshold_on`` resolved."""

    mode: str
    scored_mode: str | None  # the mode whose score is compared (None: no score checks)
    min_hits_after_filter: int
    refuse_below: float | None
    caveat_below: float | None
    higher_is_better: bool
    inclusive: bool
    score_min: float = -math.inf
    score_max: float = math.inf

    def score_problem(self, score: object) -> str | None:
        """Why ``score`` cannot be compared with this mode's thresholds (None: it can)."""
        if score is None:
            return "not logged"
        if isinstance(score, bool) or not isinstance(score, int | float):
            return f"not a number ({score!r})"
        if math.isnan(score):
            return "NaN"
        if math.isinf(score):
            return "infinite"
        if not self.score_min <= score <= self.score_max:
            return f"{score:g} is outside the {self.scored_mode} range"
        return None

    def is_below(self, score: float | None, threshold: float | None) -> bool:
        """True when ``score`` is on the worse side of ``threshold`` (missing values: False)."""
        if score is None or threshold is None or math.isnan(score):
            return False
        if self.higher_is_better:
            return score <= threshold if self.inclusive else score < threshold
        return score >= threshold if self.inclusive else score > threshold


class NoAnswerPolicy(_Strict):
    version: int = Field(ge=1)
    ranking_modes: dict[str, ModePolicy]
    restricted_topics: list[str] = Field(default_factory=list)
    gate_order: list[str]
    targets: Targets
    costs: Costs
    approved_on: dt.date | None = Field(default=None, strict=False)
    change_record: list[ChangeEntry] = Field(min_length=1)
    missing_signal: MissingSignalPolicy | None = None
    evidence_gate: EvidenceGatePolicy | None = None
    #: whether partial answers are allowed (a decision each team makes). Not allowed (the
    #: default): a partial answer to an answerable question counts as a refusal in the
    #: decision metrics.
    partial_answers: Literal["allowed", "not_allowed"] = "not_allowed"
    #: the other rows of the release table (defaults when the file does not set them)
    release: ReleasePolicy = Field(default_factory=ReleasePolicy)

    @property
    def allows_partial_answers(self) -> bool:
        return self.partial_answers == "allowed"

    _text_date = field_validator("approved_on", mode="before")(_date_from_text)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> NoAnswerPolicy:
        problems: list[str] = []
        problems += _mode_problems(self.ranking_modes)
        problems += _gate_order_problems(self.gate_order)
        seen: set[str] = set()
        for i, topic in enumerate(self.restricted_topics):
            if not KEY_RE.match(topic):
                problems.append(
                    f"restricted_topics.{i}: {topic!r} is not a topic key "
                    "(letters, digits and _, starting with a letter)"
                )
            if topic in seen:
                problems.append(f"restricted_topics.{i}: {topic!r} is listed twice")
            seen.add(topic)
        context = info.context if isinstance(info.context, dict) else {}
        slices = context.get("slices")
        if slices is None:
            slices = set(taxonomy().slices)
        problems += _target_problems(self.targets, set(slices))
        problems += _record_problems(self.version, self.change_record, self.approved_on)
        problems += _missing_signal_problems(self.missing_signal)
        if self.evidence_gate is not None:
            problems += freshness_problems(self.evidence_gate.freshness, "evidence_gate.freshness")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def canonical_data(self) -> dict[str, Any]:
        """The policy as JSON-ready data with defaults filled in: what a signature covers.
        Sections added later are left out when the file does not set them, and so are the
        evidence gate's freshness rules when there are none."""
        exclude: dict[str, Any] = {
            k: True for k in LATER_SECTIONS if k not in self.model_fields_set
        }
        if self.evidence_gate is not None and not self.evidence_gate.freshness:
            exclude.setdefault("evidence_gate", {"freshness": True})
        return self.model_dump(mode="json", exclude=exclude)

    def produces(self, signal: str) -> bool:
        """False for a signal the file says the assistant does not produce (its check is off)."""
        ms = self.missing_signal
        return ms is None or signal not in ms.not_produced

    def on_missing(self, signal: str) -> str:
        """The non-answer the gate gives when ``signal`` is missing (abstain or escalate)."""
        ms = self.missing_signal
        if ms is None:
            return "abstain"
        return ms.per_signal.get(signal, ms.decision)

    def thresholds_for(self, mode: str) -> ModeThresholds:
        """The thresholds for ``mode``; raises InputError for a mode the policy does not define."""
        entry = self.ranking_modes.get(mode)
        if entry is None:
            raise InputError(
                f"ranking mode {mode!r} is not defined in the no-answer policy "
                f"(defined: {', '.join(self.ranking_modes)})"
            )
        scored = entry
        scored_mode: str | None = mode
        if mode == "hybrid":
            scored_mode = entry.threshold_on
            scored = self.ranking_modes[scored_mode] if scored_mode else entry
        low, high = scored.range_of(scored_mode) if scored_mode else (-math.inf, None)
        return ModeThresholds(
            mode=mode,
            scored_mode=scored_mode,
            min_hits_after_filter=entry.min_hits_after_filter,
            refuse_below=scored.refuse_below if scored_mode else None,
            caveat_below=scored.caveat_below if scored_mode else None,
            higher_is_better=scored.score_direction != "lower_is_better",
            inclusive=scored.inequality == "inclusive",
            score_min=low,
            score_max=math.inf if high is None else high,
        )


def _mode_problems(modes: dict[str, ModePolicy]) -> list[str]:
    problems: list[str] = []
    if not modes:
        problems.append("ranking_modes: define at least one ranking mode")
    for name, m in modes.items():
        where = f"ranking_modes.{name}"
        if name not in RANKING_MODES:
            problems.append(f"{where}: unknown ranking mode; use {', '.join(RANKING_MODES)}")
        elif name == "hybrid":
            problems += _hybrid_problems(where, m, modes)
        else:
            problems += _scored_mode_problems(where, name, m)
    return problems


def _hybrid_problems(where: str, m: ModePolicy, modes: dict[str, ModePolicy]) -> list[str]:
    """The hybrid mode sets no threshold of its own: it borrows the one of ``threshold_on``."""
    problems: list[str] = []
    for key in ("refuse_below", "caveat_below"):
        if getattr(m, key) is not None:
            problems.append(
                f"{where}.{key}: refused: hybrid (RRF) fused scores are rank-based, "
                "small and shift with the number of fused queries, so they are too "
                "volatile to threshold; remove it and set threshold_on: "
                "semantic_reranker (or another component mode) instead"
            )
    for key in ("score_direction", "inequality"):
        if getattr(m, key) is not None:
            problems.append(
                f"{where}.{key}: not used for hybrid; the mode named by threshold_on supplies it"
            )
    if m.threshold_on is not None:
        target = modes.get(m.threshold_on)
        if target is None:
            problems.append(
                f"{where}.threshold_on: {m.threshold_on!r} is not defined under ranking_modes"
            )
        elif target.refuse_below is None and target.caveat_below is None:
            problems.append(
                f"{where}.threshold_on: ranking_modes.{m.threshold_on} sets no threshold to apply"
            )
    return problems


def _scored_mode_problems(where: str, name: str, m: ModePolicy) -> list[str]:
    """A mode with scores of its own: thresholds inside the range its scores take, with a
    direction and an inequality, the caveat band between refusing and answering plainly."""
    problems: list[str] = []
    if m.threshold_on is not None:
        problems.append(f"{where}.threshold_on: only the hybrid mode may borrow thresholds")
    low, high = m.range_of(name)
    for key in ("refuse_below", "caveat_below"):
        value = getattr(m, key)
        if value is not None and not low <= value <= (math.inf if high is None else high):
            shown = f"{low:g} to {high:g}" if high is not None else f"{low:g} upwards"
            problems.append(
                f"{where}.{key}: {value:g} is outside the range {name} scores take "
                f"({shown}); a threshold there would refuse everything or nothing"
            )
    has_threshold = m.refuse_below is not None or m.caveat_below is not None
    for key in ("score_direction", "inequality"):
        if has_threshold and getattr(m, key) is None:
            choices = (
                "higher_is_better or lower_is_better"
                if key == "score_direction"
                else "strict or inclusive"
            )
            problems.append(f"{where}.{key}: required when a threshold is set ({choices})")
    if m.refuse_below is not None and m.caveat_below is not None:
        lower = m.score_direction == "lower_is_better"
        wrong = m.caveat_below > m.refuse_below if lower else m.caveat_below < m.refuse_below
        if wrong:
            side = "at or below" if lower else "at or above"
            problems.append(
                f"{where}.caveat_below: {m.caveat_below:g} must be {side} refuse_below "
                f"({m.refuse_below:g}): the caveat band lies between refusing and answering "
                "plainly"
            )
    return problems


def _missing_signal_problems(ms: MissingSignalPolicy | None) -> list[str]:
    if ms is None:
        return []
    problems: list[str] = []
    for signal in ms.per_signal:
        if signal not in SIGNALS:
            problems.append(
                f"missing_signal.per_signal.{signal}: unknown signal; use {', '.join(SIGNALS)}"
            )
        elif signal in ms.not_produced:
            problems.append(
                f"missing_signal.per_signal.{signal}: the signal is listed under not_produced"
            )
    for i, signal in enumerate(ms.not_produced):
        if signal not in OPTIONAL_SIGNALS:
            problems.append(
                f"missing_signal.not_produced.{i}: {signal!r} cannot be switched off; only "
                f"{', '.join(OPTIONAL_SIGNALS)} can"
            )
        if ms.not_produced.count(signal) > 1 and ms.not_produced.index(signal) == i:
            problems.append(f"missing_signal.not_produced.{i}: {signal!r} is listed twice")
    return problems


def _gate_order_problems(order: list[str]) -> list[str]:
    problems: list[str] = []
    unknown = [r for r in order if r not in GATE_RULES]
    missing = [r for r in GATE_RULES if r not in order]
    twice = sorted({r for r in order if order.count(r) > 1})
    if unknown:
        problems.append(
            f"gate_order: unknown {readable.plural(len(unknown), 'rule')} {', '.join(unknown)}"
        )
    if missing:
        problems.append(
            f"gate_order: missing {readable.plural(len(missing), 'rule')} {', '.join(missing)}"
        )
    if twice:
        problems.append(
            f"gate_order: {readable.plural(len(twice), 'rule')} listed twice: {', '.join(twice)}"
        )
    if problems:
        problems.append(f"gate_order: must be an ordering of {', '.join(GATE_RULES)}")
        return problems
    if order[0] != "restricted_topic":
        problems.append(
            "gate_order: restricted_topic must come first (a restricted question is escalated "
            "whatever the other signals say)"
        )
    if order[-1] != "answer":
        problems.append(
            "gate_order: answer must come last (it is what happens when no check fires)"
        )
    caveat = order.index("low_score_caveat")
    late = [r for r in BLOCKING_RULES if order.index(r) > caveat]
    if late:
        problems.append(
            "gate_order: low_score_caveat must come after every rule that blocks an answer "
            f"(a caveat is still an answer); move it after {', '.join(late)}"
        )
    return problems


def _target_problems(targets: Targets, slices: set[str]) -> list[str]:
    problems: list[str] = []
    if targets.min_abstention_recall <= 0:
        problems.append(
            "targets.min_abstention_recall: must be above 0, otherwise answering everything "
            "would pass"
        )
    if targets.min_answer_rate_answerable <= 0:
        problems.append(
            "targets.min_answer_rate_answerable: must be above 0, otherwise refusing everything "
            "would pass"
        )
    if targets.max_false_refusal_rate >= 1:
        problems.append(
            "targets.max_false_refusal_rate: must be below 1, otherwise refusing everything "
            "would pass"
        )
    if targets.max_unsupported_answer_rate >= 1:
        problems.append("targets.max_unsupported_answer_rate: must be below 1")
    for key, gates in targets.slice_gates.items():
        where = f"targets.slice_gates.{key}"
        if key not in slices:
            problems.append(f"{where}: not a slice in the taxonomy ({', '.join(sorted(slices))})")
        if not gates:
            problems.append(f"{where}: name at least one metric bound")
        for metric in gates:
            if metric not in TARGET_METRICS:
                problems.append(
                    f"{where}.{metric}: unknown metric; use {', '.join(TARGET_METRICS)}"
                )
    return problems


def _record_problems(
    version: int, record: list[ChangeEntry], approved_on: dt.date | None
) -> list[str]:
    problems: list[str] = []
    versions = [e.version for e in record]
    for i in range(1, len(record)):
        if versions[i] <= versions[i - 1]:
            problems.append(
                f"change_record.{i}.version: {versions[i]} must be greater than the entry "
                f"before it ({versions[i - 1]})"
            )
        if record[i].date < record[i - 1].date:
            problems.append(f"change_record.{i}.date: earlier than the entry before it")
    if record and record[-1].version != version:
        problems.append(
            f"change_record: the last entry must describe version {version} (it describes "
            f"version {record[-1].version})"
        )
    if approved_on is not None and record and approved_on < record[-1].date:
        problems.append(
            f"approved_on: {approved_on.isoformat()} is before the change it approves "
            f"({record[-1].date.isoformat()})"
        )
    return problems


# Loading ------------------------------------------------------------------------------------


def default_policy_path() -> Path:
    return policies_dir() / "no-answer-policy.yaml"


def _validate(data: Any, source: str, slices: set[str] | None) -> NoAnswerPolicy:
    if not isinstance(data, dict):
        raise PolicyFileError(f"{source}: (top level): expected a mapping of keys to values")
    if slices is None:
        slices = set(taxonomy().slices)
    try:
        return NoAnswerPolicy.model_validate(data, context={"slices": slices})
    except ValidationError as exc:
        raise PolicyFileError(format_validation_error(source, exc)) from None


def parse_policy(
    text: str, source: str = "<no-answer policy>", slices: set[str] | None = None
) -> NoAnswerPolicy:
    """Parse and validate policy text; ``slices`` defaults to the taxonomy in force.

    The same text against the same slices gives the same (frozen) policy, so a valid text is
    parsed once: kept by the text itself and the slices, never by where it came from (a
    policy read afresh from the database is the one its text says). Parsing costs 0.1 s (a
    strict pure-Python YAML reader), and a signature parsed the same two texts three times.
    An invalid text is not kept: it is read again so that the error names ``source``."""
    known = frozenset(taxonomy().slices) if slices is None else frozenset(slices)
    try:
        return _parsed(text, known)
    except InputError:
        return _validate(load_yaml_text(text, source), source, set(known))


@lru_cache(maxsize=64)
def _parsed(text: str, slices: frozenset[str]) -> NoAnswerPolicy:
    return _validate(load_yaml_text(text, "<no-answer policy>"), "<no-answer policy>", set(slices))


def load_policy(path: Path | None = None, slices: set[str] | None = None) -> NoAnswerPolicy:
    """Read and validate a policy file (default: policies/no-answer-policy.yaml)."""
    path = path or default_policy_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyFileError(f"{path.name}: cannot be read: {exc.strerror}") from None
    return parse_policy(text, path.name, slices)


def canonical_text(
    text: str, source: str = "<no-answer policy>", slices: set[str] | None = None
) -> str:
    """The validated policy as YAML with sorted keys and defaults filled in.

    Comments, key order, quoting and number spelling (``8`` vs ``8.0``) do not change it, so its
    hash identifies what the policy means rather than how the file is laid out.
    """
    policy = parse_policy(text, source, slices)
    return yaml.safe_dump(
        policy.canonical_data(),
        sort_keys=True,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )


def policy_sha256(
    text: str, source: str = "<no-answer policy>", slices: set[str] | None = None
) -> str:
    """SHA-256 (hex) of :func:`canonical_text`; what a sign-off records."""
    return hashlib.sha256(canonical_text(text, source, slices).encode("utf-8")).hexdigest()


# Proposals -----------------------------------------------------------------------------------


class _Keep(Enum):
    KEEP = "keep"


KEEP: Final = _Keep.KEEP


def _yaml_value(value: Any) -> str:
    """One YAML scalar in flow form (``0.55``, ``null``, ``1.0e-07``, ``'text'``)."""
    dumped = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000)
    return dumped.split("\n", 1)[0]


def _mapping_item(node: Node, key: str) -> tuple[ScalarNode, Node] | None:
    if not isinstance(node, MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def _set_key(text: str, mapping: Node, key: str, value: Any) -> _Edit | None:
    """Replace the scalar value of ``key`` in a block mapping, or insert the key first."""
    if not isinstance(mapping, MappingNode) or mapping.flow_style or not mapping.value:
        return None
    found = _mapping_item(mapping, key)
    if found is not None:
        _, v = found
        if not isinstance(v, ScalarNode) or v.style not in (None, ""):
            return None  # quoted or block scalar: let the fallback rewrite the file
        return _Edit(v.start_mark.index, v.end_mark.index, _yaml_value(value))
    first_key = mapping.value[0][0]
    indent = " " * first_key.start_mark.column
    at = first_key.start_mark.index
    if text[at - first_key.start_mark.column : at].strip():
        return None  # the first key shares its line with something else
    return _Edit(at, at, f"{key}: {_yaml_value(value)}\n{indent}")


def _apply(text: str, edits: list[_Edit]) -> str:
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: e.start] + e.text + text[e.end :]
    return text


def _rewrite(
    text: str,
    source: str,
    slices: set[str] | None,
    new_data: dict[str, Any],
    plan: list[_Edit] | None,
) -> str:
    """Edited text when the small edit reproduces ``new_data``; else a full re-dump."""
    expected = _validate(new_data, source, slices)
    if plan is not None:
        edited = _apply(text, plan)
        try:
            if parse_policy(edited, source, slices) == expected:
                return edited
        except PolicyFileError:
            pass
    return yaml.safe_dump(new_data, sort_keys=False, allow_unicode=True, width=100)


def replace_thresholds(
    policy_text: str,
    mode: str,
    *,
    refuse_below: float | _Keep | None = KEEP,
    caveat_below: float | _Keep | None = KEEP,
    source: str = "<no-answer policy>",
    slices: set[str] | None = None,
) -> str:
    """New policy text with ``mode``'s thresholds changed (``None`` clears one, KEEP keeps it).

    Only the changed values are rewritten, so comments and layout survive; if the file's layout
    does not allow a small edit, the whole file is re-written from the parsed data (comments
    are then lost). The result is always a valid policy, or PolicyFileError says why not (for
    example a caveat threshold on the wrong side of the refuse threshold).
    """
    policy = parse_policy(policy_text, source, slices)
    if mode not in policy.ranking_modes:
        raise InputError(
            f"{source}: ranking mode {mode!r} is not defined (defined: "
            f"{', '.join(policy.ranking_modes)})"
        )
    if mode == "hybrid":
        target = policy.ranking_modes[mode].threshold_on
        hint = f"change ranking_modes.{target} instead" if target else "set threshold_on"
        raise InputError(
            f"{source}: ranking_modes.hybrid: fused hybrid scores are not thresholded; {hint}"
        )
    changes = {
        key: value
        for key, value in (("refuse_below", refuse_below), ("caveat_below", caveat_below))
        if not isinstance(value, _Keep)
    }
    data = load_yaml_text(policy_text, source)
    assert isinstance(data, dict)
    data["ranking_modes"][mode].update(
        {k: (None if v is None else float(v)) for k, v in changes.items()}
    )
    plan: list[_Edit] | None = []
    root = yaml.compose(policy_text, Loader=yaml.SafeLoader)
    modes = _mapping_item(root, "ranking_modes") if root is not None else None
    block = _mapping_item(modes[1], mode) if modes else None
    for key, value in changes.items():
        edit = _set_key(policy_text, block[1], key, value) if block else None
        if edit is None or plan is None:
            plan = None
            continue
        if any(edit.start == e.start for e in plan):
            plan = None  # two insertions at one place: simpler to re-dump
            continue
        plan.append(edit)
    return _rewrite(policy_text, source, slices, data, plan)


def record_change(
    policy_text: str,
    *,
    author: str,
    summary: str,
    on: dt.date,
    source: str = "<no-answer policy>",
    slices: set[str] | None = None,
) -> str:
    """New policy text for the next version: version + 1, a change-record entry, not approved.

    Comments and layout survive where the file's layout allows a small edit.
    """
    policy = parse_policy(policy_text, source, slices)
    new_version = policy.version + 1
    entry = {"version": new_version, "date": on, "author": author, "summary": summary}
    data = load_yaml_text(policy_text, source)
    assert isinstance(data, dict)
    data["version"] = new_version
    data["approved_on"] = None
    data["change_record"] = [*data["change_record"], entry]

    plan: list[_Edit] | None = []
    root = yaml.compose(policy_text, Loader=yaml.SafeLoader)
    edits = [
        _set_key(policy_text, root, "version", new_version) if root else None,
        _set_key(policy_text, root, "approved_on", None) if root else None,
        _append_entry(policy_text, root, entry) if root else None,
    ]
    if any(e is None for e in edits) or len({e.start for e in edits if e}) < len(edits):
        plan = None
    else:
        plan = [e for e in edits if e is not None]
    return _rewrite(policy_text, source, slices, data, plan)


def _append_entry(text: str, root: Node, entry: dict[str, Any]) -> _Edit | None:
    found = _mapping_item(root, "change_record")
    if found is None:
        return None
    seq = found[1]
    if not isinstance(seq, SequenceNode) or seq.flow_style or not seq.value:
        return None
    last = seq.value[-1]
    if not isinstance(last, MappingNode) or last.flow_style or not last.value:
        return None
    key_col = last.value[0][0].start_mark.column
    line_start = text.rfind("\n", 0, last.start_mark.index) + 1
    dash = text.find("-", line_start, last.start_mark.index)
    if dash < 0:
        return None
    dash_col = dash - line_start
    lines = [
        " " * key_col + f"{k}: {_yaml_value(v)}" for k, v in entry.items()
    ]  # every key at the items' key column; the first one gets the dash
    first = lines[0]
    lines[0] = " " * dash_col + "-" + first[dash_col + 1 :]
    block = "\n".join(lines)
    end = last.end_mark.index
    if end > 0 and text[end - 1] == "\n":
        return _Edit(end, end, block + "\n")
    newline = text.find("\n", end)
    at = len(text) if newline < 0 else newline
    return _Edit(at, at, "\n" + block)
