"""Every metamorphic check, end to end on the demo: it passes on a pipeline that is correct by
construction and fails on pipelines built to fail it (issue 9, item 7).

The pipelines run through the real execution path
(:func:`review.evaluation.execution.execute`, with the
reorder and distractor re-runs) on a copy of the demo database, and the checks are computed
the way the Runs page computes them (``outputs_frame`` + ``judge_perturbed(perturbed_frame)``
into ``metamorphic_checks``).

The pipeline contract gives a pipeline the question, the documents visible to the case's
identity and the identity, but not what a document is *for*: which visible document decides
the question (its role in the case) and which claims an answer must establish are labels, not
inputs. So the test pipeline asks an :class:`Oracle` built from the demo database, keyed by the
question, the identity and the set of visible demo documents it was given (order-insensitive,
and blind to documents that are not in the database, such as the distractor a perturbation
adds). The oracle never tells the pipeline a decision. It tells it:

- the role of each visible document for the case (decisive, superseded, partial, distractor,
  context): a ``decisive`` or ``superseded`` document is on point, the others are not;
- the case's required claims, and which claims each document version establishes: the claims of
  the labelled cases whose gold decision is ``answer`` and in which that version is the only
  visible decisive document;
- the documents hidden from the identity, only so that a deliberately broken pipeline can
  misuse them.

Everything else the correct pipeline derives from what it receives: a version is current unless
a visible version of the same document has a later effective date (or number); it answers only
from current on-point documents, citing them and quoting their passages; abstains when none is
visible; asks to clarify when several different documents are on point; and gives a labelled
partial answer when some required claim is established by none of them. Each broken pipeline
is the correct one with one rule broken.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, select

from review.cases.agreed import agreed_subquery
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, execution, refpipeline, runmetrics
from review.evaluation.execution import PipelineDocument, doc_ref
from storage.db import read_session
from storage.models import Case, CaseClaim, CaseDocument, Document

REMOVED = runmetrics.METAMORPHIC["removed"][0]
PRESENT = runmetrics.METAMORPHIC["present"][0]
FORBIDDEN = runmetrics.METAMORPHIC["forbidden"][0]
PARTIAL = runmetrics.METAMORPHIC["partial"][0]
CONFLICTED = runmetrics.METAMORPHIC["conflicted"][0]
REORDER = runmetrics.PERTURBATION_CHECKS["reorder"]
DISTRACTOR = runmetrics.PERTURBATION_CHECKS["distractor"]
EVERY_CHECK = {REMOVED, PRESENT, FORBIDDEN, PARTIAL, CONFLICTED, REORDER, DISTRACTOR}

ON_POINT = ("decisive", "superseded")


# ---------------------------------------------------------------------------------------
# The oracle: what the labels say about a case's documents, looked up from what a pipeline gets


Key = tuple[str, str, tuple[str, ...], frozenset[str]]


@dataclass(frozen=True)
class Facts:
    """What the labels say about one case's input (never its decision)."""

    case: str
    roles: dict[str, str]  # visible document ref -> role in the case
    claims: tuple[str, ...]
    hidden: tuple[tuple[PipelineDocument, str], ...]  # forbidden documents and their roles


@dataclass(frozen=True)
class Oracle:
    facts_by_key: dict[Key, Facts]
    known: frozenset[str]  # every document version of the database
    establishes: dict[str, frozenset[str]]  # document ref -> claims it establishes

    def key(self, question: str, docs: Sequence[PipelineDocument], identity: dict[str, Any]) -> Key:
        refs = frozenset(r for r in map(doc_ref, docs) if r in self.known)
        return (question, str(identity["name"]), tuple(sorted(identity["scopes"])), refs)

    def facts(
        self, question: str, docs: Sequence[PipelineDocument], identity: dict[str, Any]
    ) -> Facts:
        return self.facts_by_key[self.key(question, docs, identity)]


def _pdoc(d: Document) -> PipelineDocument:
    return PipelineDocument.of(d)


