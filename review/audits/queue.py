"""The audit queue: a plan's sampled items, the next item for each reviewer, reservations
and progress.

The **queue** hands each reviewer the next item that still needs a verdict (``overlap``
verdicts per item, by different reviewers); an opened item is reserved for a while so two
reviewers do not work on the same slot. Restricted traces go only to reviewers with clearance.
With blind review a reviewer sees other verdicts on an item only after submitting their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Engine, exists, func, or_, select, update
from sqlalchemy.orm import Session

from review.audits.plans import n_reviewers, plan_row, plan_stats, spec_of
from review.audits.verdicts import current_verdicts
from review.audits.vocabulary import outcome
from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.terms import PlanStatus
from storage.db import read_session
from storage.models import AuditItem, AuditVerdict, Trace, utcnow

__all__ = [
    "AuditProgress",
    "ItemRow",
    "count_items",
    "list_items",
    "next_item",
    "progress",
    "release_item",
    "reserve_item",
]


# --- sample listing -------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemRow:
    id: int
    position: int
    stratum: str
    trace_id: str
    at: dt.datetime
    decision: str | None
    feedback: str | None
    restricted: bool
    reviewers: int
    outcome: str | None
    reserved_by: str | None


def count_items(engine: Engine, plan_id: int) -> int:
    with read_session(engine) as s:
        return int(
            s.scalar(select(func.count(AuditItem.id)).where(AuditItem.plan_id == plan_id)) or 0
        )


def list_items(engine: Engine, plan_id: int, page: int = 1, page_size: int = 25) -> list[ItemRow]:
    """One page of a plan's sample in queue order (no trace text: safe for every role)."""
    page = max(page, 1)
    with read_session(engine) as s:
        rows = s.execute(
            select(
                AuditItem.id,
                AuditItem.position,
                AuditItem.stratum,
                Trace.trace_id,
                Trace.at,
                Trace.decision,
                Trace.feedback,
                Trace.restricted,
                AuditItem.reserved_by,
                AuditItem.reserved_until,
            )
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(AuditItem.plan_id == plan_id)
            .order_by(AuditItem.position)
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
        current = current_verdicts(s, [r.id for r in rows])
    now = utcnow()
    out = []
    for r in rows:
        verdicts = [v.verdict for v in current.get(r.id, [])]
        held = r.reserved_by if r.reserved_until and r.reserved_until > now else None
        out.append(
            ItemRow(
                r.id,
                r.position,
                r.stratum,
                r.trace_id,
                r.at,
                r.decision,
                r.feedback,
                bool(r.restricted),
                len(verdicts),
                outcome(verdicts),
                held,
            )
        )
    return out


# --- the queue ------------------------------------------------------------------------------


def next_item(
    s: Session,
    actor: Actor,
    plan_id: int,
    *,
    exclude: Iterable[int] = (),
    now: dt.datetime | None = None,
) -> int | None:
    """Reserve and return my next item of the plan (None when nothing is left for me).

    An item I hold comes first; otherwise the first item in queue order that I have not
    judged, that nobody else holds, that has fewer than ``overlap`` verdicts, and whose trace
    I may see (restricted traces need clearance).
    """
    require(actor, Permission.audit)
    skip = sorted(set(exclude))

    t = now or utcnow()
    plan = plan_row(s, plan_id)
    if plan.status != PlanStatus.open:
        return None
    spec = spec_of(plan)
    mine = exists().where(
        AuditVerdict.item_id == AuditItem.id, AuditVerdict.reviewer == actor.email
    )
    visible = [] if clearance.cleared(actor) else [Trace.restricted.is_(False)]
    held = s.scalar(
        select(AuditItem.id)
        .join(Trace, Trace.id == AuditItem.trace_pk)
        .where(
            AuditItem.plan_id == plan_id,
            AuditItem.reserved_by == actor.email,
            AuditItem.reserved_until > t,
            AuditItem.id.not_in(skip),
            ~mine,
            *visible,
        )
        .order_by(AuditItem.position)
        .limit(1)
    )
    if held is not None:
        _hold(s, int(held), actor, t, spec.reservation_minutes)
        return int(held)
    free = or_(
        AuditItem.reserved_by.is_(None),
        AuditItem.reserved_by == actor.email,
        AuditItem.reserved_until <= t,
    )
    item_id = s.scalar(
        select(AuditItem.id)
        .join(Trace, Trace.id == AuditItem.trace_pk)
        .where(
            AuditItem.plan_id == plan_id,
            AuditItem.id.not_in(skip),
            ~mine,
            free,
            n_reviewers() < plan.overlap,
            *visible,
        )
        .order_by(AuditItem.position)
        .limit(1)
        .with_for_update(skip_locked=True, of=AuditItem)
    )
    if item_id is None:
        return None
    _hold(s, int(item_id), actor, t, spec.reservation_minutes)
    return int(item_id)


def _hold(s: Session, item_id: int, actor: Actor, t: dt.datetime, minutes: int) -> dt.datetime:
    until = t + dt.timedelta(minutes=minutes)
    s.execute(
        update(AuditItem)
        .where(AuditItem.id == item_id)
        .values(reserved_by=actor.email, reserved_until=until)
    )
    return until


def reserve_item(
    s: Session, actor: Actor, item_id: int, now: dt.datetime | None = None
) -> dt.datetime:
    """Hold a specific item (opened by a deep link); refused while someone else holds it."""
    require(actor, Permission.audit)

    t = now or utcnow()
    item = s.get(AuditItem, item_id, with_for_update=True)
    if item is None:
        raise InputError(f"audit item {item_id} does not exist")
    trace = s.get(Trace, item.trace_pk)
    if trace is not None and not clearance.may_see(actor, trace.restricted):
        raise PermissionDenied("this trace is restricted: only users with clearance audit it")
    if (
        item.reserved_by not in (None, actor.email)
        and item.reserved_until is not None
        and item.reserved_until > t
    ):
        raise InputError(
            f"item {item_id} is being reviewed by {item.reserved_by} until "
            f"{item.reserved_until:%H:%M UTC}; take the next item instead"
        )
    plan = plan_row(s, item.plan_id)
    return _hold(s, item_id, actor, t, spec_of(plan).reservation_minutes)


def release_item(s: Session, actor: Actor, item_id: int) -> None:
    """Give an item I hold back to the queue (skip)."""
    require(actor, Permission.audit)
    s.execute(
        update(AuditItem)
        .where(AuditItem.id == item_id, AuditItem.reserved_by == actor.email)
        .values(reserved_by=None, reserved_until=None)
    )


@dataclass(frozen=True)
class AuditProgress:
    items: int
    complete: int
    verdicts: int
    mine: int
    held_by_me: int
    overlap: int
    waiting_for_clearance: int  # restricted items I may not audit that still need verdicts


def progress(engine: Engine, actor: Actor, plan_id: int) -> AuditProgress:
    with read_session(engine) as s:
        plan = plan_row(s, plan_id)
        items, complete, verdicts = plan_stats(s, [plan_id]).get(plan_id, (0, 0, 0))
        mine = int(
            s.scalar(
                select(func.count(func.distinct(AuditVerdict.item_id)))
                .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
                .where(AuditItem.plan_id == plan_id, AuditVerdict.reviewer == actor.email)
            )
            or 0
        )
        held = int(
            s.scalar(
                select(func.count(AuditItem.id)).where(
                    AuditItem.plan_id == plan_id,
                    AuditItem.reserved_by == actor.email,
                    AuditItem.reserved_until > utcnow(),
                )
            )
            or 0
        )
        waiting = 0
        if not clearance.cleared(actor):
            waiting = int(
                s.scalar(
                    select(func.count(AuditItem.id))
                    .join(Trace, Trace.id == AuditItem.trace_pk)
                    .where(
                        AuditItem.plan_id == plan_id,
                        Trace.restricted.is_(True),
                        n_reviewers() < plan.overlap,
                    )
                )
                or 0
            )
    return AuditProgress(items, complete, verdicts, mine, held, plan.overlap, waiting)
