"""Blind labeling: an annotator sees none of the author's judgement before labeling a case;
it appears after their label, and to reviewers who may no longer label the case blind."""

from __future__ import annotations

from sqlalchemy import Engine

from review.cases import cases
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy
from review.labels import blind, labeling
from tests.helpers.actors import make_actor

INES = make_actor("annotator", "ines@example.org")
TOM = make_actor("annotator", "tom@example.org")
RAVI = make_actor("reviewer", "ravi@example.org")
RAVI_BOTH = Actor(
    id=7,
    email="ravi2@example.org",
    name="Ravi",
    roles=frozenset({Role.reviewer, Role.annotator}),
)


def _case_with_roles(engine: Engine) -> cases.CaseView:
    """A ready, unlabeled demo case whose first document is decisive (the order an author
    uses) and whose references are not already in that order, and whose text an annotator
    without clearance may read."""
    for row in cases.list_cases(engine, cases.CaseFilter(status="ready"), page_size=200):
        if labeling.current_labels(engine, row.id):
            continue
        view = cases.get_case(engine, case_id=row.id)
        assert view is not None
        if view.text_restricted:
            continue
        refs = [d.ref for d in view.documents]
        if len(refs) > 1 and view.documents[0].role == "decisive" and refs != sorted(refs):
            return view
    raise AssertionError("the demo has a case listing its decisive document first, unsorted")


def test_an_annotator_who_has_not_labeled_sees_no_judgement(demo_engine: Engine) -> None:
    view = _case_with_roles(demo_engine)
    assert not blind.judgement_visible(demo_engine, INES, view.id)
    shown = blind.labeling_case(view, visible=False)
    assert shown.blind
    assert all(d.role is None for d in shown.documents)
    assert shown.suggested_category is None and shown.evidence_state is None
    assert shown.expected_decision is None and shown.expected_message is None
    assert shown.expected_reasons == () and shown.notes == ""
    # the order does not give the decisive document away either: listed by reference
    assert [d.ref for d in shown.documents] == sorted(d.ref for d in view.documents)
    # the evidence itself is all there
    assert {d.document_id for d in shown.documents} == {d.document_id for d in view.documents}
    assert shown.question == view.question and shown.required_claims == view.required_claims


def test_the_judgement_appears_after_my_label(demo_engine: Engine, tax: Taxonomy) -> None:
    view = _case_with_roles(demo_engine)
    labeling.submit(demo_engine, INES, view.id, labeling.LabelIn("answer"), None, tax)
    assert blind.judgement_visible(demo_engine, INES, view.id)
    shown = blind.labeling_case(view, visible=True)
    assert not shown.blind
    assert [d.role for d in shown.documents] == [d.role for d in view.documents]
    assert shown.suggested_category == view.category
    assert shown.expected_decision == view.expected_decision
    assert not blind.judgement_visible(demo_engine, TOM, view.id)  # others still blind


def test_reviewers_see_it_unless_they_may_still_label_the_case_blind(
    demo_engine: Engine,
) -> None:
    view = _case_with_roles(demo_engine)
    assert blind.judgement_visible(demo_engine, RAVI, view.id)  # reviewer only
    # a reviewer who also labels stays blind while the case still needs their label
    assert labeling.still_blind(demo_engine, RAVI_BOTH, view.id)
    assert not blind.judgement_visible(demo_engine, RAVI_BOTH, view.id)
