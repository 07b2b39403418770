"""The feedback loop: an audited failure promoted to a draft evaluation case."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.audits.plans import plan_row
from review.audits.verdicts import VerdictView, verdict_view
from review.cases import cases
from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus, ClaimVerdict
from storage import changes
from storage.db import read_session
from storage.models import AuditItem, AuditVerdict, Case, Document, SamplingPlan, Trace, TraceChunk

__all__ = ["promote_to_case", "promoted_from"]


# --- feedback loop: promote to a case -------------------------------------------------------

_SUGGESTED: dict[str, tuple[str | None, tuple[str, ...], str | None]] = {
    # verdict -> (expected decision or None = as observed, reason codes, category)
    "false_refusal": ("answer", (), "in_scope"),
    "supported_answer": ("answer", (), "in_scope"),
    "unsupported_answer": ("abstain", ("required_claim_not_covered",), "near_miss"),
    "partially_supported": ("partial", ("required_claim_not_covered",), "in_scope"),
    "restricted_leak": ("abstain", ("source_not_allowed",), "access_restricted"),
    "correct_refusal": (None, (), None),
    "wording_violation": (None, (), None),
}


_CATEGORY_OF = {
    "answer": "in_scope",
    "partial": "in_scope",
    "abstain": "near_miss",
    "clarify": "ambiguous",
    "escalate": "restricted_topic",
}


_DEFAULT_REASON = {
    "abstain": "no_answer_bearing_evidence",
    "clarify": "ambiguous_question",
    "escalate": "restricted_topic",
}


def suggested_decision(
    verdict: str, observed: str | None, observed_reason: str | None, tax: Taxonomy
) -> tuple[str, tuple[str, ...], str]:
    """The expected decision, reason codes and category a verdict suggests for a new case."""
    decision, reasons, category = _SUGGESTED.get(verdict, (None, (), None))
    if decision is None:
        decision = observed if observed in tax.decisions else "abstain"
        if not tax.decisions[decision].answers:
            code = observed_reason if observed_reason in tax.reason_codes else None
            reasons = (code or _DEFAULT_REASON.get(decision, "no_answer_bearing_evidence"),)
        elif decision == "answer" and observed_reason == "false_premise":
            reasons = ("false_premise",)
    if decision not in tax.decisions:
        decision = "abstain"
        reasons = reasons or ("no_answer_bearing_evidence",)
    reasons = tuple(r for r in reasons if r in tax.reason_codes)
    if not tax.decisions[decision].answers and not reasons:
        reasons = (next(iter(tax.reason_codes)),)
    category = category or _CATEGORY_OF.get(decision, "in_scope")
    if category not in tax.categories:
        category = next(iter(tax.categories))
    return decision, reasons, category


def promote_to_case(
    s: Session, actor: Actor, item_id: int, tax: Taxonomy, split: str = "validation"
) -> int:
    """Turn an audited trace into a draft case: the query as the question, the retrieved
    documents that exist in the corpus as evidence (forbidden where authorization filtered
    them), the verdict's suggested expected decision; claims the reviewer found supported
    become required claims. The case id is stored on my verdict and the case notes name the
    trace and the plan, so each side links to the other.

    One action inside the caller's transaction, which it does not commit: the case and the
    link land together or not at all (another reviewer's promotion of the same trace refuses
    this one, and no unlinked draft case is left)."""
    require(actor, Permission.audit)
    require(actor, Permission.edit_cases)
    if split not in tax.splits:
        raise InputError(f"split {split!r} is not one of: {', '.join(tax.splits)}")
    item = s.get(AuditItem, item_id, with_for_update=True)  # one promotion of a trace at a time
    if item is None:
        raise InputError(f"audit item {item_id} does not exist")
    trace = s.get(Trace, item.trace_pk)
    assert trace is not None
    if not clearance.may_see(actor, trace.restricted):
        raise PermissionDenied(
            "this trace is restricted: only users with clearance may turn it into a case"
        )
    mine = s.scalar(
        select(AuditVerdict)
        .where(AuditVerdict.item_id == item_id, AuditVerdict.reviewer == actor.email)
        .order_by(AuditVerdict.id.desc())
        .limit(1)
    )
    if mine is None:
        raise InputError("record your verdict on this trace before promoting it to a case")
    already = _promoted_elsewhere(s, item_id, None)
    if already is not None:
        key = s.scalar(select(Case.key).where(Case.id == already))
        raise InputError(f"this trace is already a case: {key or already}")
    case_in = _case_of(s, item, trace, verdict_view(mine), tax, split)
    case_id = cases.create_case(s, actor, case_in, tax)
    _link(s, actor, mine.id, item_id, case_id)
    return case_id


def _promoted_elsewhere(s: Session, item_id: int, verdict_id: int | None) -> int | None:
    """The case a verdict on the item other than ``verdict_id`` was promoted to, if any."""
    stmt = select(AuditVerdict.promoted_case_id).where(
        AuditVerdict.item_id == item_id, AuditVerdict.promoted_case_id.is_not(None)
    )
    if verdict_id is not None:
        stmt = stmt.where(AuditVerdict.id != verdict_id)
    return s.scalar(stmt.limit(1))


def _case_of(
    s: Session, item: AuditItem, trace: Trace, verdict_row: VerdictView, tax: Taxonomy, split: str
) -> cases.CaseIn:
    """The draft case a verdict on a trace suggests."""
    plan_name = plan_row(s, item.plan_id).name
    chunks = s.scalars(
        select(TraceChunk)
        .where(TraceChunk.trace_pk == trace.id)
        .order_by(TraceChunk.rank.is_(None), TraceChunk.rank, TraceChunk.id)
    ).all()
    refs = list(
        dict.fromkeys((c.doc_id, c.doc_version) for c in chunks if c.doc_id and c.doc_version)
    )
    in_corpus = {
        (doc_id, version)
        for doc_id, version in refs
        if s.scalar(
            select(Document.id).where(Document.doc_key == doc_id, Document.version == version)
        )
    }
    observed = trace.decision
    attributes: dict[str, Any] = dict(trace.attributes or {})
    decision, reasons, category = suggested_decision(
        verdict_row.verdict, observed, trace.reason_code, tax
    )
    supported_claims = [
        str(c["text"]) for c in verdict_row.claims if c.get("verdict") == ClaimVerdict.supported
    ]
    cited_supported = {
        x
        for c in verdict_row.claims
        if c.get("verdict") == ClaimVerdict.supported
        for x in c.get("cited", [])
    }
    documents = []
    for doc_id, version in refs:
        if (doc_id, version) not in in_corpus:
            continue
        its = [c for c in chunks if (c.doc_id, c.doc_version) == (doc_id, version)]
        filtered = all(c.filtered for c in its)
        decisive = any(c.chunk_id in cited_supported for c in its)
        documents.append(
            cases.CaseDocIn(
                doc_id=str(doc_id),
                version=int(version or 1),
                visibility="forbidden" if filtered else "visible",
                role="decisive" if decisive else "context",
            )
        )
    slices = []
    if any(c.filtered for c in chunks):
        slices.append("access_filtered_answer")
    if not any(not c.filtered for c in chunks):
        slices.append("empty_retrieval")
    raw_slices = attributes.get("slices") or attributes.get("slice")
    if isinstance(raw_slices, str):
        raw_slices = [raw_slices]
    for sl in raw_slices or ():
        if sl in tax.slices and sl not in slices:
            slices.append(str(sl))
    trace_scopes = [str(x) for x in trace.identity_scopes or ()]
    scopes = [x for x in trace_scopes if x in tax.access_scopes] or ["public"]
    question = str(trace.query).strip()
    if len(question) < 3:
        raise InputError("the trace has no usable query to turn into a question")
    stages = ", ".join(verdict_row.stages) or "none"
    notes = (
        f"Promoted from the audit of production trace {trace.trace_id} (plan "
        f"{plan_name!r}, audit item {item.id}). Verdict: {verdict_row.verdict} by "
        f"{verdict_row.reviewer}; stages: {stages}. Observed decision: "
        f"{observed or 'none'}. Suggested expected decision: {decision}; "
        "confirm it and the evidence before marking the case ready."
    )
    if verdict_row.notes:
        notes += f" Reviewer notes: {verdict_row.notes}"
    return cases.CaseIn(
        question=question[:4000],
        required_claims=supported_claims if tax.decisions[decision].answers else [],
        identity=cases.IdentityIn(
            name=f"production:{trace.user_role or 'user'}"[:200], scopes=scopes
        ),
        documents=documents,
        expected_decision=decision,
        reason_codes=list(reasons),
        category=category,
        slices=slices,
        split=split,
        status=CaseStatus.draft,
        notes=notes,
    )


def _link(s: Session, actor: Actor, verdict_id: int, item_id: int, case_id: int) -> None:
    """Store the new case on the verdict; refused (and so the whole promotion rolled back)
    when another reviewer's verdict on the trace was promoted meanwhile."""
    row = s.get(AuditVerdict, verdict_id, with_for_update=True)
    assert row is not None
    taken = _promoted_elsewhere(s, item_id, row.id)
    if taken is not None:
        raise InputError(
            f"another reviewer promoted this trace at the same moment (case {taken}); "
            "nothing was saved"
        )
    before = changes.snapshot(row)
    row.promoted_case_id = case_id
    s.flush()
    changes.record(
        s, actor.email, "promote", "audit_verdict", row.id, before, changes.snapshot(row)
    )


def promoted_from(engine: Engine, case_id: int) -> list[dict[str, Any]]:
    """The audits a case was promoted from (trace id, plan, item, verdict, reviewer)."""
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Trace.trace_id,
                SamplingPlan.name,
                AuditItem.id,
                AuditVerdict.verdict,
                AuditVerdict.reviewer,
            )
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .join(SamplingPlan, SamplingPlan.id == AuditItem.plan_id)
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(AuditVerdict.promoted_case_id == case_id)
        ).all()
    return [
        {"trace_id": r[0], "plan": r[1], "item_id": r[2], "verdict": r[3], "reviewer": r[4]}
        for r in rows
    ]
