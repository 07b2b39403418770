"""Small deterministic retrieval-then-gate pipelines over the demo corpus (no model needed).

Retrieval scores each passage (paragraph, list item or table row) of the documents the
identity may see by the share of the question's content words it contains, reported on a
cosine-like scale (0.33 + 0.67 x share, as the policy's vector mode expects). A keyword topic
classifier (:data:`TOPIC_PHRASES`) names the question's topics. Then the threshold gate of
:mod:`review.policy.gate` decides with the policy in force: its thresholds, restricted
topics, gate order and missing-signal rules (thresholds come from configuration, not
code). The pipeline decides with the signed policy exactly as it is: it
logs every signal the gate reads and never declares one "not produced" on its own (only the
signed policy says which signals may be missing), so a dry run or the release gate re-decides
its outputs to the same decisions. Every non-answer and caveat is worded with
the message the gate names (R1, C1, E1, ...) from the wording in force.

- ``reference``: the policy's thresholds, prefers the current version on ties, never takes
  a passage that ends in a question as evidence (a restated question answers nothing).
- ``naive``: refuses only below 0.46 whatever the policy says, with no preference for the
  current version and taking any passage as evidence, so it answers on weak or stale evidence
  and from a distractor that merely repeats the question (it fails the high-overlap
  distractor check and cites superseded versions).
- ``sampled`` (:func:`Sampled`): the reference with a sampling step, its score moved by a
  seeded random amount on every call, so repeated runs disagree near the threshold (for the
  pass rate and decision variance over repeats).

All follow the pipeline contract of ``workbench evaluate``: they take the question, the
visible documents and the identity, and return decision, text, citations and score. The
workbench hands them the policy and wording in force (``configure``) before every run. The
wording's ``company_names`` (the deployment's own names, said in almost every question and
document) are stopwords of the retrieval, like "we" and "our".
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from review.corpus.docformat import parse_blocks
from review.evaluation.execution import PipelineDocument
from review.policy.gate import Signals, decide
from review.policy.policy import NoAnswerPolicy

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?")
_STOP_TEXT = """a an the and or of to in on for with by at from is are was were be been do does did
we i you our your my me us can could would should will shall may might must what which who
whom when where why how much many any some this that these those it its as if than then there
their they them after before about into over under up out not no yes have has had get got ask
asking workspace please tell know need"""
STOPWORDS = frozenset(_STOP_TEXT.split())


def company_stopwords(company_names: Sequence[str]) -> frozenset[str]:
    """The words of the deployment's own names, as the retrieval's extra stopwords."""
    return frozenset(w for n in company_names for w in _WORD.findall(n.lower()))


#: The pipeline's topic classifier: a question naming one of these phrases is on that topic.
#: Which topics go to a person is the policy's ``restricted_topics``, not this table.
TOPIC_PHRASES: dict[str, tuple[str, ...]] = {
    "legal_dispute": ("lawsuit", "litigation", "sue ", "subpoena", "court", "dispute"),
    "legal_advice": ("legal advice",),
    "personal_data_request": ("home address", "phone number of", "salary", "medical"),
}
#: Who a question on a topic is passed to (the E1 message's {role}).
TOPIC_ROLES: dict[str, str] = {
    "legal_dispute": "the Legal team",
    "legal_advice": "the Legal team",
    "regulatory_advice": "the Legal team",
    "personal_data_request": "the Privacy Operations team",
    "security_incident": "the Security team",
    "mergers_and_acquisitions": "the Legal team",
}
#: The pipeline's own flags, from what it acts on: ``answerable`` is its extractive check (the
#: best passage shares a content word with the question; a passage sharing none cannot hold
#: the answer), ``ambiguous`` is False because the pipeline never asks a follow-up (it has no
#: ambiguity step, and says so by logging the flag it acted on), and ``ungrounded`` is False
#: because its answers are passages quoted whole.
MISSING_ITEM = "the plan, contract or region this is about"
RANKING_MODE = "vector"

#: Renders message ``key`` of the approved wording with placeholder values.
Wording = Callable[[str, Mapping[str, str]], str]


def classify_topics(question: str) -> tuple[str, ...]:
    """The topic keys whose phrases the question contains (lower-cased)."""
    q = question.lower()
    return tuple(t for t, phrases in TOPIC_PHRASES.items() if any(p in q for p in phrases))


COSINE_FLOOR = 0.33


def content_words(text: str, also: frozenset[str] = frozenset()) -> set[str]:
    """The text's words that can carry its meaning: not STOPWORDS, not ``also``, not one letter."""
    words = _WORD.findall(text.lower())
    return {w for w in words if w not in STOPWORDS and w not in also and len(w) > 1}


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