def build_oracle(engine: Engine) -> Oracle:
    gold = agreed_subquery()
    with read_session(engine) as s:
        cases = s.execute(
            select(
                Case.id,
                Case.key,
                Case.question,
                Case.identity_name,
                Case.identity_scopes,
                gold.c.gold_decision,
                Case.expected_decision,
            )
            .outerjoin(gold, gold.c.case_id == Case.id)
            .where(Case.status == "ready")
        ).all()
        docs: dict[int, list[tuple[str, str, PipelineDocument]]] = {}
        for cid, vis, role, d in s.execute(
            select(CaseDocument.case_id, CaseDocument.visibility, CaseDocument.role, Document)
            .join(Document, Document.id == CaseDocument.document_id)
            .order_by(CaseDocument.case_id, CaseDocument.position)
        ):
            docs.setdefault(cid, []).append((vis, role, _pdoc(d)))
        claims: dict[int, list[str]] = {}
        for cid, text in s.execute(
            select(CaseClaim.case_id, CaseClaim.text).order_by(
                CaseClaim.case_id, CaseClaim.position
            )
        ):
            claims.setdefault(cid, []).append(text)
        known = frozenset(
            f"{k}@{v}" for k, v in s.execute(select(Document.doc_key, Document.version))
        )
    by_key: dict[Key, Facts] = {}
    establishes: dict[str, set[str]] = {}
    for c in cases:
        mine = docs.get(c.id, [])
        visible = [(role, d) for vis, role, d in mine if vis == "visible"]
        key: Key = (
            c.question,
            c.identity_name,
            tuple(sorted(c.identity_scopes)),
            frozenset(doc_ref(d) for _r, d in visible),
        )
        facts = Facts(
            c.key,
            {doc_ref(d): role for role, d in visible},
            tuple(claims.get(c.id, [])),
            tuple((d, role) for vis, role, d in mine if vis != "visible"),
        )
        assert by_key.setdefault(key, facts) == facts, f"{c.key} and {by_key[key].case} collide"
        decisive = [d for role, d in visible if role == "decisive"]
        if (c.gold_decision or c.expected_decision) == "answer" and len(decisive) == 1:
            establishes.setdefault(doc_ref(decisive[0]), set()).update(facts.claims)
    return Oracle(by_key, known, {k: frozenset(v) for k, v in establishes.items()})


# ---------------------------------------------------------------------------------------
# The pipeline, correct by construction, and its deliberately broken versions

FLAWS = (
    "always_abstains",  # a gate set so high that nothing is ever answered
    "answers_without_evidence",  # nothing on point: answers from the first visible document
    "first_document",  # always answers citing (and quoting) the first visible document
    "leaks_in_refusal",  # abstains, but the refusal repeats the hidden documents' text
    "answers_from_hidden",  # retrieves from hidden documents and answers from them
    "ignores_dates",  # keeps superseded versions as if they were current
    "partial_as_answer",  # a plain answer although a required claim is not established
    "reads_first_only",  # reads only the first visible document (position bias)
    "takes_restated_question",  # an unknown document that repeats the question is evidence
)

EARLIEST = dt.date.min


def _current(d: PipelineDocument, docs: Sequence[PipelineDocument]) -> bool:
    """No visible version of the same document has a later effective date (or number)."""
    mine = (d.effective_date or EARLIEST, d.version)
    return not any(
        o.doc_id == d.doc_id and (o.effective_date or EARLIEST, o.version) > mine for o in docs
    )


def _norm(text: str) -> str:
    return " ".join(text.replace("*", " ").split()).casefold().rstrip("?. ")


def _quote(claim_or_question: str, docs: Sequence[PipelineDocument]) -> str:
    """The passage of ``docs`` sharing most content words with the text (first on ties)."""
    words = refpipeline.content_words(claim_or_question)
    cands = refpipeline.passages(docs)
    best = max(cands, key=lambda p: len(words & refpipeline.content_words(p.text)))
    return best.text


def _answer(decision: str, docs: Sequence[PipelineDocument], text: str, score: float) -> Any:
    return {
        "decision": decision,
        "reason_code": None,
        "score": score,
        "text": text,
        "citations": [doc_ref(d) for d in docs],
    }


