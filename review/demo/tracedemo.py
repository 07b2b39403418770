"""Synthetic production traces: the Brightwave demo (bulk benchmark data is in benchmarks/).

Demo traces
-----------
:func:`build_demo_traces` makes ``n`` (default :data:`DEMO_TRACES`) production requests of the
Brightwave support assistant over the 12 complete weeks before the current one and imports them
through :func:`review.traces.importer.import_items`, so the demo exercises the import path
(redaction, the restricted rule, batches). Everything but the dates is fixed by the seed: the
weekly mix of outcomes is exact (largest-remainder rounding), so the demo's weekly rates and
alerts are the same on every build.

What is in it:

* questions like the demo cases (refund windows, SLA credits, data residency, retention, SSO,
  support hours, prices), out-of-scope and ambiguous questions, restricted topics (a legal
  dispute, security incidents, personal-data requests) and questions whose answer is only in a
  restricted memo;
* chunks cut from the demo documents' real text (``review/demo/docs``), with ranks and scores
  in two ranking modes: ``vector`` (cosine, about 0.33 to 1) and ``semantic_reranker`` (0 to
  4), consistent with the thresholds of ``policies/no-answer-policy.yaml``; restricted passages
  that authorization filtered out (``filtered: true``);
* decisions with reason codes; caveat answers are decision ``answer`` with reason code
  ``support_below_threshold`` and the C1 caveat text;
* refusal texts rendered from ``policies/refusal-wording.yaml``; every 12th refusal instead
  breaks a wording rule (a universal negative, a leaked score, an invented contact, a claim
  after the refusal, a restricted document's title), for the wording page to find;
* feedback (``positive``, ``expected_answer``, ``answer_wrong``);
* personal data in some questions (e-mail addresses, phone numbers, card numbers, billing
  account numbers, support PINs) that redaction removes on import;
* a few restricted traces: the legal team and sales leadership asking, with clearance, about
  the dispute and the 2026 price memo;
* a drift event: in week 9 the search index is rebuilt (``versions.index`` changes) and loses
  passages, so empty retrievals, refusals and "I expected an answer" feedback rise; the
  no-answer alert and the negative-feedback alert fire in week 9;
* in week 11, four refusals were logged without a reason code (the "decisions with no logged
  reason" alert).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine, func, select

from review.core.taxonomy import Taxonomy
from review.demo.people import DEMO_ACTOR
from review.demo.trace_intents import (
    AMBIGUOUS,
    ANSWERABLE,
    CLEARED,
    COMPANY,
    FILLER,
    FIRST,
    LAST,
    NOT_ALLOWED,
    OUT_OF_SCOPE,
    PII_SUFFIXES,
    RELATED_ONLY,
    RESTRICTED_TOPICS,
    VIOLATIONS,
    Intent,
    Passage,
    demo_passages,
    find_passage,
)
from review.traces.model import Chunk, Citation, Trace
from review.wording.messages import WordingSet, load_wording, render
from storage.db import read_session
from storage.models import Trace as TraceRow

__all__ = [
    "DEMO_PREFIX",
    "DEMO_TRACES",
    "DRIFT_WEEK",
    "build_demo_traces",
    "demo_traces",
    "demo_weeks",
]

DEMO_TRACES = 2400
DEMO_PREFIX = "bw-demo-"
DEMO_SEED = 20250609
WEEKS = 12
DRIFT_WEEK = 9  # 1-based: the index rebuild lands in this week
MISSING_REASON_WEEK = 11
#: What an ungrounded demo answer adds: a figure no passage the assistant was sent contains
#: (the groundedness check missed it; the demo audits find it).
UNGROUNDED_CLAIM = "Exceptions can be requested up to 90 days later."


# Outcome mix per week (shares sum to 1): weeks before the drift, and from the drift week on.
OUTCOMES = (
    "answer",
    "caveat",
    "partial",
    "ungrounded_answer",
    "abstain_nothing",
    "abstain_lost",
    "abstain_related",
    "abstain_low",
    "ungrounded_refused",
    "clarify",
    "escalate",
    "not_allowed",
)
BASE_MIX = (0.50, 0.08, 0.03, 0.01, 0.09, 0.00, 0.08, 0.05, 0.02, 0.06, 0.05, 0.03)
# Share of each outcome that gets negative feedback ("answer_wrong" on answers, "expected_answer"
# on refusals of answerable questions).
NEGATIVE_SHARE: dict[str, float] = {
    "answer": 0.02,
    "caveat": 0.05,
    "ungrounded_answer": 0.4,
    "abstain_low": 0.10,
    "abstain_lost": 0.38,
    "ungrounded_refused": 0.15,
    "abstain_related": 0.08,
}
DRIFT_MIX = (0.40, 0.09, 0.02, 0.01, 0.09, 0.08, 0.08, 0.07, 0.03, 0.05, 0.05, 0.03)


@dataclass
class _Week:
    index: int  # 1-based
    start: dt.datetime
    kinds: list[str] = field(default_factory=list)


def demo_weeks(today: dt.date | None = None) -> list[dt.datetime]:
    """Start (Monday 00:00 UTC) of each of the 12 complete weeks before ``today``'s week."""
    d = today or dt.datetime.now(dt.UTC).date()
    monday = d - dt.timedelta(days=d.weekday())
    first = monday - dt.timedelta(weeks=WEEKS)
    return [
        dt.datetime(first.year, first.month, first.day, tzinfo=dt.UTC) + dt.timedelta(weeks=i)
        for i in range(WEEKS)
    ]


