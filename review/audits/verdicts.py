"""Verdicts on audit items, checked claim by claim.

**Verdicts** are append-only: an edit is a new row naming the one it replaces, and an edit
based on an older row is refused. A verdict separates the two failure sides (correct or false
refusal, supported or unsupported answer, partially supported, restricted content leaked,
wording violation), attributes a failure to a pipeline stage, and can carry a claim-level
review: the answer cut into claims (editable), each with the chunks it cites and a verdict;
the answer passes only if every claim is supported by a chunk that was in the context sent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.audits.claims import CitationReport
from review.audits.items import ClaimDraft, check_claims
from review.audits.plans import plan_row, spec_of
from review.audits.vocabulary import (
    CORRECT,
    NEEDS_NOTE,
    NEEDS_STAGE,
    STAGES,
    VERDICTS,
)
from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, require
from review.core.terms import CLAIM_VERDICTS, ClaimVerdict, PlanStatus
from storage import changes
from storage.db import read_session
from storage.models import AuditItem, AuditVerdict, Trace, TraceChunk, utcnow

__all__ = [
    "VerdictIn",
    "VerdictView",
    "current_verdicts",
    "item_verdicts",
    "my_verdict",
    "submit_verdict",
    "verdict_history",
    "verdict_view",
]

#: What a reviewer may say of a claim: the claim verdicts, or "not a claim" (text that asserts
#: nothing; the claim check leaves it out).
AUDIT_CLAIM_VERDICTS: tuple[ClaimVerdict, ...] = (*CLAIM_VERDICTS, ClaimVerdict.not_a_claim)


# --- verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictIn:
    verdict: str
    stages: tuple[str, ...] = ()
    notes: str = ""
    claims: tuple[ClaimDraft, ...] = ()

    def check(self, context_ids: Iterable[str]) -> CitationReport | None:
        if self.verdict not in VERDICTS:
            raise InputError(f"verdict {self.verdict!r} is not one of: {', '.join(VERDICTS)}")
        bad = [s for s in self.stages if s not in STAGES]
        if bad:
            raise InputError(f"stage {bad[0]!r} is not one of: {', '.join(STAGES)}")
        if len(set(self.stages)) != len(self.stages):
            raise InputError("a stage is listed twice")
        if self.verdict in NEEDS_STAGE and not self.stages:
            raise InputError(
                f"say where it failed: a {VERDICTS[self.verdict].lower()} needs at least one "
                "stage (retrieval, filter, policy, generator or citation)"
            )
        if self.verdict in CORRECT and self.stages:
            raise InputError(
                f"a {VERDICTS[self.verdict].lower()} has no failing stage; clear the stages "
                "or choose a failure verdict"
            )
        if self.verdict in NEEDS_NOTE and not self.notes.strip():
            raise InputError(
                f"say what happened: a {VERDICTS[self.verdict].lower()} needs a note "
                "(which content, which wording rule; do not paste restricted text)"
            )
        if len(self.notes) > 4000:
            raise InputError("the note is longer than 4000 characters")
        if not self.claims:
            return None
        for i, c in enumerate(self.claims, start=1):
            if not c.text.strip():
                raise InputError(f"claim {i} is empty: write it or remove it")
            if c.verdict is not None and c.verdict not in AUDIT_CLAIM_VERDICTS:
                raise InputError(
                    f"claim {i}: verdict {c.verdict!r} is not one of: "
                    + ", ".join(AUDIT_CLAIM_VERDICTS)
                )
        report = check_claims(self.claims, context_ids)
        if self.verdict == "supported_answer" and report.answer_passes is not True:
            first = next(c for c in report.claims if c.status in ("fail", "unreviewed"))
            why = "; ".join(first.problems) or "not judged yet"
            raise InputError(
                f"the answer passes only if every claim is supported: claim {first.index + 1} "
                f"({why}). Judge every claim, or choose unsupported or partially supported."
            )
        if self.verdict in ("unsupported_answer", "partially_supported") and (
            report.answer_passes is True
        ):
            raise InputError(
                "every claim is supported by a chunk in the context, so the answer passes; "
                "choose supported answer, or mark the claim that is not supported"
            )
        return report


@dataclass(frozen=True)
class VerdictView:
    id: int
    item_id: int
    reviewer: str
    verdict: str
    stages: tuple[str, ...]
    notes: str
    claims: tuple[dict[str, Any], ...]
    replaces_id: int | None
    promoted_case_id: int | None
    created_at: dt.datetime

    @property
    def claim_drafts(self) -> list[ClaimDraft]:
        return [
            ClaimDraft(str(c.get("text", "")), tuple(c.get("cited") or ()), c.get("verdict"))
            for c in self.claims
        ]


def verdict_view(r: AuditVerdict) -> VerdictView:
    return VerdictView(
        r.id,
        r.item_id,
        r.reviewer,
        r.verdict,
        tuple(r.stages or ()),
        r.notes,
        tuple(r.claims or ()),
        r.replaces_id,
        r.promoted_case_id,
        r.created_at,
    )


def current_verdicts(s: Session, item_ids: Sequence[int]) -> dict[int, list[VerdictView]]:
    out: dict[int, list[VerdictView]] = {}
    for start in range(0, len(item_ids), 900):
        chunk = list(item_ids[start : start + 900])
        latest = (
            select(func.max(AuditVerdict.id))
            .where(AuditVerdict.item_id.in_(chunk))
            .group_by(AuditVerdict.item_id, AuditVerdict.reviewer)
        )
        for r in s.scalars(
            select(AuditVerdict).where(AuditVerdict.id.in_(latest)).order_by(AuditVerdict.id)
        ):
            out.setdefault(r.item_id, []).append(verdict_view(r))
    return out


def my_verdict(engine: Engine, actor: Actor, item_id: int) -> VerdictView | None:
    with read_session(engine) as s:
        row = s.scalar(
            select(AuditVerdict)
            .where(AuditVerdict.item_id == item_id, AuditVerdict.reviewer == actor.email)
            .order_by(AuditVerdict.id.desc())
            .limit(1)
        )
        return verdict_view(row) if row else None


def item_verdicts(engine: Engine, actor: Actor, item_id: int) -> list[VerdictView] | None:
    """Everyone's current verdict on an item, or None while review is blind and I have not
    submitted mine."""
    with read_session(engine) as s:
        item = s.get(AuditItem, item_id)
        if item is None:
            return None
        plan = plan_row(s, item.plan_id)
        current = current_verdicts(s, [item_id]).get(item_id, [])
    if spec_of(plan).blind and not any(v.reviewer == actor.email for v in current):
        return None
    return sorted(current, key=lambda v: v.reviewer)


def verdict_history(engine: Engine, actor: Actor, item_id: int) -> list[VerdictView]:
    """Every verdict row of an item, oldest first (mine only while review is blind)."""
    visible = item_verdicts(engine, actor, item_id)
    with read_session(engine) as s:
        rows = [
            verdict_view(r)
            for r in s.scalars(
                select(AuditVerdict)
                .where(AuditVerdict.item_id == item_id)
                .order_by(AuditVerdict.id)
            )
        ]
    if visible is None:
        rows = [r for r in rows if r.reviewer == actor.email]
    return rows


def submit_verdict(
    s: Session,
    actor: Actor,
    item_id: int,
    verdict: VerdictIn,
    based_on: int | None,
) -> VerdictView:
    """Append my verdict on an item. ``based_on`` is the id of my verdict I started editing
    from (None for a first verdict); if mine changed since (another tab), nothing is saved."""
    require(actor, Permission.audit)

    item = s.get(AuditItem, item_id, with_for_update=True)
    if item is None:
        raise InputError(f"audit item {item_id} does not exist")
    plan = plan_row(s, item.plan_id)
    if plan.status != PlanStatus.open:
        raise InputError(f"plan {plan.name!r} is {plan.status}: verdicts are not accepted")
    trace = s.get(Trace, item.trace_pk)
    assert trace is not None
    if not clearance.may_see(actor, trace.restricted):
        raise PermissionDenied("this trace is restricted: only users with clearance audit it")
    context = s.scalars(
        select(TraceChunk.chunk_id).where(
            TraceChunk.trace_pk == trace.id, TraceChunk.filtered.is_(False)
        )
    ).all()
    report = verdict.check(context)
    latest = s.scalar(
        select(AuditVerdict)
        .where(AuditVerdict.item_id == item_id, AuditVerdict.reviewer == actor.email)
        .order_by(AuditVerdict.id.desc())
        .limit(1)
    )
    latest_id = latest.id if latest else None
    if latest_id != based_on:
        when = f" at {latest.created_at:%Y-%m-%d %H:%M UTC}" if latest else ""
        raise StaleWriteError(
            f"your verdict on trace {trace.trace_id} was changed{when} (in another tab or "
            "session) after you opened it; nothing was saved. Reload to see it, then edit."
        )
    if latest is None:
        others = int(
            s.scalar(
                select(func.count(func.distinct(AuditVerdict.reviewer))).where(
                    AuditVerdict.item_id == item_id
                )
            )
            or 0
        )
        if others >= plan.overlap:
            raise InputError(
                f"trace {trace.trace_id} already has its "
                f"{readable.count(plan.overlap, 'verdict')}; "
                "take the next item"
            )
    claims: list[dict[str, Any]] = []
    if report is not None:
        for c, chk in zip(verdict.claims, report.claims, strict=True):
            claims.append(
                {
                    "text": c.text.strip(),
                    "cited": list(chk.cited_ids),
                    "verdict": c.verdict,
                    "status": chk.status,
                    "not_in_context": list(chk.invalid_ids),
                }
            )
    row = AuditVerdict(
        item_id=item_id,
        reviewer=actor.email,
        verdict=verdict.verdict,
        stages=list(verdict.stages),
        notes=verdict.notes.strip(),
        claims=claims,
        replaces_id=latest_id,
        promoted_case_id=latest.promoted_case_id if latest else None,
        created_at=utcnow(),
    )
    s.add(row)
    if item.reserved_by == actor.email:
        item.reserved_by = None
        item.reserved_until = None
    s.flush()
    changes.record(
        s,
        actor.email,
        "verdict",
        "audit_item",
        item_id,
        changes.snapshot(latest) if latest else None,
        changes.snapshot(row),
    )
    return verdict_view(row)