def _no_answer(decision: str, reason: str, text: str) -> Any:
    return {
        "decision": decision,
        "reason_code": reason,
        "score": 0.0,
        "text": text,
        "citations": [],
    }


class Grounded:
    """The correct pipeline (``flaw=None``) or the correct pipeline with one rule broken."""

    def __init__(self, oracle: Oracle, flaw: str | None = None) -> None:
        assert flaw is None or flaw in FLAWS
        self.oracle = oracle
        self.flaw = flaw

    def __call__(
        self, question: str, documents: Sequence[PipelineDocument], identity: dict[str, Any]
    ) -> Any:
        facts = self.oracle.facts(question, documents, identity)
        out = self._respond(question, list(documents), facts)
        if (
            self.flaw == "leaks_in_refusal"
            and out["decision"] not in ("answer", "partial")
            and facts.hidden
        ):
            leaked = "\n\n".join(d.body for d, _role in facts.hidden)
            out["text"] += f"\n\nFor reference, what you may not see:\n\n{leaked}"
        return out

    def _respond(self, question: str, docs: list[PipelineDocument], facts: Facts) -> Any:
        flaw = self.flaw
        if flaw == "always_abstains":
            return _no_answer("abstain", "support_below_threshold", "I cannot answer that.")
        if flaw == "first_document" and docs:
            return _answer("answer", docs[:1], _quote(question, docs[:1]), 1.0)
        read = docs[:1] if flaw == "reads_first_only" else docs
        if flaw == "takes_restated_question":
            echo = [
                d
                for d in read
                if doc_ref(d) not in self.oracle.known and _norm(question) in _norm(d.body)
            ]
            if echo:
                return _answer("answer", echo[:1], _quote(question, echo[:1]), 1.0)
        kept = [d for d in read if facts.roles.get(doc_ref(d)) in ON_POINT]
        if flaw != "ignores_dates":
            kept = [d for d in kept if _current(d, read)]
        if not kept:
            if flaw == "answers_without_evidence" and read:
                return _answer("answer", read[:1], _quote(question, read[:1]), 0.9)
            hidden = [d for d, role in facts.hidden if role == "decisive"]
            if flaw == "answers_from_hidden" and hidden:
                return _answer("answer", hidden, _quote(question, hidden), 0.9)
            return _no_answer(
                "abstain",
                "no_answer_bearing_evidence",
                "The sources available to you do not establish an answer.",
            )
        if len({d.doc_id for d in kept}) > 1:
            return _no_answer(
                "clarify",
                "ambiguous_question",
                "Several sources answer different readings of this; which one do you mean?",
            )
        said = {c for d in kept for c in self.oracle.establishes.get(doc_ref(d), ())}
        covered = [c for c in facts.claims if c in said]
        if not covered:
            return _no_answer(
                "abstain",
                "required_claim_not_covered",
                "The sources available to you mention this but do not establish the answer.",
            )
        quotes = "\n".join(dict.fromkeys(_quote(c, kept) for c in covered))
        if len(covered) == len(facts.claims) or flaw == "partial_as_answer":
            return _answer("answer", kept, quotes, 1.0)
        # never name the missing claims: they are the labels' answers, maybe restricted ones
        return _answer(
            "partial",
            kept,
            quotes + "\n\nThe sources available to you do not cover the rest of the question.",
            len(covered) / len(facts.claims),
        )


# ---------------------------------------------------------------------------------------
# Running a pipeline and reading its checks the way the Runs page does


@dataclass(frozen=True)
class Result:
    checks: pd.DataFrame  # indexed by check label
    outputs: pd.DataFrame
    families: pd.DataFrame  # runmetrics.family_outcomes
    perturbed: pd.DataFrame  # judged


def run(
    engine: Engine, actor: Actor, tax: Taxonomy, pipeline: Any, name: str, repeats: int = 1
) -> Result:
    run_id = execution.execute(
        engine, actor, pipeline, tax, name=name, system_version=name, repeats=repeats
    )
    df = evalruns.outputs_frame(engine, run_id, tax)
    judged = runmetrics.judge_perturbed(evalruns.perturbed_frame(engine, run_id, tax))
    table = runmetrics.metamorphic_checks(df, judged).set_index("check")
    return Result(table, df, runmetrics.family_outcomes(df), judged)