def _exact_counts(n: int, shares: Sequence[float]) -> list[int]:
    raw = [n * s for s in shares]
    counts = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - counts[i], reverse=True)
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _weekly_sizes(n: int) -> list[int]:
    weights = [1.0 + 0.03 * i for i in range(WEEKS)]  # usage grows slowly
    return _exact_counts(n, [w / sum(weights) for w in weights])


def _score(rng: random.Random, mode: str, band: str) -> float:
    bands = {
        "vector": {
            "high": (0.66, 0.93),
            "caveat": (0.555, 0.645),
            "related": (0.60, 0.82),
            "low": (0.40, 0.545),
            "none": (0.34, 0.50),
        },
        "semantic_reranker": {
            "high": (2.1, 3.9),
            "caveat": (1.25, 1.95),
            "related": (2.0, 3.1),
            "low": (0.4, 1.15),
            "none": (0.05, 0.9),
        },
    }
    lo, hi = bands[mode][band]
    return round(rng.uniform(lo, hi), 3)


@dataclass
class _Outcome:
    """What the pipeline decided on one demo trace and the signals it logged."""

    decision: str
    text: str
    reason: str | None = None
    feedback: str | None = None
    band: str = "high"
    answerable: bool | None = True
    ambiguous: bool | None = False
    ungrounded: bool | None = False
    empty: bool = False  # retrieval found nothing
    lost: bool = False  # the rebuilt index lost the decisive passage
    topic_key: str | None = None
    filtered: list[Passage] = field(default_factory=list)


# the intents each kind of trace asks about
_ANSWERABLE_KINDS = (
    "answer",
    "caveat",
    "partial",
    "ungrounded_answer",
    "abstain_low",
    "ungrounded_refused",
    "abstain_lost",
)
_INTENTS_OF = {
    "abstain_related": RELATED_ONLY,
    "abstain_nothing": OUT_OF_SCOPE,
    "clarify": AMBIGUOUS,
    "escalate": RESTRICTED_TOPICS,
}
_ESCALATION_TEAMS = {
    "legal_dispute": "the Legal team",
    "security_incident": "the Security team",
}


