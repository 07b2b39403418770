"""An annotator without clearance is never given a case whose question is hidden from them.

A case whose text relies on a restricted document shows its question and claims to users
without clearance as the redaction text (review.core.clearance). Labeling it blind would put a
label on agreement that nobody could have made from the evidence, so the queue gives such a
case only to annotators with clearance, the deep link refuses it, a submit is refused, and when
nothing else is left the page says what is left instead of "empty". Found by following the
annotator guide as a newcomer: Inés was handed CASE-075 and CASE-076 with their questions
redacted, and the label went in."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import Engine, func, select, text

from review.core import clearance
from review.core.errors import PermissionDenied
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import counts, labeling
from storage.db import read_session
from storage.models import Case, CaseDocument, Label, Reservation
from tests.helpers.actors import make_actor

UNCLEARED = make_actor("annotator", "new.annotator@example.org", uid=71)
CLEARED = make_actor("annotator", "cleared.annotator@example.org", clearance=True, uid=72)
#: five words only the restricted Halvorsen matter note has
RETOLD = "Halvorsen Freight AS, an Enterprise customer in the EU region"


def _hidden(engine: Engine) -> set[int]:
    """The ready cases whose text is restricted."""
    with read_session(engine) as s:
        ready = list(s.scalars(select(Case.id).where(Case.status == "ready")))
        return set(clearance.restricted_cases(s, ready))


def _retold(engine: Engine) -> set[int]:
    """Of those, the ones that list no restricted document but retell one (the demo has two:
    CASE-049 asks about a workspace "under a legal hold", in the restricted hold procedure's
    words)."""
    with read_session(engine) as s:
        listed = set(s.scalars(select(Case.id).where(clearance.lists_restricted_document())))
    return _hidden(engine) - listed


def _label() -> labeling.LabelIn:
    return labeling.LabelIn("abstain", ("no_answer_bearing_evidence",), None, "")


def _drain(engine: Engine, actor: Actor, tax: Taxonomy, exclude: Sequence[int] = ()) -> list[int]:
    """Every case the queue gives ``actor``, labeled one after the other."""
    given: list[int] = []
    while (case_id := labeling.next_case(engine, actor, exclude=exclude)) is not None:
        assert case_id not in given
        given.append(case_id)
        labeling.submit(engine, actor, case_id, _label(), None, tax)
    return given


def test_the_queue_never_gives_a_hidden_question_to_an_annotator_without_clearance(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    hidden, retold = _hidden(demo_engine), _retold(demo_engine)
    assert len(hidden) >= 5 and len(retold) == 2
    open_before = labeling.queue_size(demo_engine, UNCLEARED)
    given = _drain(demo_engine, UNCLEARED, tax)
    assert given and not set(given) & hidden
    # the count had every case the queue gave, and the two that retell a restricted document
    assert len(given) == open_before - len(retold)
    assert labeling.queue_size(demo_engine, UNCLEARED) == len(retold)
    assert labeling.empty_queue_message(demo_engine, UNCLEARED) == (
        "info",
        "Nothing more to open here. Left in your queue: 2 cases whose question retells a "
        "restricted document, which wait for an annotator with clearance.",
    )
    # an annotator with clearance gets them, and empties the queue
    assert hidden & set(_drain(demo_engine, CLEARED, tax))
    assert labeling.empty_queue_message(demo_engine, CLEARED) == (
        "success",
        "Your queue is empty: nothing left to label here.",
    )


def test_a_hidden_case_is_refused_by_the_deep_link_and_by_submit(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    for case_id in (min(_hidden(demo_engine) - _retold(demo_engine)), min(_retold(demo_engine))):
        with read_session(demo_engine) as s:
            key = s.scalar(select(Case.key).where(Case.id == case_id))
            before = s.scalar(select(func.count(Label.id)))
        with pytest.raises(PermissionDenied, match=f"{key} relies on a restricted document"):
            labeling.reserve(demo_engine, UNCLEARED, case_id)
        with pytest.raises(PermissionDenied, match="only annotators with clearance may label"):
            labeling.submit(demo_engine, UNCLEARED, case_id, _label(), None, tax)
        with read_session(demo_engine) as s:
            assert s.scalar(select(func.count(Label.id))) == before
        labeling.reserve(demo_engine, CLEARED, case_id)
        labeling.submit(demo_engine, CLEARED, case_id, _label(), None, tax)


def test_a_question_made_to_retell_a_restricted_document_leaves_the_queue(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    hidden = _hidden(demo_engine)
    with read_session(demo_engine) as s:
        target = s.scalar(
            select(Case.id)
            .where(Case.status == "ready", Case.id.not_in(sorted(hidden)))
            .order_by(Case.id.desc())
            .limit(1)
        )
    assert target is not None
    with demo_engine.begin() as c:
        c.execute(
            text("update cases set question = question || :t where id = :i"),
            {"t": f" (as for {RETOLD})", "i": target},
        )
    assert target in _hidden(demo_engine)
    assert target not in _drain(demo_engine, UNCLEARED, tax)
    kind, said = labeling.empty_queue_message(demo_engine, UNCLEARED)
    assert (kind, said) == (
        "info",
        "Nothing more to open here. Left in your queue: 3 cases whose question retells a "
        "restricted document, which wait for an annotator with clearance.",
    )


def test_skipped_cases_are_named_when_nothing_else_is_left(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    first = labeling.next_case(demo_engine, UNCLEARED)
    assert first is not None
    labeling.release(demo_engine, UNCLEARED, first)
    _drain(demo_engine, UNCLEARED, tax, exclude=[first])
    assert labeling.empty_queue_message(demo_engine, UNCLEARED, skipped=[first]) == (
        "info",
        "Nothing more to open here. Left in your queue: 1 case you skipped this session "
        "(bring them back below); 2 cases whose question retells a restricted document, "
        "which wait for an annotator with clearance.",
    )


def test_a_case_restricted_while_held_is_let_go(demo_engine: Engine) -> None:
    hidden = _hidden(demo_engine)
    with read_session(demo_engine) as s:
        case_id, doc = s.execute(
            select(CaseDocument.case_id, CaseDocument.document_id)
            .join(Case, Case.id == CaseDocument.case_id)
            .where(Case.status == "ready", Case.id.not_in(sorted(hidden)))
            .order_by(Case.id.desc())
            .limit(1)
        ).one()
    labeling.reserve(demo_engine, UNCLEARED, case_id)
    with demo_engine.begin() as c:
        c.execute(
            text("update documents set access_scope = 'restricted' where id = :d"), {"d": doc}
        )
    # the page's kept counts agree with the rule while the hidden case is still held
    overlap = labeling.get_settings(demo_engine).overlap
    kept = counts.label_counts(demo_engine, UNCLEARED.email, overlap)
    assert counts.queue_progress(demo_engine, UNCLEARED, kept)[1] == labeling.queue_size(
        demo_engine, UNCLEARED
    )
    assert labeling.next_case(demo_engine, UNCLEARED) != case_id
    with read_session(demo_engine) as s:
        held = s.scalar(
            select(func.count(Reservation.id)).where(
                Reservation.case_id == case_id, Reservation.annotator == UNCLEARED.email
            )
        )
    assert held == 0
