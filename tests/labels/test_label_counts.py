"""The Label page's progress and queue size from kept label counts and the live reservations
(review.labels.counts) equal the rules (labeling.progress, labeling.queue_size) in every state
the queue goes through; the counts' stamp moves with a label, not with a reservation."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine

from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import counts, labeling, queue
from storage.models import utcnow
from tests.helpers.actors import make_actor

INES = make_actor("annotator", "ines@example.org")
TOM = make_actor("annotator", "tom@example.org")
SAM = make_actor("annotator", "sam@example.org")
ANSWER = labeling.LabelIn("answer")
ABSTAIN = labeling.LabelIn("abstain", ("no_answer_bearing_evidence",))


def _check(
    engine: Engine, q: queue.QueueFilter = queue.NO_FILTER, now: dt.datetime | None = None
) -> None:
    overlap = labeling.get_settings(engine).overlap
    for who in (INES, TOM, SAM):
        kept = counts.label_counts(engine, who.email, overlap, q)
        prog, left = counts.queue_progress(engine, who, kept, q, now=now)
        if now is None:
            assert prog == labeling.progress(engine, who, q), who.email
            assert left == labeling.queue_size(engine, who, q), who.email
        else:  # the rule's own clock: the queue as it will be at ``now``
            assert left == _queue_size_at(engine, who, q, now), who.email


def _queue_size_at(engine: Engine, who: Actor, q: queue.QueueFilter, now: dt.datetime) -> int:
    from sqlalchemy import func, select

    from storage.db import read_session

    cfg = labeling.get_settings(engine)
    with read_session(engine) as s:
        ids = (
            labeling._open_cases(who, now, cfg.overlap, held_by_me_counts=True)
            .where(*q.conditions())
            .subquery()
        )
        return int(s.scalar(select(func.count()).select_from(ids)) or 0)


def test_counts_equal_the_rules_through_the_queue(
    demo_engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    facets = queue.queue_facets(demo_engine)
    split = queue.QueueFilter(split=facets.splits[0])
    _check(demo_engine)
    _check(demo_engine, split)
    a = labeling.next_case(demo_engine, INES)
    b = labeling.next_case(demo_engine, TOM)
    assert a is not None and a == b
    # two others hold it: out of SAM's queue (overlap 2), still in INES's and TOM's
    _check(demo_engine)
    _check(demo_engine, split)
    labeling.submit(demo_engine, INES, a, ANSWER, None, tax)
    _check(demo_engine)
    # SAM holds a case that then gets the overlap from the others: still in SAM's queue
    c = labeling.next_case(demo_engine, SAM)
    assert c is not None
    labeling.submit(demo_engine, INES, c, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, c, ABSTAIN, None, tax)
    _check(demo_engine)
    _check(demo_engine, split)
    # a changed label adds a row, not an annotator
    mine = labeling.my_label(demo_engine, INES, c)
    assert mine is not None
    labeling.submit(demo_engine, INES, c, ABSTAIN, mine.id, tax)
    _check(demo_engine)
    # the reservations expire: the rules at a later time
    _check(demo_engine, now=utcnow() + dt.timedelta(minutes=31))
    # overlap 1: a case another person holds is full
    cfg = labeling.get_settings(demo_engine)
    labeling.set_settings(demo_engine, admin, 1, cfg.reservation_minutes, cfg.version)
    labeling.next_case(demo_engine, TOM)
    _check(demo_engine)
    _check(demo_engine, split)
    labeling.release(demo_engine, SAM, c)
    _check(demo_engine, queue.QueueFilter(family="FAM-NO-SUCH-FAMILY"))


def test_the_stamp_moves_with_a_label_not_with_a_reservation(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    before = counts.stamp(demo_engine)
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    assert counts.stamp(demo_engine) == before
    labeling.release(demo_engine, INES, case)
    assert counts.stamp(demo_engine) == before
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    assert counts.stamp(demo_engine) != before