def failing(r: Result) -> set[str]:
    return set(r.checks.index[r.checks["pass_rate"] < 1.0])


@pytest.fixture
def oracle(demo_engine: Engine) -> Oracle:
    return build_oracle(demo_engine)


def test_a_correct_pipeline_passes_every_metamorphic_check(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor, oracle: Oracle
) -> None:
    r = run(demo_engine, annotator, tax, Grounded(oracle), "grounded", repeats=2)
    t = r.checks
    assert set(t.index) == EVERY_CHECK
    assert (t["cases"] > 0).all() and (t["infrastructure failures"] == 0).all()
    assert t["pass_rate"].eq(1.0).all(), r.families.loc[~r.families["passed"], ["key", "why"]]
    assert (t["passed"] == t["runs"]).all()
    # every repeat counted, and a deterministic pipeline never varies between them
    assert (t["runs"] == 2 * t["cases"]).all()
    assert (t["varying"] == 0).all() and (t["decision_variance"] == 0).all()
    # by construction, not by luck: every family variant gets its gold decision, no answer
    # leaks or cites a superseded version or a document the identity cannot see
    fam = r.families
    assert (fam["decision"] == fam["gold"]).all()
    assert not r.outputs["leaked"].any() and not r.outputs["cites_superseded"].any()
    assert r.outputs["citations_valid"].all()
    assert set(fam["decision"]) == {"answer", "abstain", "partial"}
    assert r.perturbed["passed"].astype(bool).all()


# The checks each broken pipeline fails (every other check still passes on it) and, per check,
# the judged reason its failures give.
EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "always_abstains": {
        PRESENT: "decided abstain",
        CONFLICTED: "the controlling source says answer",
    },
    "answers_without_evidence": {
        REMOVED: "decided answer",
        FORBIDDEN: "decided answer",
        DISTRACTOR: "answers citing the distractor",
    },
    "first_document": {
        REMOVED: "decided answer",
        FORBIDDEN: "decided answer",
        PARTIAL: "decided answer",
        CONFLICTED: "cites a superseded version",
        DISTRACTOR: "answers citing the distractor",
    },
    "leaks_in_refusal": {FORBIDDEN: "restricted text or a forbidden document in the answer"},
    "answers_from_hidden": {FORBIDDEN: "decided answer; restricted text or a forbidden document"},
    "ignores_dates": {CONFLICTED: "cites a superseded version"},
    "partial_as_answer": {PARTIAL: "decided answer"},
    "reads_first_only": {
        REORDER: "decision changed: ",
        CONFLICTED: "decided abstain, the controlling source says answer",
    },
    "takes_restated_question": {DISTRACTOR: "answers citing the distractor"},
}


def test_every_check_has_a_pipeline_built_to_fail_it() -> None:
    assert set(EXPECTED_FAILURES) == set(FLAWS)
    assert set().union(*EXPECTED_FAILURES.values()) == EVERY_CHECK


@pytest.mark.parametrize("flaw", FLAWS)
def test_a_pipeline_built_to_fail_fails_its_checks(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor, oracle: Oracle, flaw: str
) -> None:
    r = run(demo_engine, annotator, tax, Grounded(oracle, flaw), flaw)
    expected = EXPECTED_FAILURES[flaw]
    assert set(r.checks.index) == EVERY_CHECK
    assert failing(r) == set(expected), r.checks["pass_rate"]
    for check, why in expected.items():
        if check in runmetrics.PERTURBATION_CHECKS.values():
            kind = next(k for k, v in runmetrics.PERTURBATION_CHECKS.items() if v == check)
            g = r.perturbed[r.perturbed["kind"] == kind]
        else:
            state = next(k for k, v in runmetrics.METAMORPHIC.items() if v[0] == check)
            g = r.families[r.families["evidence_state"] == state]
        reasons = g.loc[~g["passed"].astype(bool), "why"]
        assert len(reasons) and reasons.str.contains(why, regex=False).all(), (check, reasons)
