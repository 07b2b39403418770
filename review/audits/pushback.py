"""Audit verdicts of completed batches back to the trace store they came from.

The audit side of ``workbench push phoenix`` and the Audit page's button: which batches (one
closed batch, or every closed one; an open batch is refused, as its verdicts may still
change), each reviewer's current (newest) verdict on each sampled trace, and the audit
vocabulary; ``review.traces.live.push`` builds the span annotations and talks to Phoenix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Engine, select

from review.audits.plans import plan_row
from review.audits.verdicts import current_verdicts
from review.audits.vocabulary import STAGES, VERDICTS
from review.core import clearance
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.terms import PlanStatus
from review.traces.live import push
from storage.db import one_of, read_session
from storage.models import AuditItem, SamplingPlan, Trace

__all__ = ["VOCABULARY", "push_to_phoenix", "verdict_facts"]

VOCABULARY = push.Vocabulary(VERDICTS, STAGES)


def verdict_facts(engine: Engine, plan_ids: Sequence[int]) -> list[push.VerdictFacts]:
    """Every reviewer's current verdict on every item of these batches, in queue order. A
    verdict is restricted (its text stays in the workbench, see ``review.traces.live.push``)
    when its trace is restricted or its note or a claim retells a restricted document, read
    from the corpus as it is now."""
    out: list[push.VerdictFacts] = []
    with read_session(engine) as s:
        names = {
            int(i): str(n)
            for i, n in s.execute(
                select(SamplingPlan.id, SamplingPlan.name).where(
                    one_of(s, SamplingPlan.id, plan_ids)
                )
            )
        }
        runs = clearance.restricted_runs(s)
        items = s.execute(
            select(AuditItem.id, AuditItem.plan_id, Trace.trace_id, Trace.restricted)
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(one_of(s, AuditItem.plan_id, plan_ids))
            .order_by(AuditItem.plan_id, AuditItem.position)
        ).all()
        verdicts = current_verdicts(s, [int(r[0]) for r in items])
    for item_id, plan_id, trace_id, trace_restricted in items:
        for v in verdicts.get(int(item_id), []):
            texts = [v.notes, *(str(c.get("text") or "") for c in v.claims)]
            out.append(
                push.VerdictFacts(
                    plan_id=int(plan_id),
                    plan_name=names.get(int(plan_id), ""),
                    item_id=int(item_id),
                    trace_id=str(trace_id),
                    verdict_id=v.id,
                    reviewer=v.reviewer,
                    verdict=v.verdict,
                    restricted=bool(trace_restricted)
                    or any(clearance.retells(t, runs) for t in texts),
                    stages=v.stages,
                    notes=v.notes,
                    claims=v.claims,
                    judged_at=v.created_at,
                )
            )
    return out


def _plans(engine: Engine, plan_id: int | None, all_plans: bool) -> list[int]:
    if (plan_id is None) == (not all_plans):
        raise InputError("name one audit batch (its plan id) or all closed batches, not both")
    with read_session(engine) as s:
        if plan_id is not None:
            plan = plan_row(s, plan_id)
            if plan.status != PlanStatus.closed:
                raise InputError(
                    f"batch {plan.name!r} is {plan.status}: its verdicts go back to Phoenix when "
                    "its audit is complete (close the batch first)"
                )
            return [plan.id]
        return list(
            s.scalars(
                select(SamplingPlan.id)
                .where(SamplingPlan.status == PlanStatus.closed)
                .order_by(SamplingPlan.id)
            )
        )


def push_to_phoenix(
    engine: Engine,
    actor: Actor,
    *,
    plan_id: int | None = None,
    all_plans: bool = False,
    source: str | None = None,
    batch_size: int = push.BATCH,
    timeout: float = push.TIMEOUT,
    secrets: Callable[[str], str | None] = push.env_secret,
) -> push.PushReport:
    """Push the verdicts of closed batch ``plan_id`` (or of every closed batch) to Phoenix."""
    push.require_push(actor)
    ids = _plans(engine, plan_id, all_plans)
    return push.push_verdicts(
        engine,
        actor,
        verdict_facts(engine, ids),
        VOCABULARY,
        source=source,
        batch_size=batch_size,
        timeout=timeout,
        secrets=secrets,
    )
