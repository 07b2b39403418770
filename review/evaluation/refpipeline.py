"""A small deterministic retrieval-and-gate pipeline over the demo corpus (no model needed).

Two configurations ship so every evaluation view has real data:

- ``reference``: scores each passage (paragraph, list item or table row) of the documents the
  identity may see by the share of the question's content words it contains, reported on a
  cosine-like scale (0.33 + 0.67 x share, as the policy's vector mode expects), prefers the
  current version on ties, never takes a passage that ends in a question as evidence (a
  restated question answers nothing), escalates restricted topics, and abstains below 0.55.
- ``naive``: the same retrieval refusing only below 0.46, with no preference for the current
  version and taking any passage as evidence, so it answers on weak or stale evidence and
  from a distractor that merely repeats the question (the known ways it is worse: it fails
  the high-overlap distractor check and cites superseded versions).
- ``sampled`` (:class:`Sampled`): the reference with a sampling step, its score moved by a
  seeded random amount on every call, so repeated runs disagree near the threshold (for the
  pass rate and decision variance over repeats).

All follow the pipeline contract of ``workbench evaluate``: they take the question, the
visible documents and the identity, and return decision, text, citations and score.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from review.corpus.docformat import parse_blocks
from review.evaluation.execution import PipelineDocument

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?")
_STOP_TEXT = """a an the and or of to in on for with by at from is are was were be been do does did
we i you our your my me us can could would should will shall may might must what which who
whom when where why how much many any some this that these those it its as if than then there
their they them after before about into over under up out not no yes have has had get got ask
asking brightwave workspace please tell know need"""
STOPWORDS = frozenset(_STOP_TEXT.split())
RESTRICTED_TOPICS = (
    "lawsuit",
    "litigation",
    "legal advice",
    "sue ",
    "subpoena",
    "court",
    "dispute",
    "home address",
    "phone number of",
    "salary",
    "medical",
)


COSINE_FLOOR = 0.33


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


@dataclass(frozen=True)
class Passage:
    doc: PipelineDocument
    text: str


def passages(docs: Sequence[PipelineDocument]) -> list[Passage]:
    out: list[Passage] = []
    for d in docs:
        for b in parse_blocks(d.body):
            if b.kind == "table":
                header = b.rows[0]
                for row in b.rows[1:]:
                    out.append(
                        Passage(
                            d, "; ".join(f"{h}: {c}" for h, c in zip(header, row, strict=False))
                        )
                    )
            elif b.kind in ("paragraph", "list", "footnote"):
                for part in b.text.split("\n") if b.kind == "list" else [b.text]:
                    if part.strip():
                        out.append(Passage(d, part.strip()))
    return out


def restates_a_question(text: str) -> bool:
    """A passage that ends in a question mark (a question kept without its answer)."""
    return text.replace("*", "").replace("_", "").rstrip().endswith("?")


def _answer(
    question: str,
    documents: Sequence[PipelineDocument],
    identity: dict[str, Any],
    threshold: float,
    prefer_current: bool,
    skip_questions: bool = False,
    noise: float = 0.0,
) -> dict[str, Any]:
    q = question.lower()
    if any(t in q for t in RESTRICTED_TOPICS):
        return {
            "decision": "escalate",
            "reason_code": "restricted_topic",
            "score": None,
            "text": "This needs a person: I have passed your question to the Legal team.",
            "citations": [],
            "ranking_mode": "vector",
        }
    words = content_words(question)
    cands = passages(documents)
    if skip_questions:
        cands = [p for p in cands if not restates_a_question(p.text)]
    if not cands or not words:
        return {
            "decision": "abstain",
            "reason_code": "no_answer_bearing_evidence",
            "score": 0.0,
            "ranking_mode": "vector",
            "citations": [],
            "text": "The sources available to you do not establish an answer. Could you "
            "share the document or contract this is about?",
        }

    def key(p: Passage) -> tuple[float, str]:
        cover = len(words & content_words(p.text)) / len(words)
        date = str(p.doc.effective_date or "") if prefer_current else ""
        return (cover, date)

    best = max(cands, key=key)
    # report on a cosine-like scale (about 0.33 to 1), like the vector mode the policy knows
    score = round(COSINE_FLOOR + (1 - COSINE_FLOOR) * key(best)[0] + noise, 4)
    score = min(1.0, max(COSINE_FLOOR, score))
    if score < threshold:
        return {
            "decision": "abstain",
            "reason_code": "support_below_threshold",
            "score": score,
            "ranking_mode": "vector",
            "citations": [],
            "text": "The sources I can use mention this topic but do not answer it. "
            "Which plan, contract or region is this about?",
        }
    return {
        "decision": "answer",
        "reason_code": None,
        "score": score,
        "ranking_mode": "vector",
        "citations": [f"{best.doc.doc_id}@{best.doc.version}"],
        "text": best.text,
    }


def reference(
    question: str, documents: Sequence[PipelineDocument], identity: dict[str, Any]
) -> dict[str, Any]:
    """The reference configuration (refuse below 0.55, current versions preferred, restated
    questions are not evidence)."""
    return _answer(
        question, documents, identity, threshold=0.55, prefer_current=True, skip_questions=True
    )


def naive(
    question: str, documents: Sequence[PipelineDocument], identity: dict[str, Any]
) -> dict[str, Any]:
    """A worse configuration: refuse below 0.46, no preference for the current version, and
    a passage that only repeats the question counts as evidence."""
    return _answer(question, documents, identity, threshold=0.46, prefer_current=False)


class Sampled:
    """The reference configuration with a sampling step: every call moves the score by a
    seeded random amount in [-jitter, +jitter], so repeats near the threshold disagree the
    way a sampling generator does. Deterministic for a given seed and order of calls."""

    def __init__(self, seed: int = 2025, jitter: float = 0.08) -> None:
        self._rng = random.Random(seed)
        self.jitter = jitter
        self.__name__ = "sampled"

    def __call__(
        self, question: str, documents: Sequence[PipelineDocument], identity: dict[str, Any]
    ) -> dict[str, Any]:
        return _answer(
            question,
            documents,
            identity,
            threshold=0.55,
            prefer_current=True,
            skip_questions=True,
            noise=self._rng.uniform(-self.jitter, self.jitter),
        )


sampled = Sampled()
