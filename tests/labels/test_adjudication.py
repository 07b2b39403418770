"""Adjudication (issue 17, item 6): a reviewer does not set the gold label of a case they
labeled unless an admin allows it; their list leaves such cases out (or marks them), and
moves next/previous through the disagreements."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from review.admin import users
from review.core.errors import PermissionDenied, StaleWriteError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import adjudication, labeling
from storage.db import read_session
from storage.models import Adjudication, Label, Setting
from tests.helpers.actors import make_actor

ADMIN = make_actor("admin", "admin@example.org")


def demo_actor(engine: Engine, email: str) -> Actor:
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def ravi(engine: Engine) -> Actor:
    """The demo's reviewer, who is also an annotator and labeled a third of the cases."""
    return demo_actor(engine, "ravi.menon@brightwave.example")


def queue_of(engine: Engine, actor: Actor) -> adjudication.ReviewerQueue:
    return adjudication.reviewer_queue(
        engine, actor, labeling.disagreements(engine, limit=10_000), 10_000
    )


def split_by_ravi(engine: Engine) -> tuple[list[int], list[int]]:
    """The demo's open disagreements Ravi labeled, and those he did not."""
    found = [cid for cid, _, _ in labeling.disagreements(engine, limit=10_000)]
    mine = adjudication.labeled_by(engine, "ravi.menon@brightwave.example", found)
    return [c for c in found if c in mine], [c for c in found if c not in mine]


def test_a_reviewer_may_not_adjudicate_a_case_they_labeled(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    reviewer = ravi(demo_engine)
    mine, others = split_by_ravi(demo_engine)
    assert mine and others, "the demo has disagreements on both sides"
    assert adjudication.get_settings(demo_engine).self_adjudication is False  # the default
    with pytest.raises(PermissionDenied, match="you labeled this case yourself"):
        labeling.adjudicate(demo_engine, reviewer, mine[0], "answer", [], "mine", tax)
    assert labeling.gold_history(demo_engine, mine[0]) == []
    assert mine[0] in split_by_ravi(demo_engine)[0]  # still waits for another reviewer
    gold = labeling.adjudicate(
        demo_engine, reviewer, others[0], "abstain", ["no_answer_bearing_evidence"], "ok", tax
    )
    assert gold.adjudicator == reviewer.email
    assert others[0] not in split_by_ravi(demo_engine)[1]


def test_an_admin_setting_allows_self_adjudication(demo_engine: Engine, tax: Taxonomy) -> None:
    reviewer = ravi(demo_engine)
    mine, _ = split_by_ravi(demo_engine)
    cfg = adjudication.get_settings(demo_engine)
    with pytest.raises(PermissionDenied):  # only admins change it
        adjudication.set_settings(demo_engine, reviewer, True, cfg.version)
    saved = adjudication.set_settings(demo_engine, ADMIN, True, cfg.version)
    assert saved.self_adjudication and saved.version == cfg.version + 1
    with read_session(demo_engine) as s:  # stored through the one settings writer
        row = s.get(Setting, adjudication.SETTINGS_KEY)
        assert row is not None and row.updated_by == ADMIN.email
    with pytest.raises(StaleWriteError):  # someone saved it since version cfg.version
        adjudication.set_settings(demo_engine, ADMIN, False, cfg.version)
    gold = labeling.adjudicate(demo_engine, reviewer, mine[0], "answer", [], "allowed", tax)
    assert gold.case_id == mine[0]
    adjudication.set_settings(demo_engine, ADMIN, False, saved.version)
    with pytest.raises(PermissionDenied, match="an admin can allow"):
        labeling.adjudicate(demo_engine, reviewer, mine[1], "answer", [], "again", tax)


def test_the_reviewers_list_hides_their_cases_or_marks_them_when_allowed(
    demo_engine: Engine,
) -> None:
    reviewer = ravi(demo_engine)
    mine, others = split_by_ravi(demo_engine)
    listed = queue_of(demo_engine, reviewer)
    assert listed.ids() == others
    assert listed.hidden == len(mine)
    assert not any(e.mine for e in listed.entries)
    cfg = adjudication.get_settings(demo_engine)
    adjudication.set_settings(demo_engine, ADMIN, True, cfg.version)
    allowed = queue_of(demo_engine, reviewer)
    assert allowed.ids() == sorted(mine + others)
    assert {e.case_id for e in allowed.entries if e.mine} == set(mine)
    assert allowed.hidden == 0
    # a reviewer who labels nothing sees every disagreement, none marked
    other = make_actor("reviewer", "someone@example.org")
    assert queue_of(demo_engine, other).hidden == 0


def test_next_and_previous_walk_the_list() -> None:
    q = adjudication.ReviewerQueue(
        tuple(adjudication.QueueEntry(c, f"CASE-{c:03d}", 2, False) for c in (3, 7, 9)), 0, False
    )
    assert q.neighbours(3) == (None, 7)
    assert q.neighbours(7) == (3, 9)
    assert q.neighbours(9) == (7, None)
    assert q.neighbours(5) == (None, 3)  # a deep link to a case not listed: start the list
    assert q.position(7) == 2 and q.position(5) is None
    empty = adjudication.ReviewerQueue((), 0, False)
    assert empty.neighbours(None) == (None, None)


def test_the_demo_has_no_self_adjudication(demo_engine: Engine) -> None:
    """The demo's gold labels keep the rule: no adjudicator labeled the case they settled."""
    with read_session(demo_engine) as s:
        rows = s.execute(select(Adjudication.case_id, Adjudication.adjudicator)).all()
        assert rows
        for case_id, who in rows:
            assert not s.scalar(
                select(Label.id).where(Label.case_id == case_id, Label.annotator == who)
            ), (case_id, who)
