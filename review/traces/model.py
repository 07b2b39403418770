"""Production traces: the canonical model (a trace, its chunks and citations, a parsed item or
a rejected record) and the vocabulary a trace's decision, reason code and feedback use."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TypeAlias

from review.core import readable
from review.core.taxonomy import CORE_DECISIONS, Taxonomy

__all__ = [
    "DEFAULT_REASON_CODES",
    "DEFAULT_VOCAB",
    "FEEDBACK_VALUES",
    "NEGATIVE_FEEDBACK",
    "AttrValue",
    "Chunk",
    "Citation",
    "ParsedTrace",
    "Rejected",
    "Trace",
    "TraceItem",
    "TraceVocabulary",
]


AttrValue: TypeAlias = str | int | float | bool


DEFAULT_REASON_CODES = (
    "no_answer_bearing_evidence",
    "required_claim_not_covered",
    "support_below_threshold",
    "conflicting_evidence",
    "evidence_stale",
    "source_not_allowed",
    "ambiguous_question",
    "restricted_topic",
    "false_premise",
    "signal_missing",
)


FEEDBACK_VALUES = ("positive", "negative", "expected_answer", "answer_wrong")

#: How each feedback value reads on a screen (the words of the reviewer's own verdicts).
FEEDBACK_LABELS = {
    "positive": "positive",
    "negative": "negative",
    "expected_answer": "I expected an answer",
    "answer_wrong": "this answer is wrong",
}


def feedback_label(value: str | None) -> str:
    """A feedback value as people read it; another value as logged, a key humanised."""
    if not value:
        return ""
    if value in FEEDBACK_LABELS:
        return FEEDBACK_LABELS[value]
    return readable.humanize(value) if "_" in value and value.islower() else value


NEGATIVE_FEEDBACK = frozenset({"negative", "expected_answer", "answer_wrong"})


MAX_TEXT = 1_000_000  # characters in any one text field


CLOSED_MEMORY = 100_000  # recently closed trace ids remembered to refuse late spans


# ---------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieved chunk, as the production system saw it."""

    chunk_id: str
    doc_id: str | None = None
    doc_version: int | None = None
    rank: int | None = None  # 1-based; None when the exporter recorded no rank
    score: float | None = None
    text: str = ""
    filtered: bool = False  # removed by authorization before the context was built
    effective_date: dt.date | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    """A claim of the answer and the chunk ids cited for it (possibly none)."""

    claim: str
    chunk_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Trace:
    """One production request, whatever format it was exported in."""

    trace_id: str
    time: dt.datetime  # timezone-aware, UTC
    query: str
    rewritten_query: str | None = None
    user_role: str | None = None
    identity_scopes: tuple[str, ...] = ()
    chunks: tuple[Chunk, ...] = ()
    context_sent: str = ""
    ranking_mode: str | None = None
    hits_after_filter: int | None = None
    top_score: float | None = None
    answerable: bool | None = None
    ambiguous: bool | None = None
    ungrounded: bool | None = None
    topics: tuple[str, ...] | None = None  # topic keys of the question (None: not classified)
    decision: str | None = None
    reason_code: str | None = None
    answer_text: str = ""
    citations: tuple[Citation, ...] = ()
    feedback: str | None = None
    #: the user asked again in other words right after this response (None: not logged)
    reformulated: bool | None = None
    #: the user opened a source cited by this response (None: not logged, or nothing cited)
    citation_opened: bool | None = None
    versions: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedTrace:
    """A trace read from a file; ``line_no`` is its line (for OTLP/Langfuse: module docs)."""

    trace: Trace
    line_no: int


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record refused with ``skip_bad=True``: its line, its raw text and why."""

    line_no: int
    raw_line: str
    reason: str

    def message(self, source: str) -> str:
        return f"{source}: line {self.line_no}: {self.reason}"


TraceItem: TypeAlias = ParsedTrace | Rejected


@dataclass(frozen=True, slots=True)
class TraceVocabulary:
    """The decisions and reason codes a trace may carry (the taxonomy's, by default)."""

    decisions: frozenset[str] = frozenset(CORE_DECISIONS)
    reason_codes: frozenset[str] = frozenset(DEFAULT_REASON_CODES)

    @classmethod
    def from_taxonomy(cls, tax: Taxonomy) -> TraceVocabulary:
        return cls(frozenset(tax.decisions), frozenset(tax.reason_codes))


DEFAULT_VOCAB = TraceVocabulary()