@dataclass(frozen=True)
class Configuration:
    """How a bundled pipeline differs from the reference: the refuse threshold it uses instead
    of the policy's (the naive one's deliberate misconfiguration), whether it prefers the
    current version, whether a restated question counts as evidence, and sampling noise."""

    name: str
    prefer_current: bool = True
    skip_questions: bool = True
    refuse_below: float | None = None  # None: the policy's
    jitter: float = 0.0
    seed: int = 2025


class GatedPipeline:
    """A bundled pipeline: deterministic retrieval, then the threshold gate of
    :mod:`review.policy.gate` with the policy in force (thresholds, restricted topics, gate
    order, what to do on a missing signal) and the approved wording for every non-answer and
    caveat. ``configure`` hands it both; the workbench does so before every run (the
    ``evaluate`` command, the Runs page, the demo). Unconfigured, it reads the shipped policy
    and wording files."""

    def __init__(
        self,
        config: Configuration,
        policy: NoAnswerPolicy | None = None,
        wording: Wording | None = None,
        company_names: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.__name__ = config.name
        self._policy = policy
        self._wording = wording
        self._stop = company_stopwords(company_names)
        self._effective: NoAnswerPolicy | None = None
        self._rng = random.Random(config.seed)

    def configure(
        self, policy: NoAnswerPolicy, wording: Wording, company_names: Sequence[str] = ()
    ) -> GatedPipeline:
        """A fresh copy of this pipeline deciding with ``policy`` and wording with ``wording``
        (sampling restarts from the seed); ``company_names`` are the wording's."""
        return GatedPipeline(self.config, policy, wording, company_names)

    def _parts(self) -> tuple[NoAnswerPolicy, Wording]:
        """The policy this configuration decides with (its own refuse threshold, if any; no
        signal declared missing beyond the policy's) and the wording; built once, on the
        first call."""
        if self._effective is None or self._wording is None:
            from review.policy.policy import load_policy
            from review.wording.messages import load_wording, render

            if self._wording is None:
                ws = load_wording()
                self._wording = lambda k, v: render(ws.message(k), v)
                self._stop = company_stopwords(ws.company_names)
            self._effective = _with_refuse_below(
                self._policy or load_policy(), self.config.refuse_below
            )
        return self._effective, self._wording

    def __call__(
        self, question: str, documents: Sequence[PipelineDocument], identity: dict[str, Any]
    ) -> dict[str, Any]:
        policy, wording = self._parts()
        c = self.config
        noise = self._rng.uniform(-c.jitter, c.jitter) if c.jitter else 0.0
        return _answer(question, documents, policy, wording, c, noise, self._stop)


def _with_refuse_below(policy: NoAnswerPolicy, refuse_below: float | None) -> NoAnswerPolicy:
    """``policy`` with the vector refuse threshold replaced (None: unchanged)."""
    if refuse_below is None:
        return policy
    mode = policy.ranking_modes[RANKING_MODE].model_copy(update={"refuse_below": refuse_below})
    return policy.model_copy(update={"ranking_modes": {**policy.ranking_modes, RANKING_MODE: mode}})


def _answer(
    question: str,
    documents: Sequence[PipelineDocument],
    policy: NoAnswerPolicy,
    wording: Wording,
    c: Configuration,
    noise: float,
    stop: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    topics = classify_topics(question)
    words = content_words(question, stop)
    cands = passages(documents)
    if c.skip_questions:
        cands = [p for p in cands if not restates_a_question(p.text)]

    def key(p: Passage) -> tuple[float, str]:
        cover = len(words & content_words(p.text, stop)) / len(words) if words else 0.0
        date = str(p.doc.effective_date or "") if c.prefer_current else ""
        return (cover, date)

    best = max(cands, key=key) if cands else None
    score: float | None = None
    if best is not None:
        # a cosine-like scale (about 0.33 to 1), like the vector mode the policy knows
        score = round(COSINE_FLOOR + (1 - COSINE_FLOOR) * key(best)[0] + noise, 4)
        score = min(1.0, max(COSINE_FLOOR, score))
    signals = Signals(
        RANKING_MODE,
        len(cands),
        score,
        answerable=best is not None and bool(words & content_words(best.text, stop)),
        ambiguous=False,
        ungrounded=False,
        topics=topics,
    )
    result = decide(policy, signals)
    out: dict[str, Any] = {
        "decision": result.decision,
        "reason_code": result.reason_code,
        "message_key": result.message_key,
        "score": score,
        "ranking_mode": RANKING_MODE,
        "citations": [],
        # what the gate decided on, logged so that a dry run can re-decide with another policy
        "signals": {
            "ranking_mode": signals.ranking_mode,
            "hits_after_filter": signals.hits_after_filter,
            "top_score": signals.top_score,
            "answerable": signals.answerable,
            "ambiguous": signals.ambiguous,
            "ungrounded": signals.ungrounded,
            "topics": list(topics),
        },
    }
    if result.decision == "answer" and best is not None:
        out["citations"] = [f"{best.doc.doc_id}@{best.doc.version}"]
        out["text"] = best.text
        if result.caveat:
            out["text"] += " " + wording("C1", {"document": best.doc.title})
        return out
    restricted = [t for t in topics if t in policy.restricted_topics]
    values = {
        "topic": _topic_words(question, stop),
        "missing_item": MISSING_ITEM,
        "role": TOPIC_ROLES.get(restricted[0], "the Support team")
        if restricted
        else ("the Support team"),
    }
    out["text"] = wording(result.message_key or "R1", values)
    return out


def _topic_words(question: str, stop: frozenset[str]) -> str:
    """What the question is about, in its own words (for {topic}): its first content words."""
    words = [
        w
        for w in _WORD.findall(question.lower())
        if w not in STOPWORDS and w not in stop and len(w) > 1
    ]
    return " ".join(words[:4]) or "this"


#: The reference configuration: the policy's thresholds, current versions preferred,
#: restated questions are not evidence.
reference = GatedPipeline(Configuration("reference"))
#: A worse configuration: refuse below 0.46 whatever the policy says, no preference for the
#: current version, and a passage that only repeats the question counts as evidence.
naive = GatedPipeline(
    Configuration("naive", prefer_current=False, skip_questions=False, refuse_below=0.46)
)


def Sampled(seed: int = 2025, jitter: float = 0.08) -> GatedPipeline:
    """The reference with a sampling step: every call moves the score by a seeded random
    amount in [-jitter, +jitter], so repeats near the threshold disagree the way a sampling
    generator does. Deterministic for a given seed and order of calls."""
    return GatedPipeline(Configuration("sampled", jitter=jitter, seed=seed))


sampled = Sampled()

#: The pipelines a user picks by name on the Runs page (an evaluation job names one).
BUNDLED: dict[str, Callable[[], GatedPipeline]] = {
    "Reference pipeline": lambda: reference,
    "Naive pipeline (worse)": lambda: naive,
    "Sampled reference (varies between repeats)": lambda: Sampled(),
}


def configure_pipeline(
    pipeline: Any, policy: NoAnswerPolicy, wording: Wording, company_names: Sequence[str] = ()
) -> Any:
    """A pipeline with a ``configure(policy, wording)`` method configured (a bundled one also
    with the wording's ``company_names``); any other callable unchanged (an outside pipeline
    brings its own policy)."""
    if isinstance(pipeline, GatedPipeline):
        return pipeline.configure(policy, wording, company_names)
    setup = getattr(pipeline, "configure", None)
    return setup(policy, wording) if callable(setup) else pipeline