class _Builder:
    def __init__(self, seed: int, wording: WordingSet) -> None:
        self.rng = random.Random(seed)
        self.wording = wording
        self.refusals = 0

    # --- pieces ------------------------------------------------------------------------

    def refusal(self, key: str, intent: Intent, role: str = "the Support team") -> str:
        self.refusals += 1
        if self.refusals % 12 == 0:
            return VIOLATIONS[(self.refusals // 12) % len(VIOLATIONS)]
        values = {
            "topic": intent.topic,
            "missing_item": intent.missing,
            "role": role,
            "document": "the policy linked below",
        }
        message = self.wording.messages[key]
        return render(message, {k: values[k] for k in message.placeholders})

    def question(self, intent: Intent) -> str:
        q = self.rng.choice(intent.questions)
        if self.rng.random() < 0.06:
            suffix = self.rng.choice(PII_SUFFIXES)
            q += suffix.format(
                first=self.rng.choice(FIRST),
                last=self.rng.choice(LAST),
                company=self.rng.choice(COMPANY),
                n2=f"{self.rng.randrange(100):02d}",
                n3=f"{self.rng.randrange(1000):03d}",
                n5=f"{self.rng.randrange(10000, 100000)}",
                n8=f"{self.rng.randrange(10**7, 10**8)}",
            )
        return q

    def passages(self, refs: Sequence[tuple[str, str]]) -> list[Passage]:
        return [find_passage(ref, needle) for ref, needle in refs]

    def filler(self, k: int) -> list[Passage]:
        refs = self.rng.sample(FILLER, k)
        out = []
        for ref, _ in refs:
            options = demo_passages()[ref]
            out.append(self.rng.choice(options))
        return out

    def chunks(
        self,
        mode: str,
        top_band: str,
        decisive: list[Passage],
        related: list[Passage],
        filtered: list[Passage],
        n_filler: int,
        empty: bool = False,
    ) -> tuple[list[Chunk], float | None]:
        """Ranked chunks: filtered ones first (they scored well but were removed), then the
        decisive passages, related ones and filler, with falling scores."""
        ordered: list[tuple[Passage, bool]] = [(p, True) for p in filtered]
        if not empty:
            ordered += [(p, False) for p in decisive + related + self.filler(n_filler)]
        seen: set[str] = set()
        out: list[Chunk] = []
        score = _score(self.rng, mode, top_band)
        top_unfiltered: float | None = None
        step = 0.04 if mode == "vector" else 0.3
        for p, was_filtered in ordered:
            if p.chunk_id in seen:
                continue
            seen.add(p.chunk_id)
            s = round(score + (0.05 if was_filtered else 0.0), 3)
            if not was_filtered and top_unfiltered is None:
                top_unfiltered = s
            out.append(
                Chunk(
                    chunk_id=p.chunk_id,
                    doc_id=p.doc_id,
                    doc_version=p.version,
                    rank=len(out) + 1,
                    score=s,
                    text=p.text,
                    filtered=was_filtered,
                    effective_date=p.effective_date,
                )
            )
            if not was_filtered:
                score = max(0.0, score - self.rng.uniform(step * 0.3, step))
        return out, top_unfiltered

    # --- one trace ----------------------------------------------------------------------

    def trace(
        self,
        i: int,
        week: _Week,
        kind: str,
        drifted: bool,
        versions: dict[str, str],
        negative: bool = False,
    ) -> Trace:
        rng = self.rng
        mode = "vector" if rng.random() < 0.65 else "semantic_reranker"
        at = week.start + dt.timedelta(
            days=rng.choice((0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6)),
            seconds=rng.randrange(6 * 3600, 22 * 3600),
        )
        tier = rng.choices(("starter", "team", "business", "enterprise"), (2, 5, 3, 2))[0]
        language = rng.choices(("en", "de", "fr"), (85, 10, 5))[0]
        role = rng.choices(("customer_admin", "customer_user", "support_agent"), (5, 3, 2))[0]
        scopes: tuple[str, ...] = ("public",) if role != "support_agent" else ("public", "internal")
        citations: tuple[Citation, ...] = ()
        n_filler = rng.randint(1, 3)
        pool = ANSWERABLE if kind in _ANSWERABLE_KINDS else _INTENTS_OF.get(kind, NOT_ALLOWED)
        intent = rng.choice(pool)
        decisive = self.passages(intent.evidence)
        related = self.passages(intent.neighbours)
        if kind in ("answer", "caveat", "partial", "ungrounded_answer"):
            out = self.answered(kind, intent, negative)
        else:
            out = self.refused(kind, intent, negative, drifted)
        if out.lost:
            decisive = []
        chunks, top = self.chunks(
            mode, out.band, decisive, related, out.filtered, n_filler, out.empty
        )
        unfiltered = [c for c in chunks if not c.filtered]
        hits = len(unfiltered)
        sent = unfiltered[:3]
        context = "\n\n".join(f"[{c.chunk_id}] {c.text}" for c in sent)
        if out.decision in ("answer", "partial") and intent.claims:
            claims = intent.claims if out.decision == "answer" else intent.claims[:1]
            by_passage = {p.chunk_id for p in decisive}
            citations = tuple(
                Citation(claim, (decisive[idx].chunk_id,))
                for claim, idx in claims
                if idx < len(decisive) and decisive[idx].chunk_id in by_passage
            )
        attributes: dict[str, str | int | float | bool] = {
            "language": language,
            "customer_tier": tier,
            "document_type": intent.doc_type,
            "intent": intent.key,
        }
        if out.topic_key:
            attributes["topic"] = out.topic_key
        return Trace(
            trace_id=f"{DEMO_PREFIX}{i:06d}",
            time=at,
            query=self.question(intent),
            rewritten_query=intent.rewritten,
            user_role=role,
            identity_scopes=scopes,
            chunks=tuple(chunks),
            context_sent=context,
            ranking_mode=mode,
            hits_after_filter=hits,
            top_score=top if hits else None,
            answerable=out.answerable,
            ambiguous=out.ambiguous,
            ungrounded=out.ungrounded,
            topics=(out.topic_key,) if out.topic_key else (),
            decision=out.decision,
            reason_code=out.reason,
            answer_text=out.text,
            citations=citations,
            feedback=out.feedback,
            versions={
                **versions,
                "reranker": "bge-reranker-v2-m3" if mode == "semantic_reranker" else "none",
            },
            attributes=attributes,
        )

    def answered(self, kind: str, intent: Intent, negative: bool) -> _Outcome:
        """An answer (with a caveat, partial, or with a claim the check missed)."""
        rng = self.rng
        if kind == "answer":
            feedback = "answer_wrong" if negative else rng.choices((None, "positive"), (80, 20))[0]
            return _Outcome("answer", intent.answer, feedback=feedback)
        if kind == "caveat":
            text = intent.answer + " " + self.caveat_text()
            feedback = "answer_wrong" if negative else rng.choices((None, "positive"), (88, 12))[0]
            return _Outcome(
                "answer", text, "support_below_threshold", feedback=feedback, band="caveat"
            )
        if kind == "partial":
            first = intent.answer.split(". ")[0].rstrip(".") + "."
            text = (
                f"{first} I could not find the rest of what you asked in the documents "
                "available to you."
            )
            return _Outcome("partial", text, "required_claim_not_covered")
        # ungrounded_answer: the groundedness check missed it; audits find it
        feedback = "answer_wrong" if negative else None
        return _Outcome("answer", intent.answer + " " + UNGROUNDED_CLAIM, feedback=feedback)

    def refused(self, kind: str, intent: Intent, negative: bool, drifted: bool) -> _Outcome:
        """An abstention, a clarifying question or an escalation."""
        rng = self.rng
        expected = "expected_answer" if negative else None
        if kind == "abstain_low":
            text = self.refusal("R2", intent)
            return _Outcome(
                "abstain", text, "support_below_threshold", expected, "low", answerable=None
            )
        if kind == "abstain_lost":  # the rebuilt index lost the decisive passage
            empty = rng.random() < 0.6
            text = self.refusal("R1", intent)
            return _Outcome(
                "abstain", text, "no_answer_bearing_evidence", expected, "none", False,
                empty=empty, lost=True,
            )  # fmt: skip
        if kind == "ungrounded_refused":
            text = self.refusal("R3", intent, role="the Support team")
            return _Outcome(
                "abstain", text, "required_claim_not_covered", expected, ungrounded=True
            )
        if kind == "abstain_related":
            text = self.refusal("R2", intent)
            return _Outcome(
                "abstain", text, "required_claim_not_covered", expected, "related", False
            )
        if kind == "abstain_nothing":
            empty = rng.random() < (0.5 if drifted else 0.3)
            text = self.refusal("R1", intent)
            return _Outcome(
                "abstain", text, "no_answer_bearing_evidence", None, "none", False, empty=empty
            )
        if kind == "clarify":
            text = self.refusal("F1", intent)
            return _Outcome("clarify", text, "ambiguous_question", band="related", ambiguous=True)
        if kind == "escalate":
            team = _ESCALATION_TEAMS.get(intent.topic_key or "", "the Privacy Operations team")
            text = self.refusal("E1", intent, role=team)
            filtered: list[Passage] = []
            if intent.restricted_source is not None:
                ref, needle = intent.restricted_source
                filtered = [find_passage(ref, needle)]
            return _Outcome(
                "escalate", text, "restricted_topic", band="related", answerable=None,
                topic_key=intent.topic_key, filtered=filtered,
            )  # fmt: skip
        # not_allowed
        text = self.refusal("R1", intent)
        assert intent.restricted_source is not None
        return _Outcome(
            "abstain", text, "source_not_allowed", None, "low", False,
            filtered=[find_passage(*intent.restricted_source)],
        )  # fmt: skip

    def caveat_text(self) -> str:
        message = self.wording.messages["C1"]
        return render(message, {"document": "the policy linked below"})

    def cleared(self, i: int, week: _Week, versions: dict[str, str], which: int) -> Trace:
        intent, role, scopes = CLEARED[which % len(CLEARED)]
        decisive = self.passages(intent.evidence)
        mode = "vector"
        chunks, top = self.chunks(mode, "high", decisive, [], [], 1)
        sent = [c for c in chunks if not c.filtered][:3]
        return Trace(
            trace_id=f"{DEMO_PREFIX}{i:06d}",
            time=week.start + dt.timedelta(days=self.rng.randrange(5), hours=10),
            query=intent.questions[0],
            rewritten_query=intent.rewritten,
            user_role=role,
            identity_scopes=scopes,
            chunks=tuple(chunks),
            context_sent="\n\n".join(f"[{c.chunk_id}] {c.text}" for c in sent),
            ranking_mode=mode,
            hits_after_filter=len(chunks),
            top_score=top,
            answerable=True,
            ambiguous=False,
            ungrounded=False,
            topics=(),
            decision="answer",
            answer_text=intent.answer,
            citations=tuple(Citation(c, (decisive[k].chunk_id,)) for c, k in intent.claims),
            versions={**versions, "reranker": "none"},
            attributes={
                "language": "en",
                "customer_tier": "internal",
                "document_type": intent.doc_type,
                "intent": intent.key,
            },
        )


#: The week the demo assistant's client starts logging what users do after a response (note
#: 000's reformulation and citation-interaction signals); earlier traces do not log it.
INTERACTION_WEEK = 4
#: Chance that the user reformulates right after a response, by decision.
REFORMULATION_SHARE = {"answer": 0.06, "partial": 0.15, "abstain": 0.3, "clarify": 0.2}
#: Chance that the user opens a cited source, for a response that cites one.
CITATION_OPEN_SHARE = 0.35


def _interaction(t: Trace, rng: random.Random) -> Trace:
    """What the user did after the response: reformulated (always logged) and opened a cited
    source (logged only when something was cited)."""
    share = REFORMULATION_SHARE.get(t.decision or "", 0.1)
    reformulated = rng.random() < share
    opened = (rng.random() < CITATION_OPEN_SHARE) if t.citations else None
    return dataclasses.replace(t, reformulated=reformulated, citation_opened=opened)


def demo_traces(
    n: int = DEMO_TRACES, seed: int = DEMO_SEED, today: dt.date | None = None
) -> Iterator[Trace]:
    """The demo traces in time order of their weeks (deterministic but for the dates)."""
    if n < WEEKS * 20:
        raise ValueError(f"the demo needs at least {WEEKS * 20} traces")
    starts = demo_weeks(today)
    b = _Builder(seed, load_wording())
    sizes = _weekly_sizes(n)
    i = 0
    missing_left = 4
    carry: dict[str, float] = {}
    # a stream of its own, so the traces themselves stay as they were without it
    interaction = random.Random(seed + 1_000_003)
    for w, (start, size) in enumerate(zip(starts, sizes, strict=True), start=1):
        drifted = w >= DRIFT_WEEK
        versions = {
            "model": "gpt-4.1-mini-2025-04-14",
            "embedding": "text-embedding-3-large",
            "prompt": "support-answer@12" if w < 6 else "support-answer@13",
            "index": (
                f"kb-{starts[0]:%Y-%m-%d}"
                if not drifted
                else f"kb-{starts[DRIFT_WEEK - 1]:%Y-%m-%d}-rechunked"
            ),
            "policy": "no-answer-policy@2" if w < 5 else "no-answer-policy@3",
        }
        week = _Week(w, start)
        cleared = 1 if w % 3 == 0 else 0
        counts = _exact_counts(size - cleared, DRIFT_MIX if drifted else BASE_MIX)
        kinds = [k for k, c in zip(OUTCOMES, counts, strict=True) for _ in range(c)]
        b.rng.shuffle(kinds)
        # negative feedback: an exact share of each outcome, the remainder carried over weeks
        negatives: dict[str, int] = {}
        for kind, c in zip(OUTCOMES, counts, strict=True):
            carry[kind] = carry.get(kind, 0.5) + c * NEGATIVE_SHARE.get(kind, 0.0)
            negatives[kind] = int(carry[kind])
            carry[kind] -= negatives[kind]
        for kind in kinds:
            i += 1
            negative = negatives[kind] > 0
            negatives[kind] -= int(negative)
            t = b.trace(i, week, kind, drifted, versions, negative)
            if w == MISSING_REASON_WEEK and kind == "abstain_related" and missing_left > 0:
                missing_left -= 1  # the logging bug of week 11: refusals without a reason
                t = dataclasses.replace(t, reason_code=None)
            yield _interaction(t, interaction) if w >= INTERACTION_WEEK else t
        for _ in range(cleared):
            i += 1
            t = b.cleared(i, week, versions, w)
            yield _interaction(t, interaction) if w >= INTERACTION_WEEK else t


def build_demo_traces(engine: Engine, tax: Taxonomy, n: int | None = None) -> int:
    """Import the demo traces through the import path; 0 when demo traces exist already."""
    from review.traces import importer

    with read_session(engine) as s:
        already = s.scalar(
            select(func.count())
            .select_from(TraceRow)
            .where(TraceRow.trace_id.like(f"{DEMO_PREFIX}%"))
        )
    if already:
        return 0
    size = n or DEMO_TRACES
    today = dt.datetime.now(dt.UTC).date()
    report = importer.import_items(
        engine,
        DEMO_ACTOR,
        demo_traces(size, DEMO_SEED, today),
        source="demo data (Brightwave support assistant)",
        fmt="canonical",
    )
    return report.added
