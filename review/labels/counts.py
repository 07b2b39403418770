"""The Label page's progress and queue size, split so that a page can keep the costly part.

:func:`review.labels.labeling.progress` and :func:`review.labels.labeling.queue_size` are the
rules; they read every label of the ready cases two or three times (at 50,000 cases and
200,000 labels a quarter of a second of SQLite, half a second of PostgreSQL's CPU, on every
run of the Label page). Here the same figures come from:

- :func:`label_counts`: one pass over the labels of the ready cases (the part of the queue a
  filter names): how many cases, labels, cases with the overlap, cases I labeled. It depends
  only on the labels, the cases and who asks, so a page may keep it under :func:`stamp`;
- :func:`kept_counts`: those counts brought up to date from the ones a page kept: the same
  when the stamp has not moved; moved by the labels added since, when nothing else changed
  (a label saved is a few index look-ups, not a recount); counted again otherwise;
- :func:`queue_progress`: the live reservations (a handful, by the index on their expiry)
  and the labels of the cases they hold, read each time, since a reservation expires with
  time and is written by every "next case"; it turns the counts into the rules' answers.

Tests hold both equal to the rules."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Engine, case, func, select

from review.core import clearance
from review.core.identity import Actor
from review.core.terms import CaseStatus
from review.labels.labeling import Progress
from review.labels.queue import NO_FILTER, QueueFilter
from storage.db import one_of, read_session
from storage.models import AuditLog, Case, Label, Reservation, utcnow

__all__ = [
    "Kept",
    "LabelCounts",
    "advance",
    "kept_counts",
    "label_counts",
    "queue_progress",
    "stamp",
]

#: audit-log actions that leave the cases as they were (a label, a gold label)
_LABEL_ONLY = ("label", "adjudicate")
#: more changes than this since the kept counts: count again
_MOST_CHANGES = 200


@dataclass(frozen=True)
class LabelCounts:
    """Of the ready cases a queue filter names: how many, their labels (one per annotator),
    how many have ``overlap`` labels, how many I labeled, and how many have the overlap
    without my label."""

    ready: int
    labels: int
    complete: int
    mine: int
    complete_without_me: int
    overlap: int


def stamp(engine: Engine) -> tuple[int, ...]:
    """A cache key of :func:`label_counts` (index look-ups): labels are only added (a count
    and the newest id move), cases are never deleted and every edit of a case (its status,
    split, family, slices) and of the labeling setting adds an audit-log row, as
    :func:`review.evaluation.execution.choices_stamp` relies on. Reservations are not in it:
    :func:`queue_progress` reads them each time."""
    parts = [
        select(func.count()).select_from(Label),
        select(func.coalesce(func.max(Label.id), 0)),
        select(func.count()).select_from(Case),
        select(func.coalesce(func.max(Case.id), 0)),
        select(func.coalesce(func.max(AuditLog.id), 0)),
    ]
    with read_session(engine) as s:
        row = s.execute(select(*(p.scalar_subquery() for p in parts))).one()
    return tuple(int(v or 0) for v in row)


def _per_case(email: str, of_cases: ColumnElement[bool], upto: int | None = None) -> Any:
    """Per case whose labels meet ``of_cases`` (a condition on ``Label.case_id``) with labels
    (of ids up to ``upto``): its annotators and whether ``email`` is one of them."""
    bound = [Label.id <= upto] if upto is not None else []
    return (
        select(
            Label.case_id.label("case_id"),
            func.count(func.distinct(Label.annotator)).label("n"),
            func.max(case((Label.annotator == email, 1), else_=0)).label("mine"),
        )
        .where(of_cases, *bound)
        .group_by(Label.case_id)
    )


def label_counts(
    engine: Engine,
    email: str,
    overlap: int,
    queue: QueueFilter = NO_FILTER,
    upto: int | None = None,
) -> LabelCounts:
    """The label counts of the ready cases ``queue`` names, for the annotator ``email``, in
    one pass over their labels (those of ids up to ``upto``, the newest of a stamp)."""
    ready_ids = select(Case.id).where(Case.status == CaseStatus.ready, *queue.conditions())
    per = _per_case(email, Label.case_id.in_(ready_ids), upto).subquery()
    full = per.c.n >= overlap
    with read_session(engine) as s:
        ready = int(s.scalar(select(func.count()).select_from(ready_ids.subquery())) or 0)
        labels, complete, mine, without_me = s.execute(
            select(
                func.coalesce(func.sum(per.c.n), 0),
                func.coalesce(func.sum(case((full, 1), else_=0)), 0),
                func.coalesce(func.sum(per.c.mine), 0),
                func.coalesce(func.sum(case((full & (per.c.mine == 0), 1), else_=0)), 0),
            )
        ).one()
    return LabelCounts(ready, int(labels), int(complete), int(mine), int(without_me), overlap)


@dataclass(frozen=True)
class Kept:
    """Label counts and the stamp they are of (their labels: ids up to ``stamp[1]``)."""

    stamp: tuple[int, ...]
    counts: LabelCounts


def kept_counts(
    engine: Engine,
    email: str,
    overlap: int,
    queue: QueueFilter = NO_FILTER,
    kept: Kept | None = None,
) -> Kept:
    """The label counts as the data stand now (:func:`label_counts`), from ``kept`` (of the
    same person, overlap and filter) when that is cheaper: the same when the stamp has not
    moved, moved by the labels added since when nothing else changed."""
    now = stamp(engine)
    if kept is not None and kept.counts.overlap == overlap:
        if kept.stamp == now:
            return kept
        moved = advance(engine, email, queue, kept, now)
        if moved is not None:
            return Kept(now, moved)
    return Kept(now, label_counts(engine, email, overlap, queue, upto=now[1]))


def advance(
    engine: Engine, email: str, queue: QueueFilter, kept: Kept, now: tuple[int, ...]
) -> LabelCounts | None:
    """``kept`` moved by the labels added since, or None when more than labels changed:
    a case added or edited (an audit-log row other than a label or a gold label), labels
    that are not all in the id range since (a label committed late, under a lower id), or
    more changes than are worth a look."""
    n0, top0, cases0, case_top0, audit0 = kept.stamp
    n1, top1, cases1, case_top1, audit1 = now
    if (cases0, case_top0) != (cases1, case_top1) or n1 < n0 or top1 < top0:
        return None
    if n1 - n0 > _MOST_CHANGES or audit1 - audit0 > _MOST_CHANGES:
        return None
    new = (Label.id > top0, Label.id <= top1)
    with read_session(engine) as s:
        other = s.scalar(
            select(func.count())
            .select_from(AuditLog)
            .where(AuditLog.id > audit0, AuditLog.id <= audit1, AuditLog.action.not_in(_LABEL_ONLY))
        )
        added = s.scalar(select(func.count()).select_from(Label).where(*new))
        if other or added != n1 - n0:
            return None
        touched = sorted(
            int(c)
            for c in s.scalars(
                select(Case.id).where(
                    Case.id.in_(select(Label.case_id).where(*new)),
                    Case.status == CaseStatus.ready,
                    *queue.conditions(),
                )
            )
        )
        if not touched:
            return kept.counts
        of_touched = one_of(s, Label.case_id, touched)
        before = {
            int(c): (int(n), int(m)) for c, n, m in s.execute(_per_case(email, of_touched, top0))
        }
        after = {
            int(c): (int(n), int(m)) for c, n, m in s.execute(_per_case(email, of_touched, top1))
        }
    c = kept.counts
    labels, complete, mine, without_me = c.labels, c.complete, c.mine, c.complete_without_me
    for case_id in touched:
        for (n, m), sign in ((before.get(case_id, (0, 0)), -1), (after[case_id], 1)):
            full = n >= c.overlap
            labels += sign * n
            complete += sign * int(full)
            mine += sign * m
            without_me += sign * int(full and not m)
    return LabelCounts(c.ready, labels, complete, mine, without_me, c.overlap)


def queue_progress(
    engine: Engine,
    actor: Actor,
    counts: LabelCounts,
    queue: QueueFilter = NO_FILTER,
    now: dt.datetime | None = None,
) -> tuple[Progress, int]:
    """:func:`review.labels.labeling.progress` and :func:`review.labels.labeling.queue_size`
    from ``counts`` (:func:`label_counts` of the same filter, as the data stand now) and the
    live reservations.

    The counts say which ready cases are in my queue by their labels alone (not labeled by
    me, below the overlap); a live reservation moves only the case it holds: out of my queue
    when other people's reservations fill its overlap, back in when I hold it. Without
    clearance, a case listing a restricted document is not in my queue (as in the rule): those
    are few, so they are read each time, with their labels."""
    t = now or utcnow()
    hidden_left = 0
    hidden_held: set[int] = set()
    with read_session(engine) as s:
        if not clearance.cleared(actor):
            hidden = select(Case.id).where(
                Case.status == CaseStatus.ready,
                *queue.conditions(),
                clearance.lists_restricted_document(),
            )
            per_hidden = _per_case(actor.email, Label.case_id.in_(hidden)).subquery()
            full = per_hidden.c.n >= counts.overlap
            n_hidden = int(s.scalar(select(func.count()).select_from(hidden.subquery())) or 0)
            mine_h, without_me_h = s.execute(
                select(
                    func.coalesce(func.sum(per_hidden.c.mine), 0),
                    func.coalesce(func.sum(case((full & (per_hidden.c.mine == 0), 1), else_=0)), 0),
                )
            ).one()
            hidden_left = n_hidden - int(mine_h) - int(without_me_h)
        live = s.execute(
            select(Reservation.case_id, Reservation.annotator).where(Reservation.expires_at > t)
        ).all()
        held = {int(c) for c, a in live if a == actor.email}
        others = Counter(int(c) for c, a in live if a != actor.email)
        reserved = sorted(held | set(others))
        in_queue: set[int] = set()
        per: dict[int, tuple[int, bool]] = {}
        if reserved:
            in_queue = {
                int(c)
                for c in s.scalars(
                    select(Case.id).where(
                        one_of(s, Case.id, reserved),
                        Case.status == CaseStatus.ready,
                        *queue.conditions(),
                    )
                )
            }
        if in_queue and not clearance.cleared(actor):
            hidden_held = {
                int(c)
                for c in s.scalars(
                    select(Case.id).where(
                        one_of(s, Case.id, sorted(in_queue)),
                        clearance.lists_restricted_document(),
                    )
                )
            }
        if in_queue:
            per = {
                int(c): (int(n), bool(m))
                for c, n, m in s.execute(
                    _per_case(actor.email, one_of(s, Label.case_id, sorted(in_queue)))
                ).all()
            }
    left = counts.ready - counts.mine - counts.complete_without_me - hidden_left
    for c in in_queue:
        n, mine = per.get(c, (0, False))
        if mine or c in hidden_held:  # a hidden case is never in my queue, held or not
            continue
        by_labels = n < counts.overlap
        now_in = n + others[c] < counts.overlap or c in held
        left += int(now_in) - int(by_labels)
    prog = Progress(
        counts.mine, counts.ready, counts.complete, counts.labels, counts.overlap, len(held)
    )
    return prog, left
