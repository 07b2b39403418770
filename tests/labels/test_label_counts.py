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
#: with clearance: cases relying on a restricted document are in her queue, not in theirs
LEA = make_actor("annotator", "lea@example.org", clearance=True)
ANSWER = labeling.LabelIn("answer")
ABSTAIN = labeling.LabelIn("abstain", ("no_answer_bearing_evidence",))


Kept = dict[tuple[str, queue.QueueFilter, int], counts.Kept]


def _check(
    engine: Engine,
    q: queue.QueueFilter = queue.NO_FILTER,
    now: dt.datetime | None = None,
    kept_by: Kept | None = None,
) -> None:
    """The counts against the rules, for each annotator; with ``kept_by``, also the counts
    brought up to date from those kept at the last check equal the counts made afresh."""
    overlap = labeling.get_settings(engine).overlap
    for who in (INES, TOM, SAM, LEA):
        kept = counts.label_counts(engine, who.email, overlap, q)
        if kept_by is not None:
            key = (who.email, q, overlap)
            moved = counts.kept_counts(engine, who.email, overlap, q, kept_by.get(key))
            assert moved.counts == kept, who.email
            kept_by[key] = moved
        prog, left = counts.queue_progress(engine, who, kept, q, now=now)
        if now is None:
            assert prog == labeling.progress(engine, who, q), who.email
            assert left == labeling.queue_size(engine, who, q), who.email
        else:  # the rule's own clock: the queue as it will be at ``now``
            assert left == labeling.queue_size(engine, who, q, now=now), who.email


def test_counts_equal_the_rules_through_the_queue(
    demo_engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    facets = queue.queue_facets(demo_engine)
    split = queue.QueueFilter(split=facets.splits[0])
    k: Kept = {}
    _check(demo_engine, kept_by=k)
    _check(demo_engine, split, kept_by=k)
    a = labeling.next_case(demo_engine, INES)
    b = labeling.next_case(demo_engine, TOM)
    assert a is not None and a == b
    # two others hold it: out of SAM's queue (overlap 2), still in INES's and TOM's
    _check(demo_engine, kept_by=k)
    _check(demo_engine, split, kept_by=k)
    labeling.submit(demo_engine, INES, a, ANSWER, None, tax)
    _check(demo_engine, kept_by=k)
    # SAM holds a case that then gets the overlap from the others: still in SAM's queue
    c = labeling.next_case(demo_engine, SAM)
    assert c is not None
    labeling.submit(demo_engine, INES, c, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, c, ABSTAIN, None, tax)
    _check(demo_engine, kept_by=k)
    _check(demo_engine, split, kept_by=k)
    # a changed label adds a row, not an annotator
    mine = labeling.my_label(demo_engine, INES, c)
    assert mine is not None
    labeling.submit(demo_engine, INES, c, ABSTAIN, mine.id, tax)
    _check(demo_engine, kept_by=k)
    # the reservations expire: the rules at a later time
    _check(demo_engine, now=utcnow() + dt.timedelta(minutes=31))
    # overlap 1: a case another person holds is full
    cfg = labeling.get_settings(demo_engine)
    labeling.set_settings(demo_engine, admin, 1, cfg.reservation_minutes, cfg.version)
    labeling.next_case(demo_engine, TOM)
    _check(demo_engine, kept_by=k)
    _check(demo_engine, split, kept_by=k)
    labeling.release(demo_engine, SAM, c)
    _check(demo_engine, queue.QueueFilter(family="FAM-NO-SUCH-FAMILY"), kept_by=k)


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


def test_kept_counts_move_by_the_labels_added_and_count_again_after_other_changes(
    demo_engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    overlap = labeling.get_settings(demo_engine).overlap
    first = counts.kept_counts(demo_engine, INES.email, overlap)
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    assert counts.kept_counts(demo_engine, INES.email, overlap, kept=first) is first
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, case, ANSWER, None, tax)
    now = counts.stamp(demo_engine)
    # labels alone since: moved, not counted again
    moved = counts.advance(demo_engine, INES.email, queue.NO_FILTER, first, now)
    assert moved == counts.label_counts(demo_engine, INES.email, overlap)
    assert moved is not None and moved.mine == first.counts.mine + 1
    # a change of the labeling setting (not a label): counted again
    cfg = labeling.get_settings(demo_engine)
    labeling.set_settings(demo_engine, admin, overlap, 10, cfg.version)
    assert (
        counts.advance(demo_engine, INES.email, queue.NO_FILTER, first, counts.stamp(demo_engine))
        is None
    )
